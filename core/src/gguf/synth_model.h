// Synthetic models: seeded random weights in a real llama.cpp layout (same GGUF keys and tensor
// names), small enough for tests and big enough to exercise every code path of a loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/dtype.h"

namespace loom::gguf {

class GgufWriter;

struct SynthSpec {
  std::string arch = "llama";  // llama | qwen2 | qwen2moe | qwen3 | qwen3moe | qwen35 | qwen35moe | qwen3next | gpt-oss | gemma2 | gemma3 | olmo2 | granite | smollm3 | phi3 | mistral3
  std::string name = "loom-synthetic";
  int n_layers = 2;
  int dim = 64;        // embedding_length
  int n_heads = 4;
  int n_kv_heads = 2;
  int head_dim = 0;    // 0: dim / n_heads
  int ff_dim = 128;
  int n_vocab = 512;   // ignored when vocab_from is set: the copied vocabulary decides
  int n_ctx = 256;
  loom_dtype weight_type = LOOM_DTYPE_F32;  // of the matrices (incl. embeddings): F32, F16, BF16, Q8_0, Q4_0
  uint64_t seed = 1;
  std::filesystem::path vocab_from;  // optional: copy every tokenizer.* key from this GGUF
  bool image_markers = false;        // the synthetic vocabulary ends with <start_of_image> and <end_of_image> (control)
  std::vector<std::string> control_tokens;  // and then these control tokens (e.g. Pixtral's [IMG_BREAK], [IMG_END])
  float rms_eps = 0.0f;              // 0: the arch's usual value (1e-6 gemma3, 1e-5 llama, 1e-6 qwen2)
  float rope_freq_base = 0.0f;       // 0: the arch's usual value (10000 llama, 1e6 qwen2 and gemma3)
  int sliding_window = 0;            // gemma2 and gemma3 only; 0: 512
  float rope_scaling_factor = 0.0f;  // gemma3 only; > 1 writes rope.scaling.type "linear" + factor
  bool llama3_rope = false;          // llama only: rope_freqs.weight as Llama 3.1's converter computes it
  // > 0: YaRN extending this original context to n_ctx (rope.scaling.type yarn, factor n_ctx / it);
  // mistral3 adds Ministral 3's yarn_log_multiplier 1 and temperature tuning (beta 0.1).
  int yarn_original_ctx = 0;
  int pooling = 0;                   // > 0: <arch>.pooling_type (1 mean, 2 cls, 3 last), a decoder used as an embedder
  bool classifier = false;           // a reranker: bert (bge-reranker's cls and cls.output heads) or qwen3 (Qwen3-Reranker's yes/no head)
  int longrope_original_ctx = 0;     // phi3 only, > 0: LongRoPE (long/short factors, attn factor) extending this context to n_ctx
  // the MoE archs only (qwen2moe, qwen3moe, qwen35moe, qwen3next, gpt-oss): experts per layer (0: 8), chosen per token (0: 2) and their FFN width (0: ff_dim).
  int n_expert = 0;
  int n_expert_used = 0;
  int expert_ff_dim = 0;
  loom_dtype expert_type = -1;  // of the expert tensors; -1: weight_type (gpt-oss ships MXFP4 experts)
};

// Resolve defaults (head_dim, eps, rope base, ...) and check the spec; throws loom::Error naming the
// field when it is out of range or incompatible with the weight type's block size.
SynthSpec resolve_synth_spec(const SynthSpec& spec);

// Metadata and tensors of the synthetic model, written to `writer`.
void build_synthetic_model(const SynthSpec& spec, GgufWriter& writer);
void write_synthetic_model(const SynthSpec& spec, const std::filesystem::path& out);

// The tiny SentencePiece ("llama") vocabulary used when no vocab_from is given: <unk>, <s>, </s>,
// the 256 byte tokens, then word pieces, n_vocab tokens in all (>= 300).
// With image_markers, it ends with Gemma 3's <start_of_image> and <end_of_image>, then `control_tokens`
// (the last ids, so the other tokens keep theirs).
void add_synthetic_vocab(GgufWriter& writer, int n_vocab, bool image_markers = false, const std::vector<std::string>& control_tokens = {});

}  // namespace loom::gguf
