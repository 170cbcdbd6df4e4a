// Model — a decoder-only transformer (llama, qwen2, qwen3, gemma2, gemma3, gemma4, olmo2, granite, smollm3, phi3, mistral3;
// the MoE families qwen2moe, qwen3moe, gpt-oss; the hybrid qwen35) whose weights live in backend buffers and
// whose forward pass is a list of ABI ops (GET_ROWS, RMS_NORM, MATMUL, ROPE, STORE_KV,
// PAGED_ATTENTION, GLU, ADD, ...) run by the backend in one call.
//
// Weights are uploaded once with their GGUF dtype; the only load-time conversion is a lossless
// repack of Q5_0 into Q8_0 for a backend that lacks Q5_0 (every Q5_0 value (q - 16) * d is a Q8_0
// value with the same d), and F16/BF16 norm vectors widened to F32 (ops take F32 norm weights).
// Scratch buffers are reused across calls and grow when a bigger batch arrives; the op list is
// rebuilt only when the batch's shape changes, so a decode step re-runs the same list.
//
// Not thread-safe: one forward at a time per Model.
#pragma once

#include <algorithm>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model_info.h"

namespace loom {

namespace gguf {
class GgufFile;
}
struct LoraAdapter;
struct LoraWeights;

// Weight bytes uploaded so far and in all, after each tensor (for a progress bar).
using LoadProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

struct ModelOptions {
  int64_t n_ctx = 0;  // positions allowed per sequence; 0 = the model's training context
  LoadProgress on_progress;
};

struct LoadReport {
  uint64_t weight_bytes = 0;
  int32_t n_tensors = 0;
  int32_t n_repacked = 0;  // Q5_0 -> Q8_0 for the backend
};

class Model {
 public:
  // loom::Error naming the file and the reason: unsupported arch, missing tensor, wrong shape,
  // a tensor type the backend cannot use.
  static std::unique_ptr<Model> load(const std::filesystem::path& gguf_path, Backend& backend,
                                     ModelOptions options = {});
  static std::unique_ptr<Model> load(const gguf::GgufFile& file, Backend& backend, ModelOptions options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const { return info_; }
  int64_t n_ctx() const { return n_ctx_; }
  // Lower the positions allowed per sequence (the engine does when its KV pool cannot hold the
  // model's whole context once); a larger value is ignored.
  void limit_context(int64_t n_ctx) { n_ctx_ = std::min(n_ctx_, n_ctx); }
  const LoadReport& load_report() const { return report_; }
  // Whether the backend runs non-causal sequence entries (ForwardBatch::Seq::non_causal; ABI 1.9).
  bool supports_non_causal() const { return attn_global_.flags != 0; }
  Backend& backend() const { return backend_; }

  // A pool of n_blocks blocks of block_size tokens for every layer. loom::Error when the backend
  // cannot hold that dtype or block size, or the memory is not available.
  // A hybrid model (info().is_hybrid()) also gets n_state_slots recurrent states per layer, one per
  // sequence that can be in a batch (ForwardBatch::Seq::state_slot).
  // window_ring_blocks > 0 gives a model with sliding-window layers a ring of that many blocks per
  // state slot for those layers instead of the block pool (kv_cache.h); ignored for other models.
  KvCache create_kv_cache(uint32_t n_blocks, uint32_t block_size, loom_dtype dtype = LOOM_DTYPE_F16,
                          uint32_t n_state_slots = 1, uint32_t window_ring_blocks = 0);
  // Enqueue a copy of every recurrent layer's state and every window ring from one slot to another
  // (a forked sequence, a checkpoint).
  void copy_state_slot(const KvCache& kv, int32_t src_slot, int32_t dst_slot);

  // One block's K and V over every layer that keeps them, as bytes (the prefix cache's disk tier,
  // engine/prefix_disk_tier.h): layer by layer, K then V, block_size token rows each. Pool layers
  // hold the block in `block`; with window rings, sliding layers hold positions
  // [first_position, first_position + block_size) in ring `ring_slot`. `parts` picks which of the two
  // a copy touches (the other's bytes are left as they are). A hybrid model's recurrent layers are in
  // no block: their state is copied whole (state_slot_bytes, 0 for other models).
  enum KvBlockParts : uint32_t { kv_pool_part = 1, kv_ring_part = 2, kv_all_parts = 3 };
  uint64_t kv_block_bytes(const KvCache& kv) const;
  void read_kv_block(const KvCache& kv, int32_t block, int32_t ring_slot, uint32_t first_position, void* out) const;
  void write_kv_block(const KvCache& kv, int32_t block, int32_t ring_slot, uint32_t first_position, const void* in,
                      uint32_t parts = kv_all_parts);
  uint64_t state_slot_bytes(const KvCache& kv) const;
  void read_state_slot(const KvCache& kv, int32_t slot, void* out) const;
  void write_state_slot(const KvCache& kv, int32_t slot, const void* in);

  // Runs the batch; K/V of every token with a slot is stored in `kv`. logits_out is resized to
  // [logit_rows.size() * n_vocab] (row r holds the logits of batch row logit_rows[r]).
  // loom::Error for an inconsistent batch (the message says which field) or position >= n_ctx.
  void forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits_out);
  // The same pass, but hidden_out gets the final-normed hidden rows ([logit_rows.size() * dim]) in
  // place of their logits: what a decoder used as an embedder (Qwen3-Embedding) pools.
  void forward_hidden(const ForwardBatch& batch, KvCache& kv, std::vector<float>& hidden_out);

