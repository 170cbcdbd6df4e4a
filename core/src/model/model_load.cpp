// Model loading: hyper-parameters, the tensor inventory with shape checks, and one upload of every
// weight into a single backend buffer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "hf/hf_checkpoint.h"
#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "model/lora_weights.h"
#include "model/model.h"
#include "model/weight_repack.h"

namespace loom {

namespace {

constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

enum class Conversion { none, q5_0_to_q8_0, to_f32 };

struct PlannedTensor {
  const gguf::TensorInfo* source = nullptr;
  loom_tensor* target = nullptr;
  loom_dtype dtype = LOOM_DTYPE_F32;
  Conversion conversion = Conversion::none;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // Row i of the uploaded matrix is row row_order[i] of the file's (empty = as stored). Rows are
  // whole blocks in every type, so a reordering is a byte-range gather.
  std::vector<int64_t> row_order;
};

// Rows of a per-key-head interleaving [group 0: a0 (n_a rows), b0 (n_b rows) | group 1: a1, b1 | ...]
// in the order [a0, a1, ..., b0, b1, ...].
std::vector<int64_t> ungroup_rows(int64_t n_groups, int64_t n_a, int64_t n_b) {
  std::vector<int64_t> order;
  for (int64_t part = 0; part < 2; ++part) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const int64_t first = g * (n_a + n_b) + (part == 0 ? 0 : n_a);
      for (int64_t r = 0; r < (part == 0 ? n_a : n_b); ++r) order.push_back(first + r);
    }
  }
  return order;
}

}  // namespace

Model::Model(ModelInfo info, Backend& backend, ModelOptions options) : info_(std::move(info)), backend_(backend) {
  n_ctx_ = options.n_ctx > 0 ? options.n_ctx : info_.n_ctx_train;
  norm_params_ = {sizeof(loom_norm_params), info_.rms_eps};
  rope_global_ = {sizeof(loom_rope_params), info_.rope_mode, static_cast<uint32_t>(info_.n_rot), info_.rope_freq_base,
                  info_.rope_freq_scale, {}};
  if (info_.rope_freq_factors || info_.rope_long_short) rope_global_.mode |= LOOM_ROPE_FREQ_FACTORS;
  if (info_.mrope) {
    rope_global_.mode |= LOOM_ROPE_MROPE | (info_.mrope_interleaved ? LOOM_ROPE_MROPE_INTERLEAVED : 0);
    std::copy(info_.rope_sections, info_.rope_sections + 4, rope_global_.sections);
  }
  if (info_.rope_yarn) {
    rope_global_.mode |= LOOM_ROPE_YARN;
    rope_global_.yarn_ext_factor = info_.yarn_ext_factor;
    rope_global_.yarn_corr_dims[0] = info_.yarn_corr_low;
    rope_global_.yarn_corr_dims[1] = info_.yarn_corr_high;
  }
  rope_local_ = rope_global_;
  rope_local_.n_dims = static_cast<uint32_t>(info_.n_rot_local);
  rope_local_.freq_base = info_.rope_freq_base_local;
  rope_local_.freq_scale = info_.rope_freq_scale_local;
  if (info_.freq_factors_global_only) rope_local_.mode &= ~LOOM_ROPE_FREQ_FACTORS;
  attn_global_ = {sizeof(loom_attention_params), info_.attention_scale, 0, 0, info_.attn_softcap, 0};
  // Non-causal sequence entries (an image's rows) where the backend runs them: asked once, with the
  // flag set, of a small PAGED_ATTENTION of this model's shape. A backend of ABI 1.8 or older never
  // reads the flags, so it is not asked.
  if (backend_.abi_minor() >= 9 && info_.n_layers > 0) {
    const auto& caps = backend_.caps();
    const loom_dtype kv = caps.n_kv_dtypes > 0 ? caps.kv_dtypes[0] : LOOM_DTYPE_F32;
    const int64_t hd = info_.layer(0).head_dim;
    const loom_tensor q = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, hd, info_.n_heads, 1);
    const loom_tensor cache = tensor_view_raw(nullptr, 0, kv, hd, info_.layer(0).n_kv_heads, 16);
    const loom_tensor tables = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, 1, 1);
    const loom_tensor seqs = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, 4, 1);
    loom_attention_params probe = attn_global_;
    probe.block_size = 16;
    probe.flags = LOOM_ATTENTION_SEQ_FLAGS;
    if (backend_.unsupported_reason(make_op(LOOM_OP_PAGED_ATTENTION, q, {q, cache, cache, tables, seqs}, &probe)).empty())
      attn_global_.flags = LOOM_ATTENTION_SEQ_FLAGS;
  }
  attn_local_ = attn_global_;
  attn_local_.sliding_window = info_.sliding_window;
  glu_params_ = {sizeof(loom_glu_params), info_.ffn_activation};
  sigmoid_params_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_SIGMOID};
  silu_params_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_SILU};
  softplus_params_ = {sizeof(loom_glu_params), LOOM_ACTIVATION_SOFTPLUS};
  // Gated DeltaNet L2-normalises q and k with the model's RMS epsilon (llama.cpp: build_gdn_l2_norm).
  delta_net_params_ = {sizeof(loom_delta_net_params), 0.0f, 1u, info_.rms_eps, info_.ssm_grouped_heads ? 1u : 0u};
  moe_route_ = {sizeof(loom_moe_route_params), static_cast<uint32_t>(info_.n_expert_used), info_.expert_gating,
                info_.expert_weights_norm ? 1u : 0u, info_.expert_weights_scale};
  embd_scale_ = {sizeof(loom_scale_params), info_.embedding_scale};
  residual_scale_ = {sizeof(loom_scale_params), info_.residual_scale};
  logit_scale_ = {sizeof(loom_scale_params), info_.logit_scale};
  if (info_.per_layer_dim > 0) {
    ple_embd_scale_ = {sizeof(loom_scale_params), std::sqrt(static_cast<float>(info_.per_layer_dim))};
    ple_proj_scale_ = {sizeof(loom_scale_params), 1.0f / std::sqrt(static_cast<float>(info_.dim))};
    ple_sum_scale_ = {sizeof(loom_scale_params), 1.0f / std::sqrt(2.0f)};
  }
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::filesystem::path& gguf_path, Backend& backend, ModelOptions options) {
  const gguf::GgufFile file = hf::open_model_file(gguf_path);
  return load(file, backend, options);
}

