// Synthetic llama / qwen2 / qwen3 / gemma2 / gemma3 / olmo2 / granite models. Key and tensor names are llama.cpp's (llama-arch.cpp),
// matrices are stored ne0 = input dim, norm weights and biases are F32.
#include "gguf/synth_model.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_builder.h"
#include "gguf/synth_bert.h"
#include "gguf/synth_gemma4.h"
#include "gguf/synth_qwen35.h"

namespace loom::gguf {

namespace {

void copy_vocab(const std::filesystem::path& from, GgufWriter& writer, int& n_vocab) {
  GgufFile vocab = GgufFile::open(from);
  for (const MetadataEntry& entry : vocab.metadata()) {
    if (!entry.key.starts_with("tokenizer.")) continue;
    std::vector<uint8_t> encoded;
    if (entry.value.type == ValueType::array) {
      // The parsed value holds only the elements; the file encoding starts with type and count.
      const auto element_type = static_cast<uint32_t>(entry.value.array_type);
      const uint64_t count = entry.value.array_size;
      encoded.resize(12);
      std::memcpy(encoded.data(), &element_type, 4);
      std::memcpy(encoded.data() + 4, &count, 8);
    }
    encoded.insert(encoded.end(), entry.value.raw.begin(), entry.value.raw.end());
    writer.set_raw(entry.key, static_cast<uint32_t>(entry.value.type), std::move(encoded));
  }
  const MetadataValue* tokens = vocab.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != ValueType::array || tokens->array_size == 0) {
    throw Error(from.string() + ": has no tokenizer.ggml.tokens array to copy");
  }
  if (tokens->array_size > 0x7fffffff) throw Error(from.string() + ": vocabulary too large");
  n_vocab = static_cast<int>(tokens->array_size);
}

// Llama 3.1's published rope_scaling (factor 8, low_freq_factor 1, high_freq_factor 4, original
// context 8192) turned into per-pair divisors as convert_hf_to_gguf.py does: short wavelengths keep
// their frequency, long ones are divided by the factor, the band between is interpolated.
std::vector<float> llama3_rope_factors(const SynthSpec& spec) {
  constexpr double kFactor = 8.0, kLowFreqFactor = 1.0, kHighFreqFactor = 4.0, kOriginalContext = 8192.0;
  const double low_freq_wavelen = kOriginalContext / kLowFreqFactor, high_freq_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> factors;
  for (int i = 0; i < spec.head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(double(spec.rope_freq_base), 2.0 * i / spec.head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(static_cast<float>(kFactor));
    } else {
      const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / kFactor + smooth)));
    }
  }
  return factors;
}

// LongRoPE's two factor sets, shaped like Phi-3.5's: short ones near 1, long ones rising to ~16 for
// the slowest pairs. Distinct enough that using the wrong set changes every logit.
std::vector<float> longrope_factors(const SynthSpec& spec, bool long_set) {
  std::vector<float> factors;
  const int n = spec.head_dim / 2;
  for (int i = 0; i < n; ++i) {
    const double t = n > 1 ? double(i) / (n - 1) : 0.0;
    factors.push_back(static_cast<float>(long_set ? 1.0 + 15.0 * t * t : 1.0 + 0.5 * t));
  }
  return factors;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("synthetic model: " + what);
}

}  // namespace

