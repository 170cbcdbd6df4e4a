// quantize_model — re-encode every tensor of a GGUF model to a target type (see quant_plan.h for
// which tensor gets which type), copying all metadata, and measure the error each tensor took.
//
// Steps per tensor: decode to f32 (tensor_codec.h), encode to the planned type through the quantizer
// plugin, decode the result again and compare with the f32 input. The output is written to a
// temporary file beside OUT and renamed over it at the end, so a failure never leaves a half-written
// OUT behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "quantize/quant_mix.h"
#include "quantize/quant_plan.h"

namespace loom {

class Quantizer;
namespace gguf {
class GgufFile;
class GgufWriter;
}  // namespace gguf

// Every metadata entry of `in` except general.alignment (the writer sets it from its own alignment)
// and the keys in `skip`, byte for byte.
void copy_gguf_metadata(const gguf::GgufFile& in, gguf::GgufWriter& writer, const std::vector<std::string>& skip = {});

struct QuantizeOptions {
  std::filesystem::path input;
  std::filesystem::path output;
  loom_dtype target = LOOM_DTYPE_Q8_0;
  EmbeddingPolicy embeddings = EmbeddingPolicy::automatic;
  // A llama.cpp mix (Q4_K_M, ...): its rules choose each tensor's type, target is the mix's base type
  // and embeddings are ignored (the mix decides the output matrix too).
  std::optional<QuantMix> mix;
  bool force = false;                   // allow replacing an existing output (never the input)
  std::filesystem::path calibration;    // text for I4_G128 importance (calibration.h); empty = none
  int n_threads = 1;
  // Store tensors planned as a Loom-only type (I4_G128, I8_ROW) as F32 holding their decoded values:
  // the exact numbers the format represents, readable by a backend without kernels for it (the CPU
  // backend has none today), so that format's quality can be measured (loom perplexity). The file
  // says so in loom.quantize.simulated.
  bool simulate = false;
  // loom convert's rules (plan_tensors' as_converter): block types copied, biases and routers F32.
  bool as_converter = false;
};

struct TensorReport {
  TensorPlan plan;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  double rms_input = 0.0;     // RMS of the input values
  double rel_rms_error = 0.0;  // RMS(out - in) / RMS(in); 0 when copied
  double rel_max_error = 0.0;  // max |out - in| / max |in|
  bool used_importance = false;
};

struct QuantizeReport {
  std::vector<TensorReport> tensors;
  uint64_t bytes_in = 0;   // tensor data
  uint64_t bytes_out = 0;
  int64_t n_weights = 0;
  uint32_t file_type = 0;
  int64_t n_calibration_tokens = 0;
  double seconds = 0.0;
};

// done tensors so far, total, the tensor being worked on (called before each tensor and at the end
// with done == total).
using QuantizeProgress = std::function<void(size_t done, size_t total, const std::string& tensor)>;

// loom::Error (nothing written) when OUT is the input (same path, symlink or hard link), when OUT
// exists without force, or when OUT's folder does not exist.
void check_output_path(const std::filesystem::path& input, const std::filesystem::path& output, bool force);

// loom::Error for unreadable input, an unsupported tensor type, a quantizer failure, or I/O errors.
QuantizeReport quantize_model(const QuantizeOptions& options, const Quantizer& quantizer,
                              const QuantizeProgress& progress = {});

}  // namespace loom