std::unique_ptr<Model> Model::load(const gguf::GgufFile& file, Backend& backend, ModelOptions options) {
  std::unique_ptr<Model> model(new Model(read_model_info(file), backend, options));
  int32_t head_dim = 0;
  for (const LayerShape& shape : model->info_.layers) head_dim = std::max(head_dim, shape.head_dim);
  if (head_dim > static_cast<int32_t>(backend.caps().max_head_dim) && backend.caps().max_head_dim > 0) {
    throw Error(file.label() + ": head_dim " + std::to_string(head_dim) + " exceeds backend '" +
                backend.name() + "' limit " + std::to_string(backend.caps().max_head_dim));
  }
  model->check_backend_ops(file);
  model->load_weights(file, options.on_progress);
  return model;
}

void Model::load_weights(const gguf::GgufFile& file, const LoadProgress& progress) {
  const ModelInfo& m = info_;
  std::vector<PlannedTensor> plan;
  auto supported_list = [&] {
    std::string s;
    const uint32_t n = std::min<uint32_t>(backend_.caps().n_weight_dtypes, LOOM_BACKEND_MAX_DTYPES);
    for (uint32_t i = 0; i < n; ++i) s += (i ? ", " : "") + dtype_name(backend_.caps().weight_dtypes[i]);
    return s;
  };
  // `dims` is the expected GGUF shape (ne0 first). Vectors (norms, biases) become F32.
  // `as_f32`: a matrix that ops read as F32 (the short-conv kernel), widened like the vectors.
  auto add = [&](const std::string& name, std::vector<int64_t> dims, loom_tensor* target, bool optional = false,
                 bool as_f32 = false) {
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr) {
      if (optional) {
        *target = no_tensor();
        return;
      }
      throw Error(file.label() + ": tensor '" + name + "' is missing (required by " + m.arch_name + ")");
    }
    // Trailing 1s are no dimension (llama.cpp compares shapes padded with 1s: Qwen2-MoE's converted
    // shared-expert gate is [dim, 1] where the model reads [dim]).
    auto without_trailing_ones = [](std::vector<int64_t> d) {
      while (d.size() > 1 && d.back() == 1) d.pop_back();
      return d;
    };
    if (without_trailing_ones(t->dims) != without_trailing_ones(dims)) {
      std::ostringstream got, want;
      for (auto d : t->dims) got << (got.tellp() > 0 ? ", " : "") << d;
      for (auto d : dims) want << (want.tellp() > 0 ? ", " : "") << d;
      throw Error(file.label() + ": tensor '" + name + "' has shape [" + got.str() + "], expected [" + want.str() + "]");
    }
    PlannedTensor p;
    p.source = t;
    p.target = target;
    p.dtype = t->type;
    if (dims.size() == 1 || as_f32) {
      if (t->type != LOOM_DTYPE_F32) {
        if (t->type != LOOM_DTYPE_F16 && t->type != LOOM_DTYPE_BF16) {
          throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) +
                      "; norm weights and biases must be F32, F16 or BF16");
        }
        p.conversion = Conversion::to_f32;
        p.dtype = LOOM_DTYPE_F32;
      }
    } else if (!backend_.supports_weight_dtype(t->type)) {
      if (t->type == LOOM_DTYPE_Q5_0 && backend_.supports_weight_dtype(LOOM_DTYPE_Q8_0)) {
        p.conversion = Conversion::q5_0_to_q8_0;
        p.dtype = LOOM_DTYPE_Q8_0;
      } else {
        throw Error(file.label() + ": tensor '" + name + "' has type " + dtype_name(t->type) + ", which backend '" +
                    backend_.name() + "' does not support (it supports: " + supported_list() + ")");
      }
    }
    uint64_t rows = 1;
    for (size_t i = 1; i < dims.size(); ++i) rows *= uint64_t(dims[i]);
    p.bytes = dtype_row_bytes(p.dtype, dims[0]) * rows;
    plan.push_back(p);
  };

  const int64_t dim = m.dim, ple = m.per_layer_dim;
  add("token_embd.weight", {dim, m.n_vocab}, &tok_embd_);
  add("output_norm.weight", {dim}, &output_norm_);
  if (!m.tied_output) add("output.weight", {dim, m.n_vocab}, &output_);
  if (m.rope_freq_factors) add("rope_freqs.weight", {m.n_rot / 2}, &rope_freqs_);
  if (m.rope_long_short) {
    add("rope_factors_long.weight", {m.n_rot / 2}, &rope_long_);
    add("rope_factors_short.weight", {m.n_rot / 2}, &rope_short_);
  }
  if (ple > 0) {
    add("per_layer_token_embd.weight", {ple * m.n_layers, m.n_vocab}, &ple_table_);
    add("per_layer_model_proj.weight", {dim, ple * m.n_layers}, &ple_model_proj_);
    add("per_layer_proj_norm.weight", {ple}, &ple_proj_norm_);
  }
  layers_.resize(static_cast<size_t>(m.n_layers));
  for (int32_t il = 0; il < m.n_layers; ++il) {
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t q_dim = m.q_dim(il), kv_dim = m.kv_dim(il), ff = m.layer(il).ff_dim, hd = m.layer(il).head_dim;
    // A layer that attends over an earlier layer's KV (gemma4) needs no k/v weights of its own.
    const bool owns_kv = m.owns_kv(il);
    add(p + "attn_norm.weight", {dim}, &l.attn_norm, !m.pre_norms);
    if (m.is_recurrent(il)) {
      const int64_t conv = m.ssm_conv_dim(), value = m.ssm_value_dim(), n_v = m.ssm_n_v_heads;
      if (file.find_tensor(p + "ssm_in.weight") != nullptr && file.find_tensor(p + "attn_qkv.weight") == nullptr) {
        throw Error(file.label() + ": tensor '" + p + "ssm_in.weight' is the early Qwen3-Next layout (q|k|v|z interleaved per key "
                    "head), which Loom does not load; convert the model again with a current convert_hf_to_gguf.py, which "
                    "writes 'attn_qkv' and 'attn_gate'");
      }
      add(p + "attn_qkv.weight", {dim, conv}, &l.ssm_in);
      add(p + "attn_gate.weight", {dim, value}, &l.ssm_gate);
      add(p + "ssm_conv1d.weight", {m.ssm_d_conv, conv}, &l.ssm_conv, false, true);
      add(p + "ssm_dt.bias", {n_v}, &l.ssm_dt_bias);
      add(p + "ssm_a", {n_v}, &l.ssm_a);
      if (m.ssm_fused_beta_alpha) {
        // qwen3next: per key head its group's betas then alphas; uploaded as all betas, then all
        // alphas, so each is a row view (after the upload).
        add(p + "ssm_ba.weight", {dim, 2 * n_v}, &l.ssm_ba);
        plan.back().row_order = ungroup_rows(m.ssm_n_k_heads, n_v / m.ssm_n_k_heads, n_v / m.ssm_n_k_heads);
      } else {
        add(p + "ssm_beta.weight", {dim, n_v}, &l.ssm_beta);
        add(p + "ssm_alpha.weight", {dim, n_v}, &l.ssm_alpha);
      }
      add(p + "ssm_norm.weight", {m.ssm_d_v}, &l.ssm_norm);
      add(p + "ssm_out.weight", {value, dim}, &l.ssm_out);
    } else if (m.attn_output_gate) {
      add(p + "attn_q.weight", {dim, 2 * q_dim}, &l.wq);  // per head: q, then its output gate
      add(p + "attn_k.weight", {dim, kv_dim}, &l.wk);
      add(p + "attn_v.weight", {dim, kv_dim}, &l.wv);
    } else if (m.fused_qkv) {
      add(p + "attn_qkv.weight", {dim, q_dim + 2 * kv_dim}, &l.w_qkv);
    } else {
      add(p + "attn_q.weight", {dim, q_dim}, &l.wq);
      if (owns_kv) {
        add(p + "attn_k.weight", {dim, kv_dim}, &l.wk);
        // Gemma 4's global layers may have no value projection: the keys serve as values.
        add(p + "attn_v.weight", {dim, kv_dim}, &l.wv, m.v_norm);
      }
    }
    if (!m.is_recurrent(il)) {
      // Biases are required by qwen2 and used when present elsewhere (some llama fine-tunes have them).
      add(p + "attn_q.bias", {q_dim}, &l.bq, !m.qkv_bias);
      if (owns_kv) {
        add(p + "attn_k.bias", {kv_dim}, &l.bk, !m.qkv_bias);
        add(p + "attn_v.bias", {kv_dim}, &l.bv, !m.qkv_bias);
      }
      add(p + "attn_q_norm.weight", {m.qk_norm_full ? q_dim : hd}, &l.q_norm, !m.qk_norm && !m.qk_norm_full);
      if (owns_kv) add(p + "attn_k_norm.weight", {m.qk_norm_full ? kv_dim : hd}, &l.k_norm, !m.qk_norm && !m.qk_norm_full);
      add(p + "attn_output.weight", {q_dim, dim}, &l.wo);
      add(p + "attn_output.bias", {dim}, &l.bo, true);
      add(p + "attn_sinks.weight", {m.n_heads}, &l.attn_sinks, !m.attn_sinks);
    }
    if (m.ffn_norm_name != "post_attention_norm") add(p + "post_attention_norm.weight", {dim}, &l.post_attn_norm, !m.post_norms);
    add(p + m.ffn_norm_name + ".weight", {dim}, &l.ffn_norm, !m.pre_norms);
    if (m.is_moe()) {
      const int64_t n_exp = m.n_expert, eff = m.expert_ff_dim;
      add(p + "ffn_gate_inp.weight", {dim, n_exp}, &l.ffn_router);
      add(p + "ffn_gate_exps.weight", {dim, eff, n_exp}, &l.gate_exps);
      add(p + "ffn_up_exps.weight", {dim, eff, n_exp}, &l.up_exps);
      add(p + "ffn_down_exps.weight", {eff, dim, n_exp}, &l.down_exps);
      if (m.shared_expert_ff_dim > 0) {
        const int64_t sff = m.shared_expert_ff_dim;
        add(p + "ffn_gate_inp_shexp.weight", {dim}, &l.shexp_gate_inp);
        add(p + "ffn_gate_shexp.weight", {dim, sff}, &l.gate_shexp);
        add(p + "ffn_up_shexp.weight", {dim, sff}, &l.up_shexp);
        add(p + "ffn_down_shexp.weight", {sff, dim}, &l.down_shexp);
      }
      if (m.expert_biases) {
        add(p + "ffn_gate_inp.bias", {n_exp}, &l.ffn_router_b);
        // F32 as the converter writes them; a Hugging Face folder's are BF16, widened like the vectors.
        add(p + "ffn_gate_exps.bias", {eff, n_exp}, &l.gate_exps_b, false, true);
        add(p + "ffn_up_exps.bias", {eff, n_exp}, &l.up_exps_b, false, true);
        add(p + "ffn_down_exps.bias", {dim, n_exp}, &l.down_exps_b, false, true);
      }
    } else if (m.fused_gate_up) {
      add(p + "ffn_up.weight", {dim, 2 * ff}, &l.w_gate_up);
    } else {
      add(p + "ffn_gate.weight", {dim, ff}, &l.w_gate);
      add(p + "ffn_up.weight", {dim, ff}, &l.w_up);
    }
    if (!m.is_moe()) add(p + "ffn_down.weight", {ff, dim}, &l.w_down);
    add(p + "post_ffw_norm.weight", {dim}, &l.post_ffn_norm, !m.post_norms);
    if (ple > 0) {
      add(p + "inp_gate.weight", {dim, ple}, &l.ple_gate);
      add(p + "proj.weight", {ple, dim}, &l.ple_proj);
      add(p + "post_norm.weight", {dim}, &l.ple_post_norm);
    }
  }
  if (m.layer_output_scale) read_layer_scales(file);
  uint64_t total = 0;
  for (PlannedTensor& p : plan) {
    p.offset = total;
    total = align_up(total + p.bytes, kAlign);
  }
  weights_ = backend_.alloc(total, LOOM_BUFFER_USAGE_WEIGHTS);
  std::vector<uint8_t> converted, reordered;
  uint64_t done = 0;
  for (const PlannedTensor& p : plan) {
    if (progress) progress(done, total);
    done += p.bytes;
    const std::span<const uint8_t> data = file.tensor_data(*p.source);
    const auto& d = p.source->dims;
    *p.target = tensor_view(weights_, p.offset, p.dtype, d[0], d.size() > 1 ? d[1] : 1, d.size() > 2 ? d[2] : 1);
    std::span<const uint8_t> bytes = data;  // what is uploaded: the file's bytes, or converted ones
    switch (p.conversion) {
      case Conversion::none:
        break;
      case Conversion::q5_0_to_q8_0:
        repack_q5_0_to_q8_0(data, converted);
        ++report_.n_repacked;
        bytes = converted;
        break;
      case Conversion::to_f32: {
        int64_t n_values = 1;  // a widened matrix (as_f32) too
        for (int64_t extent : d) n_values *= extent;
        const std::vector<float> values = dequantize_rows(p.source->type, data, n_values);
        converted.resize(values.size() * 4);
        std::memcpy(converted.data(), values.data(), converted.size());
        bytes = converted;
        break;
      }
    }
    if (!p.row_order.empty()) {
      const uint64_t row_bytes = p.bytes / p.row_order.size();
      reordered.resize(p.bytes);
      for (size_t i = 0; i < p.row_order.size(); ++i) {
        std::memcpy(reordered.data() + i * row_bytes, bytes.data() + uint64_t(p.row_order[i]) * row_bytes, row_bytes);
      }
      bytes = reordered;
    }
    backend_.upload(weights_, p.offset, bytes.data(), p.bytes);
    // `converted` and `reordered` are reused for the next tensor; the file's bytes need no wait.
    if (bytes.data() != data.data()) backend_.synchronize();
  }
  backend_.synchronize();  // the file's mapping may go away after load
  if (progress) progress(total, total);
  if (m.tied_output) output_ = tok_embd_;
  // Fused matrices: each part is a run of whole rows, so a view of those rows is that part's matrix.
  for (int32_t il = 0; il < m.n_layers; ++il) {
    LayerWeights& l = layers_[static_cast<size_t>(il)];
    const int64_t q_dim = m.q_dim(il), kv_dim = m.kv_dim(il), ff = m.layer(il).ff_dim;
    if (m.fused_qkv) {
      l.wq = row_range(l.w_qkv, 0, q_dim);
      l.wk = row_range(l.w_qkv, q_dim, kv_dim);
      l.wv = row_range(l.w_qkv, q_dim + kv_dim, kv_dim);
    }
    if (m.fused_gate_up) {
      l.w_gate = row_range(l.w_gate_up, 0, ff);
      l.w_up = row_range(l.w_gate_up, ff, ff);
    }
    if (m.is_recurrent(il) && m.ssm_fused_beta_alpha) {
      l.ssm_beta = row_range(l.ssm_ba, 0, m.ssm_n_v_heads);
      l.ssm_alpha = row_range(l.ssm_ba, m.ssm_n_v_heads, m.ssm_n_v_heads);
    }
    if (m.owns_kv(il) && l.wv.buffer == nullptr) l.wv = l.wk;  // values are the (un-normed) keys
  }
  if (ple > 0) {
    // Row `token` of the table holds every layer's per_layer_dim values in turn, so the table is
    // also n_vocab * n_layers rows of per_layer_dim: row token * n_layers + layer is one layer's.
    if (dtype_row_bytes(ple_table_.dtype, ple) * uint64_t(m.n_layers) != ple_table_.nb[1]) {
      throw Error(file.label() + ": tensor 'per_layer_token_embd.weight' of type " + dtype_name(ple_table_.dtype) +
                  " does not split into rows of " + std::to_string(ple) + " values");
    }
    ple_table_ = tensor_view(weights_, ple_table_.offset, ple_table_.dtype, ple, int64_t{m.n_vocab} * m.n_layers);
  }
  report_.weight_bytes = total;
  report_.n_tensors = static_cast<int32_t>(plan.size());
}