SynthSpec resolve_synth_spec(const SynthSpec& in) {
  SynthSpec spec = in;
  const bool is_llama = spec.arch == "llama" || spec.arch == "smollm3";
  const bool is_gemma = spec.arch == "gemma3" || spec.arch == "gemma2" || spec.arch == "gemma4" || spec.arch == "gemma-embedding";
  const bool is_moe = spec.arch == "qwen3moe" || spec.arch == "gpt-oss" || spec.arch == "qwen2moe" || spec.arch == "qwen35moe" ||
                      spec.arch == "qwen3next";
  require(is_llama || is_gemma || is_moe || spec.arch == "bert" || spec.arch == "nomic-bert" || spec.arch == "jina-bert-v2" || spec.arch == "modern-bert" || spec.arch == "qwen2" || spec.arch == "qwen2vl" || spec.arch == "qwen3" || spec.arch == "qwen3vl" || spec.arch == "qwen35" || spec.arch == "olmo2" ||
              spec.arch == "granite" || spec.arch == "phi3" || spec.arch == "mistral3",
          "arch '" + spec.arch + "' is not supported (bert, nomic-bert, jina-bert-v2, modern-bert, gemma-embedding, llama, qwen2, qwen2vl, qwen2moe, qwen3, qwen3vl, qwen3moe, qwen35, qwen35moe, qwen3next, gpt-oss, gemma2, gemma3, gemma4, olmo2, granite, smollm3, phi3, mistral3)");
  require(spec.n_layers >= 1 && spec.n_layers <= 1024, "n_layers " + std::to_string(spec.n_layers) + " (1..1024)");
  require(spec.dim >= 1 && spec.dim <= 65536, "dim " + std::to_string(spec.dim) + " (1..65536)");
  require(spec.n_heads >= 1 && spec.n_heads <= 1024, "n_heads " + std::to_string(spec.n_heads) + " (1..1024)");
  require(spec.n_kv_heads >= 1 && spec.n_heads % spec.n_kv_heads == 0,
          "n_kv_heads " + std::to_string(spec.n_kv_heads) + " must divide n_heads " + std::to_string(spec.n_heads));
  if (spec.head_dim == 0) {
    require(spec.dim % spec.n_heads == 0, "dim " + std::to_string(spec.dim) + " is not a multiple of n_heads " +
                                              std::to_string(spec.n_heads) + " (or give head_dim)");
    spec.head_dim = spec.dim / spec.n_heads;
  }
  require(spec.head_dim >= 2 && spec.head_dim % 2 == 0 && spec.head_dim <= 1024,
          "head_dim " + std::to_string(spec.head_dim) + " (even, 2..1024)");
  require(spec.ff_dim >= 1 && spec.ff_dim <= 262144, "ff_dim " + std::to_string(spec.ff_dim) + " (1..262144)");
  require(spec.n_ctx >= 1, "n_ctx " + std::to_string(spec.n_ctx) + " (>= 1)");
  const auto type = spec.weight_type;
  require(type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_BF16 || type == LOOM_DTYPE_Q8_0 ||
              type == LOOM_DTYPE_Q4_0,
          "weight type " + dtype_name(type) + " is not supported (F32, F16, BF16, Q8_0, Q4_0)");
  const int64_t block = dtype_traits(type)->block_elems;
  for (auto [what, n] : {std::pair{"dim", spec.dim}, {"n_heads * head_dim", spec.n_heads * spec.head_dim},
                         {"ff_dim", spec.ff_dim}}) {
    require(n % block == 0, std::string(what) + " " + std::to_string(n) + " is not a multiple of the " +
                                dtype_name(type) + " block size " + std::to_string(block));
  }
  require(is_moe || (spec.n_expert == 0 && spec.n_expert_used == 0 && spec.expert_ff_dim == 0 && spec.expert_type < 0),
          "experts are for the MoE archs (qwen2moe, qwen3moe, qwen35moe, qwen3next, gpt-oss) only");
  if (is_moe) {
    if (spec.n_expert == 0) spec.n_expert = 8;
    if (spec.n_expert_used == 0) spec.n_expert_used = 2;
    if (spec.expert_ff_dim == 0) spec.expert_ff_dim = spec.ff_dim;
    require(spec.n_expert >= 1 && spec.n_expert <= 256, "n_expert " + std::to_string(spec.n_expert) + " (1..256)");
    require(spec.n_expert_used >= 1 && spec.n_expert_used <= spec.n_expert,
            "n_expert_used " + std::to_string(spec.n_expert_used) + " (1..n_expert)");
    if (spec.expert_type < 0) spec.expert_type = type;
    require(spec.expert_type == type || spec.expert_type == LOOM_DTYPE_MXFP4 || spec.expert_type == LOOM_DTYPE_F32,
            "expert type " + dtype_name(spec.expert_type) + " (the weight type, F32 or MXFP4)");
    const int64_t expert_block = dtype_traits(spec.expert_type)->block_elems;
    require(spec.expert_ff_dim >= 1 && spec.expert_ff_dim % std::max(block, expert_block) == 0 && spec.dim % expert_block == 0,
            "expert_ff_dim " + std::to_string(spec.expert_ff_dim) + " and dim (multiples of the block sizes)");
  }
  const bool llama_like = is_llama || spec.arch == "granite" || spec.arch == "phi3" || spec.arch == "mistral3";
  if (spec.rms_eps == 0.0f) spec.rms_eps = llama_like ? 1e-5f : 1e-6f;
  require(!spec.llama3_rope || spec.arch == "llama", "llama3_rope is for arch llama only");
  require(spec.longrope_original_ctx == 0 || (spec.arch == "phi3" && spec.longrope_original_ctx >= 2 &&
                                              spec.longrope_original_ctx < spec.n_ctx),
          "longrope_original_ctx is for arch phi3 only, and must be in 2..n_ctx-1");
  require(spec.yarn_original_ctx == 0 || (spec.yarn_original_ctx >= 2 && spec.yarn_original_ctx < spec.n_ctx &&
                                          spec.longrope_original_ctx == 0 && !spec.llama3_rope),
          "yarn_original_ctx must be in 2..n_ctx-1, without LongRoPE or llama3 rope");
  if (spec.rope_freq_base == 0.0f) spec.rope_freq_base = spec.llama3_rope ? 500000.0f : llama_like ? 10000.0f : 1000000.0f;
  if ((is_gemma || spec.arch == "gpt-oss") && spec.sliding_window == 0) spec.sliding_window = is_gemma ? 512 : 128;
  return spec;
}