  // Run-time LoRA adapters (the LORA op, ABI 1.16; model_lora.cpp): n_slots adapters of rank up to
  // max_rank resident at once, a batch's rows each using one slot or none (ForwardBatch::Seq::lora_slot).
  // The slots start empty (zeros). loom::Error when the backend lacks the op or the model has no
  // projection an adapter can target. Calling it again drops every slot.
  void enable_lora(uint32_t n_slots, uint32_t max_rank);
  uint32_t lora_slots() const;
  uint32_t max_lora_rank() const;
  // Put an adapter (read_lora_adapter) in a slot, scaled by `scale` at run time. loom::Error naming
  // the adapter's file and tensor when it is for another architecture, adapts a matrix this model
  // does not have (or has fused), disagrees with the base weight's shape, or exceeds max_rank; the
  // slot then holds zeros. Not while a forward pass runs.
  void set_lora(uint32_t slot, const LoraAdapter& adapter, float scale = 1.0f);
  void clear_lora(uint32_t slot);

 private:
  struct LayerWeights {
    loom_tensor attn_norm, wq, wk, wv, bq, bk, bv, q_norm, k_norm, wo, post_attn_norm;
    loom_tensor ffn_norm, w_gate, w_up, w_down, post_ffn_norm;
    loom_tensor w_qkv, w_gate_up;  // phi3's fused matrices; wq/wk/wv and w_gate/w_up are row views of them
    loom_tensor ple_gate, ple_proj, ple_post_norm;  // gemma4's per-layer embedding block
    // Mixture of experts: the router [dim, n_expert] and the experts [.., .., n_expert].
    loom_tensor ffn_router, gate_exps, up_exps, down_exps;
    // gpt-oss: the attention output bias, each head's sink, and the router's and experts' biases.
    loom_tensor bo, attn_sinks, ffn_router_b, gate_exps_b, up_exps_b, down_exps_b;
    // qwen2moe's shared expert and its per-token gate [dim, 1].
    loom_tensor shexp_gate_inp, gate_shexp, up_shexp, down_shexp;
    // A Gated DeltaNet layer (qwen35): the q|k|v projection [dim, conv_dim] and the output gate z
    // [dim, value_dim], the short-conv kernel [d_conv, conv_dim], the decay's time-step bias and
    // -exp(A_log) [n_v_heads], the write-strength and decay projections [dim, n_v_heads], the
    // per-head output norm [d_v] and the output projection [value_dim, dim].
    loom_tensor ssm_in, ssm_gate, ssm_conv, ssm_dt_bias, ssm_a, ssm_beta, ssm_alpha, ssm_norm, ssm_out;
    loom_tensor ssm_ba;  // qwen3next: beta and alpha in one matrix; ssm_beta / ssm_alpha are row views of it
  };
  // Shape of the last op list; the same shape with the same buffers means the list is reusable.
  struct GraphKey {
    int64_t n_tok = -1, n_out = -1, n_seqs = -1, max_blocks = -1;
    int64_t cap_tok = -1, cap_out = -1;  // the scratch layout
    uint64_t kv_generation = 0;
    const void* kv_buffer = nullptr;
    const void* compute_buffer = nullptr;
    const void* input_buffer = nullptr;
    bool q_temperature = false;
    bool hidden_only = false;        // forward_hidden: no output projection
    std::vector<int32_t> embd_runs;  // (first row, rows) of each run of given embedding rows
    bool lora = false;               // some row uses an adapter: the list has the LORA ops
    bool operator==(const GraphKey&) const = default;
  };