// Ops only some families need are asked of the backend before any weight is read, so a backend
// without them refuses the model at load, naming the op, instead of failing its first forward.
void Model::check_backend_ops(const gguf::GgufFile& file) const {
  auto require_op = [&](const char* name, const char* what, const loom_op& op) {
    const std::string reason = backend_.unsupported_reason(op);
    if (!reason.empty()) {
      throw Error(file.label() + ": " + info_.arch_name + " needs " + what + " " + name + ", which backend '" +
                  backend_.name() + "' does not implement (" + reason + ")");
    }
  };
  if (info_.ffn_activation == LOOM_ACTIVATION_SWIGLU_OAI) {
    const loom_tensor g = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, info_.expert_ff_dim, 1);
    require_op("GLU", "the SWIGLU_OAI activation of", make_op(LOOM_OP_GLU, g, {g, g}, &glu_params_));
  }
  if (info_.attn_sinks) {
    const auto& caps = backend_.caps();
    const loom_dtype kv = caps.n_kv_dtypes > 0 ? caps.kv_dtypes[0] : LOOM_DTYPE_F32;
    const int64_t hd = info_.head_dim;
    const loom_tensor q = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, hd, info_.n_heads, 1);
    const loom_tensor cache = tensor_view_raw(nullptr, 0, kv, hd, info_.n_kv_heads, 16);
    const loom_tensor tables = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, 1, 1);
    const loom_tensor seqs = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, 4, 1);
    const loom_tensor sinks = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, info_.n_heads);
    loom_attention_params params = attn_global_;
    params.block_size = 16;  // the KV cache's, unknown yet
    require_op("PAGED_ATTENTION", "attention sinks (src5) of",
               make_op(LOOM_OP_PAGED_ATTENTION, q, {q, cache, cache, tables, seqs, sinks}, &params));
  }
  if (info_.shared_expert_ff_dim > 0) {
    const loom_tensor g = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, 1, 1);
    require_op("UNARY", "the SIGMOID activation of", make_op(LOOM_OP_UNARY, g, {g}, &sigmoid_params_));
  }
  if (info_.is_hybrid()) {
    const ModelInfo& m = info_;
    const loom_tensor x = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_conv_dim(), 1);
    const loom_tensor kernel = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_d_conv, m.ssm_conv_dim());
    const loom_tensor conv_states = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_d_conv - 1, m.ssm_conv_dim(), 1);
    const loom_tensor seqs = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, 4, 1);
    const loom_tensor qk = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_d_k, m.ssm_n_k_heads, 2, 1);
    const loom_tensor v = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_d_v, m.ssm_n_v_heads, 1);
    const loom_tensor gate = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_n_v_heads, 1);
    const loom_tensor states = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, m.ssm_d_k, m.ssm_d_v, m.ssm_n_v_heads, 1);
    require_op("SSM_CONV", "the Gated DeltaNet layers' op", make_op(LOOM_OP_SSM_CONV, x, {x, kernel, conv_states, seqs}));
    if (m.ssm_grouped_heads && backend_.abi_minor() < 7) {
      // A backend built against 1.6 headers never reads grouped_heads and would pair the wrong heads.
      throw Error(file.label() + ": " + m.arch_name + " needs GATED_DELTA_NET with grouped value heads (ABI 1.7); backend '" +
                  backend_.name() + "' speaks ABI 1." + std::to_string(backend_.abi_minor()));
    }
    require_op("GATED_DELTA_NET", "the Gated DeltaNet layers' op",
               make_op(LOOM_OP_GATED_DELTA_NET, v, {qk, v, gate, gate, states, seqs}, &delta_net_params_));
    require_op("UNARY", "the SOFTPLUS activation of", make_op(LOOM_OP_UNARY, gate, {gate}, &softplus_params_));
    require_op("UNARY", "the SIGMOID activation of", make_op(LOOM_OP_UNARY, gate, {gate}, &sigmoid_params_));
  }
  if (!info_.is_moe()) return;
  const gguf::TensorInfo* experts = file.find_tensor("blk.0.ffn_gate_exps.weight");
  const loom_dtype dtype = experts != nullptr ? experts->type : LOOM_DTYPE_F32;
  const int64_t dim = info_.dim, n_used = info_.n_expert_used, eff = info_.expert_ff_dim;
  const loom_tensor logits = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, info_.n_expert, 1);
  const loom_tensor ids = tensor_view_raw(nullptr, 0, LOOM_DTYPE_I32, n_used, 1);
  const loom_tensor weights = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, n_used, 1);
  const loom_tensor x = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, dim, 1, 1);
  const loom_tensor w = tensor_view_raw(nullptr, 0, dtype, dim, eff, info_.n_expert);
  const loom_tensor out = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, eff, n_used, 1);
  const loom_tensor down = tensor_view_raw(nullptr, 0, LOOM_DTYPE_F32, dim, n_used, 1);
  const std::pair<const char*, loom_op> ops[] = {{"MOE_ROUTE", make_op(LOOM_OP_MOE_ROUTE, weights, {logits, ids}, &moe_route_)},
                                                  {"MOE_MATMUL", make_op(LOOM_OP_MOE_MATMUL, out, {w, x, ids})},
                                                  {"MOE_SUM", make_op(LOOM_OP_MOE_SUM, x, {down, weights})}};
  for (const auto& [name, op] : ops) require_op(name, "the mixture-of-experts op", op);
}

// One F32 state per sequence slot and recurrent layer, zeroed: a fresh sequence reads its state as
// zeros anyway (the ops' fresh flag), zeroing only keeps unused memory deterministic.
void Model::read_layer_scales(const gguf::GgufFile& file) {
  layer_scale_.clear();
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    const std::string name = "blk." + std::to_string(il) + ".layer_output_scale.weight";
    const gguf::TensorInfo* t = file.find_tensor(name);
    if (t == nullptr || t->dims != std::vector<int64_t>{1}) {
      throw Error(file.label() + ": tensor '" + name + "' is " + (t == nullptr ? "missing" : "not of shape [1]") +
                  " (gemma4 has one output scale per layer when layer 0 has one)");
    }
    const std::vector<float> value = dequantize_rows(t->type, file.tensor_data(*t), 1);
    layer_scale_.push_back({sizeof(loom_scale_params), value.at(0)});
  }
}

}  // namespace loom