void build_synthetic_model(const SynthSpec& in, GgufWriter& writer) {
  SynthSpec spec = resolve_synth_spec(in);
  const std::string& a = spec.arch;
  const bool is_qwen2 = a == "qwen2" || a == "qwen2vl" || a == "qwen2moe", is_gemma2 = a == "gemma2";
  const bool is_gemma_embedding = a == "gemma-embedding";  // Gemma 3 blocks, bidirectional, pooled
  const bool is_gemma3 = a == "gemma3" || is_gemma_embedding;
  const bool is_gemma = is_gemma2 || is_gemma3;
  const bool is_gpt_oss = a == "gpt-oss";
  const bool is_moe = a == "qwen3moe" || a == "qwen2moe" || is_gpt_oss;
  const bool qk_norm = is_gemma3 || a == "qwen3" || a == "qwen3vl" || a == "qwen3moe";  // an RMS norm of each q and k head
  const bool is_olmo2 = a == "olmo2";              // no pre-norms; q/k norms over all heads; post norms

  writer.set_string("general.architecture", a);
  writer.set_string("general.name", spec.name);
  writer.set_uint32("general.file_type", llama_file_type(spec.weight_type));
  if (a == "qwen35" || a == "qwen35moe" || a == "qwen3next") {
    build_qwen35_model(spec, writer);
    if (spec.vocab_from.empty()) {
      add_synthetic_vocab(writer, spec.n_vocab, spec.image_markers, spec.control_tokens);
    } else {
      copy_vocab(spec.vocab_from, writer, spec.n_vocab);
    }
    writer.set_uint32(a + ".vocab_size", static_cast<uint32_t>(spec.n_vocab));
    add_qwen35_tensors(spec, writer);
    return;
  }
  if (a == "bert" || a == "nomic-bert" || a == "jina-bert-v2" || a == "modern-bert") {  // their own vocabulary (WordPiece) and layout
    build_bert_model(spec, writer);
    return;
  }
  if (a == "gemma4") {
    build_gemma4_model(spec, writer);
    if (spec.vocab_from.empty()) {
      add_synthetic_vocab(writer, spec.n_vocab, spec.image_markers, spec.control_tokens);
    } else {
      copy_vocab(spec.vocab_from, writer, spec.n_vocab);
    }
    writer.set_uint32(a + ".vocab_size", static_cast<uint32_t>(spec.n_vocab));
    add_gemma4_tensors(spec, writer);
    return;
  }
  writer.set_uint32(a + ".context_length", static_cast<uint32_t>(spec.n_ctx));
  writer.set_uint32(a + ".embedding_length", static_cast<uint32_t>(spec.dim));
  writer.set_uint32(a + ".block_count", static_cast<uint32_t>(spec.n_layers));
  if (spec.pooling > 0) writer.set_uint32(a + ".pooling_type", static_cast<uint32_t>(spec.pooling));  // an embedding model (Qwen3-Embedding: 3, last)
  if (spec.classifier) {
    // Qwen3-Reranker as llama.cpp's converter writes it: rank pooling, labels yes and no (cls.output's
    // rows, below), and the prompt a (query, document) pair is laid out in.
    require(a == "qwen3", "classifier: a decoder reranker is qwen3 (Qwen3-Reranker)");
    writer.set_uint32(a + ".pooling_type", 4);
    writer.set_string_array(a + ".classifier.output_labels", {"yes", "no"});
    writer.set_string("tokenizer.chat_template.rerank",
                      "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. "
                      "Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search "
                      "query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
                      "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  }
  writer.set_uint32(a + ".feed_forward_length", static_cast<uint32_t>(spec.ff_dim));
  writer.set_uint32(a + ".attention.head_count", static_cast<uint32_t>(spec.n_heads));
  writer.set_uint32(a + ".attention.head_count_kv", static_cast<uint32_t>(spec.n_kv_heads));
  writer.set_uint32(a + ".attention.key_length", static_cast<uint32_t>(spec.head_dim));
  writer.set_uint32(a + ".attention.value_length", static_cast<uint32_t>(spec.head_dim));
  writer.set_float32(a + ".attention.layer_norm_rms_epsilon", spec.rms_eps);
  writer.set_uint32(a + ".rope.dimension_count", static_cast<uint32_t>(spec.head_dim));
  writer.set_float32(a + ".rope.freq_base", spec.rope_freq_base);
  if (is_gemma2) {
    // Gemma 2's published values (config.json: attn_logit_softcapping, final_logit_softcapping).
    writer.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
    writer.set_float32(a + ".attn_logit_softcapping", 50.0f);
    writer.set_float32(a + ".final_logit_softcapping", 30.0f);
  }
  if (spec.yarn_original_ctx > 0) {
    writer.set_string(a + ".rope.scaling.type", "yarn");
    writer.set_float32(a + ".rope.scaling.factor", float(spec.n_ctx) / float(spec.yarn_original_ctx));
    writer.set_uint32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(spec.yarn_original_ctx));
    if (a == "mistral3") {
      // Ministral 3's published rope_parameters: beta_fast 32, beta_slow 1, mscale_all_dim 1, llama_4_scaling_beta 0.1.
      writer.set_float32(a + ".rope.scaling.yarn_beta_fast", 32.0f);
      writer.set_float32(a + ".rope.scaling.yarn_beta_slow", 1.0f);
      writer.set_float32(a + ".rope.scaling.yarn_log_multiplier", 1.0f);
      writer.set_float32(a + ".attention.temperature_scale", 0.1f);
    }
  }
  if (is_gpt_oss) writer.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  if (a == "qwen2vl") {
    // M-RoPE sections in Qwen2-VL's proportions (16, 24, 24 of 64 pairs): a quarter by time, the rest
    // split between height and width.
    const int32_t pairs = spec.head_dim / 2, t = pairs / 4;
    writer.set_int32_array(a + ".rope.dimension_sections", {t, (pairs - t) / 2, pairs - t - (pairs - t) / 2, 0});
  }
  if (a == "qwen3vl") {
    // Interleaved sections in Qwen3-VL's proportions (24, 20, 20 of 64 pairs): height and width each
    // (pairs - 4) / 3, so two pairs near the end fall to the extra component, as in the real model;
    // three deepstack layers where the model has them.
    const int32_t pairs = spec.head_dim / 2, hw = (pairs - 4) / 3;
    writer.set_int32_array(a + ".rope.dimension_sections", {pairs - 2 * hw, hw, hw, 0});
    writer.set_uint32(a + ".n_deepstack_layers", static_cast<uint32_t>(std::min(3, spec.n_layers - 1)));
  }
  if (is_moe) {
    writer.set_uint32(a + ".expert_count", static_cast<uint32_t>(spec.n_expert));
    writer.set_uint32(a + ".expert_used_count", static_cast<uint32_t>(spec.n_expert_used));
    writer.set_uint32(a + ".expert_feed_forward_length", static_cast<uint32_t>(spec.expert_ff_dim));
    if (a == "qwen2moe") writer.set_uint32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(spec.ff_dim));
  }
  if (a == "granite") {
    // Granite 3's published multipliers (config.json: embedding_multiplier, attention_multiplier,
    // residual_multiplier, logits_scaling).
    writer.set_float32(a + ".embedding_scale", 12.0f);
    writer.set_float32(a + ".attention.scale", 0.015625f);
    writer.set_float32(a + ".residual_scale", 0.22f);
    writer.set_float32(a + ".logit_scale", 8.0f);
  }
  if (is_gemma_embedding) {
    // EmbeddingGemma as converted with --sentence-transformers-dense-modules: mean pooling, then
    // dense_2 (dim -> 2 dim) and dense_3 (back to dim). Local and global layers alternate, so a small
    // model holds both (the real one: five local of each six).
    writer.set_uint32(a + ".pooling_type", 1);
    writer.set_bool(a + ".attention.causal", false);
    std::vector<bool> local;
    for (int il = 0; il < spec.n_layers; il++) local.push_back(il % 2 == 0);
    writer.set_bool_array(a + ".attention.sliding_window_pattern", local);
    writer.set_uint32(a + ".dense_2_feat_in", static_cast<uint32_t>(spec.dim));
    writer.set_uint32(a + ".dense_2_feat_out", static_cast<uint32_t>(2 * spec.dim));
    writer.set_uint32(a + ".dense_3_feat_in", static_cast<uint32_t>(2 * spec.dim));
    writer.set_uint32(a + ".dense_3_feat_out", static_cast<uint32_t>(spec.dim));
  }
  if (is_gemma3) {
    writer.set_uint32(a + ".attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
    if (spec.rope_scaling_factor > 1.0f) {
      writer.set_string(a + ".rope.scaling.type", "linear");
      writer.set_float32(a + ".rope.scaling.factor", spec.rope_scaling_factor);
    }
  }
  if (spec.vocab_from.empty()) {
    add_synthetic_vocab(writer, spec.n_vocab, spec.image_markers, spec.control_tokens);
  } else {
    copy_vocab(spec.vocab_from, writer, spec.n_vocab);
  }
  writer.set_uint32(a + ".vocab_size", static_cast<uint32_t>(spec.n_vocab));

  ModelBuilder model(spec, writer);
  const int64_t dim = spec.dim, q_dim = int64_t{spec.n_heads} * spec.head_dim;
  const int64_t kv_dim = int64_t{spec.n_kv_heads} * spec.head_dim, ff = spec.ff_dim;
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  model.matrix("token_embd.weight", dim, spec.n_vocab, inv_sqrt(dim));
  model.vector("output_norm.weight", dim, 1.0f, 0.05f);
  if (!is_gemma) model.matrix("output.weight", dim, spec.n_vocab, inv_sqrt(dim));  // gemma ties it
  if (spec.classifier) model.matrix("cls.output.weight", dim, 2, 4.0f * inv_sqrt(dim));  // "yes" and "no", far apart
  if (is_gemma_embedding) {
    model.matrix("dense_2.weight", dim, 2 * dim, inv_sqrt(dim));
    model.matrix("dense_3.weight", 2 * dim, dim, inv_sqrt(2 * dim));
  }
  if (spec.llama3_rope) writer.add_tensor("rope_freqs.weight", LOOM_DTYPE_F32, {spec.head_dim / 2},
                                          quantize_rows(LOOM_DTYPE_F32, llama3_rope_factors(spec), spec.head_dim / 2));
  if (spec.longrope_original_ctx > 0) {
    // As the Phi-3.5 converter writes them: the original context, the attention factor for the
    // extension ratio, and both factor sets.
    const double ratio = double(spec.n_ctx) / spec.longrope_original_ctx;
    writer.set_uint32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(spec.longrope_original_ctx));
    writer.set_float32(a + ".rope.scaling.attn_factor",
                       static_cast<float>(std::sqrt(1.0 + std::log(ratio) / std::log(double(spec.longrope_original_ctx)))));
    for (const bool long_set : {true, false}) {
      writer.add_tensor(long_set ? "rope_factors_long.weight" : "rope_factors_short.weight", LOOM_DTYPE_F32,
                        {spec.head_dim / 2}, quantize_rows(LOOM_DTYPE_F32, longrope_factors(spec, long_set), spec.head_dim / 2));
    }
  }
  for (int layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    if (!is_olmo2) model.vector(p + "attn_norm.weight", dim, 1.0f, 0.05f);
    if (a == "phi3") {
      model.matrix(p + "attn_qkv.weight", dim, q_dim + 2 * kv_dim, inv_sqrt(dim));
    } else {
      model.matrix(p + "attn_q.weight", dim, q_dim, inv_sqrt(dim));
      model.matrix(p + "attn_k.weight", dim, kv_dim, inv_sqrt(dim));
      model.matrix(p + "attn_v.weight", dim, kv_dim, inv_sqrt(dim));
    }
    if (is_qwen2 || is_gpt_oss) {
      model.vector(p + "attn_q.bias", q_dim, 0.0f, 0.02f);
      model.vector(p + "attn_k.bias", kv_dim, 0.0f, 0.02f);
      model.vector(p + "attn_v.bias", kv_dim, 0.0f, 0.02f);
    }
    if (qk_norm) {
      model.vector(p + "attn_q_norm.weight", spec.head_dim, 1.0f, 0.05f);
      model.vector(p + "attn_k_norm.weight", spec.head_dim, 1.0f, 0.05f);
    }
    if (is_olmo2) {
      model.vector(p + "attn_q_norm.weight", q_dim, 1.0f, 0.05f);
      model.vector(p + "attn_k_norm.weight", kv_dim, 1.0f, 0.05f);
    }
    model.matrix(p + "attn_output.weight", q_dim, dim, inv_sqrt(q_dim));
    if (is_gpt_oss) {
      model.vector(p + "attn_output.bias", dim, 0.0f, 0.02f);
      model.vector(p + "attn_sinks.weight", spec.n_heads, 0.0f, 1.0f);  // sink scores near the keys' own
    }
    if (is_gemma || is_olmo2) model.vector(p + "post_attention_norm.weight", dim, 1.0f, 0.05f);
    if (!is_olmo2) model.vector(p + (is_gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), dim, 1.0f, 0.05f);
    if (is_moe) {
      // The router stays F32 (llama.cpp's quantizer leaves ffn_gate_inp alone); the experts are
      // 3-D tensors, expert after expert. A wider router spread makes the choice clear-cut.
      const int64_t n_exp = spec.n_expert, eff = spec.expert_ff_dim;
      model.matrix_of(LOOM_DTYPE_F32, p + "ffn_gate_inp.weight", {dim, n_exp}, 4.0f * inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_gate_exps.weight", {dim, eff, n_exp}, inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_up_exps.weight", {dim, eff, n_exp}, inv_sqrt(dim));
      model.matrix_of(spec.expert_type, p + "ffn_down_exps.weight", {eff, dim, n_exp}, inv_sqrt(eff));
      if (a == "qwen2moe") {  // the shared expert, ff_dim wide, and its per-token gate
        model.vector(p + "ffn_gate_inp_shexp.weight", dim, 0.0f, inv_sqrt(dim));
        model.matrix(p + "ffn_gate_shexp.weight", dim, ff, inv_sqrt(dim));
        model.matrix(p + "ffn_up_shexp.weight", dim, ff, inv_sqrt(dim));
        model.matrix(p + "ffn_down_shexp.weight", ff, dim, inv_sqrt(ff));
      }
      if (is_gpt_oss) {
        model.vector(p + "ffn_gate_inp.bias", n_exp, 0.0f, 0.5f);
        model.matrix_of(LOOM_DTYPE_F32, p + "ffn_gate_exps.bias", {eff, n_exp}, 0.1f);
        model.matrix_of(LOOM_DTYPE_F32, p + "ffn_up_exps.bias", {eff, n_exp}, 0.1f);
        model.matrix_of(LOOM_DTYPE_F32, p + "ffn_down_exps.bias", {dim, n_exp}, 0.05f);
      }
    } else if (a == "phi3") {
      model.matrix(p + "ffn_up.weight", dim, 2 * ff, inv_sqrt(dim));  // gate rows, then up rows
    } else {
      model.matrix(p + "ffn_gate.weight", dim, ff, inv_sqrt(dim));
      model.matrix(p + "ffn_up.weight", dim, ff, inv_sqrt(dim));
    }
    if (!is_moe) model.matrix(p + "ffn_down.weight", ff, dim, inv_sqrt(ff));
    if (is_gemma || is_olmo2) model.vector(p + "post_ffw_norm.weight", dim, 1.0f, 0.05f);
  }
}

void write_synthetic_model(const SynthSpec& spec, const std::filesystem::path& out) {
  GgufWriter writer;
  build_synthetic_model(spec, writer);
  writer.write(out);
}

}  // namespace loom::gguf
