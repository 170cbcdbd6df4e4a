#include "quantize/calibration.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "quantize/tensor_codec.h"
#include "tokenizer/tokenizer.h"

namespace loom {

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--calibration: cannot read '" + path.string() + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Which norm feeds each matrix that reads a normed residual stream.
const char* input_norm_of(const std::string& suffix) {
  if (suffix == "attn_q.weight" || suffix == "attn_k.weight" || suffix == "attn_v.weight") return "attn_norm.weight";
  if (suffix == "ffn_gate.weight" || suffix == "ffn_up.weight") return "ffn_norm.weight";
  return nullptr;
}

}  // namespace

CalibrationStats collect_calibration(const gguf::GgufFile& model, const Quantizer& quantizer,
                                     const std::filesystem::path& text_path, int n_threads) {
  const std::string text = read_text(text_path);
  const auto tokenizer = Tokenizer::from_gguf(model);
  const std::vector<int32_t> tokens = tokenizer->encode(text, false, false);
  if (tokens.empty()) throw Error("--calibration: '" + text_path.string() + "' encodes to no tokens");

  const gguf::TensorInfo* embd = model.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) throw Error("--calibration: the model has no 2-D token_embd.weight");
  const int64_t dim = embd->dims[0];
  const uint64_t row_bytes = dtype_row_bytes(embd->type, dim);
  const auto data = model.tensor_data(*embd);

  std::unordered_map<int32_t, int64_t> counts;
  for (int32_t t : tokens) ++counts[t];

  // mean over tokens of (e_t / rms(e_t))^2, per column
  std::vector<double> mean_sq(static_cast<size_t>(dim), 0.0);
  for (const auto& [token, count] : counts) {
    if (token < 0 || token >= embd->dims[1]) continue;
    const auto row = decode_tensor(quantizer, embd->type, data.subspan(static_cast<uint64_t>(token) * row_bytes, row_bytes),
                                   1, dim, n_threads);
    double ss = 0.0;
    for (float v : row) ss += double(v) * v;
    const double ms = ss / static_cast<double>(dim);
    if (ms <= 0.0) continue;
    for (int64_t c = 0; c < dim; ++c) mean_sq[size_t(c)] += double(count) * row[size_t(c)] * row[size_t(c)] / ms;
  }
  for (double& v : mean_sq) v /= static_cast<double>(tokens.size());

  CalibrationStats stats;
  stats.n_tokens = static_cast<int64_t>(tokens.size());
  for (const auto& tensor : model.tensors()) {
    const auto dot = tensor.name.rfind('.', tensor.name.size() - std::string(".weight").size() - 1);
    if (tensor.name.rfind("blk.", 0) != 0 || dot == std::string::npos) continue;
    const std::string prefix = tensor.name.substr(0, dot + 1), suffix = tensor.name.substr(dot + 1);
    const char* norm_name = input_norm_of(suffix);
    if (norm_name == nullptr || tensor.dims.empty() || tensor.dims[0] != dim) continue;
    const gguf::TensorInfo* norm = model.find_tensor(prefix + norm_name);
    if (norm == nullptr || norm->n_elements != dim) continue;
    const auto w = decode_tensor(quantizer, norm->type, model.tensor_data(*norm), 1, dim, 1);
    std::vector<float> importance(static_cast<size_t>(dim));
    for (int64_t c = 0; c < dim; ++c) {
      importance[size_t(c)] = static_cast<float>(double(w[size_t(c)]) * w[size_t(c)] * mean_sq[size_t(c)]);
    }
    stats.importance.emplace(tensor.name, std::move(importance));
  }
  return stats;
}

}  // namespace loom