  Model(ModelInfo info, Backend& backend, ModelOptions options);
  void load_weights(const gguf::GgufFile& file, const LoadProgress& progress);
  void read_layer_scales(const gguf::GgufFile& file);
  void check_backend_ops(const gguf::GgufFile& file) const;
  void validate(const ForwardBatch& batch, const KvCache& kv) const;
  void ensure_scratch(int64_t n_tok, int64_t n_out);
  void stage_inputs(const ForwardBatch& batch, int64_t max_blocks, const KvCache& kv);
  void build_graph(int64_t n_tok, int64_t n_out, int64_t n_seqs, int64_t max_blocks, const KvCache& kv);
  // The mixture-of-experts FFN of one layer into `out` [dim, n_tok] (model_moe.cpp).
  void build_moe_ffn(const LayerWeights& l, const loom_tensor& ffn_in, const loom_tensor& out, int64_t n_tok);
  // A Gated DeltaNet layer's token mixer from `in` into `out` [dim, n_tok] (model_linear_attention.cpp).
  void build_linear_attention(int32_t il, const loom_tensor& in, const loom_tensor& out, int64_t n_tok, int64_t n_seqs,
                              const KvCache& kv);
  void create_state_pool(KvCache& kv, uint32_t n_slots) const;

  ModelInfo info_;
  Backend& backend_;
  int64_t n_ctx_ = 0;
  LoadReport report_;

  Buffer weights_;
  loom_tensor tok_embd_{}, output_norm_{}, output_{};
  loom_tensor rope_freqs_{};  // [n_rot / 2] when the model has frequency factors
  loom_tensor rope_long_{}, rope_short_{};  // LongRoPE's two sets, [n_rot / 2] each
  std::vector<LayerWeights> layers_;
  // gemma4's per-layer embeddings: the table viewed as [per_layer_dim, n_vocab * n_layers] (row
  // token * n_layers + layer), the projection from the embeddings, and its norm.
  loom_tensor ple_table_{}, ple_model_proj_{}, ple_proj_norm_{};
  std::vector<loom_scale_params> layer_scale_;  // gemma4's layer_output_scale, read at load

  // Op parameters: the ops point at these, so they live as long as the model.
  loom_norm_params norm_params_{};
  loom_rope_params rope_global_{}, rope_local_{};
  loom_attention_params attn_global_{}, attn_local_{};
  loom_glu_params glu_params_{};
  loom_moe_route_params moe_route_{};
  loom_glu_params sigmoid_params_{};
  loom_glu_params silu_params_{}, softplus_params_{};
  loom_delta_net_params delta_net_params_{};
  loom_scale_params embd_scale_{};
  loom_scale_params residual_scale_{};  // granite: each block's output before the residual add
  loom_scale_params logit_scale_{};     // granite: the logits
  loom_scale_params ple_embd_scale_{}, ple_proj_scale_{}, ple_sum_scale_{};  // gemma4's per-layer inputs

  // Activations [.., n_tok] sized for cap_tok_ tokens and cap_out_ logit rows.
  Buffer compute_;
  int64_t cap_tok_ = 0, cap_out_ = 0;
  uint64_t off_x_ = 0, off_h_ = 0, off_q_ = 0, off_k_ = 0, off_v_ = 0, off_attn_ = 0, off_g_ = 0, off_u_ = 0;
  uint64_t off_xo_ = 0, off_logits_ = 0;
  // MoE: router logits [n_expert, n_tok], chosen experts' weights and ids [n_used, n_tok], and the
  // experts' outputs [dim, n_used, n_tok]; gate/up use off_g_/off_u_ as [expert_ff, n_used, n_tok].
  uint64_t off_router_ = 0, off_expert_w_ = 0, off_expert_ids_ = 0, off_expert_out_ = 0;
  // qwen2moe's shared expert: gate/up [shared_ff, n_tok], its output [dim, n_tok], its sigmoid gate
  // [1, n_tok], and the gated output [dim, n_tok].
  uint64_t off_shared_g_ = 0, off_shared_u_ = 0, off_shared_out_ = 0, off_shared_gate_ = 0, off_shared_sum_ = 0;
  uint64_t off_ple_ = 0, off_ple_proj_ = 0, off_ple_gate_ = 0;
  // Hybrid models: the attention layers' q|gate projection [2 q_dim, n_tok]; the recurrent layers'
  // q|k|v projection and its convolution [conv_dim, n_tok], output gate z and delta-rule output
  // [value_dim, n_tok], decay g and write strength beta [n_v_heads, n_tok].
  uint64_t off_qg_ = 0, off_ssm_in_ = 0, off_ssm_conv_ = 0, off_ssm_z_ = 0, off_ssm_out_ = 0, off_ssm_g_ = 0, off_ssm_beta_ = 0;  // [per_layer_dim, n_tok, n_layers] x2, [per_layer_dim, n_tok]

  // I32 inputs: tokens | positions | slots | logit_rows | seqs [4, n_seqs] | block_tables.
  Buffer inputs_;
  std::vector<int32_t> staging_;
  std::vector<int32_t> embd_runs_;  // of the staged batch, (first row, rows) per run
  uint64_t off_embd_ = 0;
  uint64_t off_tokens_ = 0, off_positions_ = 0, off_slots_ = 0, off_rows_ = 0, off_seqs_ = 0, off_tables_ = 0;
  uint64_t off_ring_slots_ = 0, off_ring_tables_ = 0;  // window rings: sliding layers' [n_tok] and [max_blocks, n_seqs]
  uint64_t off_state_seqs_ = 0;  // hybrid: [4, n_seqs] (first row, rows, state slot, fresh) for the recurrent ops
  uint64_t off_ple_rows_ = 0;  // gemma4: [n_tok, n_layers] rows of ple_table_ (token * n_layers + layer)
  // mistral3's temperature tuning: per-element q multipliers [q_dim, n_tok], staged only for batches
  // that reach past the original context (before it every multiplier is 1).
  uint64_t off_q_temperature_ = 0;
  bool q_temperature_ = false;

  // Quantized KV caches: Hadamard matrices [n, n] by size (hadamard.h), and scratch for the rotated
  // q | k | v [q_dim + 2 kv_dim, n_tok] (the rotated q's room also takes the output rotated back).
  Buffer rotation_;
  std::map<int64_t, loom_tensor> hadamard_;
  uint64_t off_rot_ = 0;
  void prepare_kv_rotation(loom_dtype kv_dtype);

  // Run-time adapters (model_lora.cpp): their stacked A and B per layer and projection, the slots'
  // scales; the staged batch's slot per row (I32 [n_tok]) and whether any row has one.
  std::unique_ptr<LoraWeights> lora_;
  uint64_t off_lora_slots_ = 0;
  bool lora_rows_ = false;
  // The LORA op adding slot deltas of projection `target` of layer il to dst (nothing when no row of
  // the batch has an adapter, or no slot can hold that projection).
  const loom_tensor* lora_base(int32_t il, int target) const;
  void add_lora_op(std::vector<loom_op>& ops, int32_t il, int target, const loom_tensor& dst, const loom_tensor& in, int64_t n_tok) const;

  std::vector<loom_op> ops_;
  GraphKey graph_key_;
  bool hidden_only_ = false;  // the graph being run ends at the normed hidden rows (forward_hidden)
  void run_graph(const ForwardBatch& batch, KvCache& kv);  // validate, stage, build (when the shape changed) and run
  uint64_t next_kv_generation_ = 1;
};

}  // namespace loom
