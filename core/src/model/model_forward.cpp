// The forward pass: batch validation, scratch management and the op list.
//
//   x = embed(tokens) [* sqrt(dim) (gemma), * embedding_scale (granite)]  // [dim, n_tok]
//   per layer:
//     h = rms_norm(x) * attn_norm                                (olmo2: h = x)
//     q, k, v = h·Wq (+bq), h·Wk (+bk), h·Wv (+bv)              // [head_dim, heads, n_tok]
//     (gemma4: head size, KV heads and FFN width vary by layer; shared layers skip k, v and the store
//      and attend over an earlier layer's cache; v = rms_norm per head)
//     q, k = rms_norm per head (gemma3, qwen3) or over all heads (olmo2); rope(q, k, positions
//            [, rope_freqs: Llama 3.1+; LongRoPE long/short factors: Phi-3.5; YaRN]; not in smollm3's every
//            fourth layer); q *= temperature(position) past the original context (mistral3)
//     store k, v at slot_mapping; a = paged_attention(q, cache)  // [head_dim, n_heads, n_tok]
//       (scores soft-capped in gemma2; local layers see a sliding window in gemma2/3)
//     h = a·Wo; h = rms_norm(h) * post_attn_norm (gemma2/3, olmo2); x += h [* residual_scale (granite)]
//     h = rms_norm(x) * ffn_norm                                 (olmo2: h = x)
//     h = (act(h·Wgate) * h·Wup)·Wdown; h = rms_norm(h) * post_ffn_norm (gemma2/3, olmo2); x += h [* ...]
//       (qwen3moe: h = sum over the router's n_used experts e of w_e (act(h·Wgate_e) * h·Wup_e)·Wdown_e;
//        gpt-oss: biased router and experts, SWIGLU_OAI, attention sinks, h·Wo + bo;
//        qwen2moe: + sigmoid(h·g_shexp) (act(h·Wgate_s) * h·Wup_s)·Wdown_s, a shared expert)
//     gemma4: x += rms_norm((gelu(x·Wgate_ple) * ple_input[layer])·Wproj_ple) * post_norm; x *= layer scale
//     qwen35: every layer but each full_attention_interval-th is a Gated DeltaNet token mixer over a
//       per-sequence recurrent state (model_linear_attention.cpp); the attention layers gate their
//       output: a = sigmoid(gate) * a, the gate a second half of each head's q projection
//   logits = rms_norm(x[logit_rows]) * output_norm · Woutᵀ         // [n_vocab, n_out]
//   logits = cap * tanh(logits / cap) (gemma2); logits *= 1 / logit_scale (granite)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/hadamard.h"
#include "model/lora_weights.h"
#include "model/model.h"

namespace loom {

namespace {

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

[[noreturn]] void bad_batch(const std::string& what) { throw Error("forward batch: " + what); }

}  // namespace

void Model::validate(const ForwardBatch& b, const KvCache& kv) const {
  const size_t n = b.tokens.size();
  if (n == 0) bad_batch("no tokens");
  if (b.positions.size() != n || b.slot_mapping.size() != n) {
    bad_batch("tokens (" + std::to_string(n) + "), positions (" + std::to_string(b.positions.size()) +
              ") and slot_mapping (" + std::to_string(b.slot_mapping.size()) + ") must have the same length");
  }
  if (n > static_cast<size_t>(INT32_MAX)) bad_batch("too many tokens");
  if (kv.n_blocks() == 0 || kv.k_.size() != static_cast<size_t>(info_.n_layers)) {
    bad_batch("the KV cache was not created by this model");
  }
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= info_.n_vocab) {
      bad_batch("token " + std::to_string(b.tokens[i]) + " at row " + std::to_string(i) + " is outside the vocabulary [0, " +
                std::to_string(info_.n_vocab) + ")");
    }
    if (b.positions[i] < 0) bad_batch("position " + std::to_string(b.positions[i]) + " at row " + std::to_string(i));
    if (b.positions[i] >= n_ctx_) {
      throw Error("context overflow: position " + std::to_string(b.positions[i]) + " at row " + std::to_string(i) +
                  " is beyond the context size " + std::to_string(n_ctx_) + " (n_ctx)");
    }
    if (b.slot_mapping[i] >= 0 && static_cast<uint64_t>(b.slot_mapping[i]) >= kv.n_slots()) {
      bad_batch("slot " + std::to_string(b.slot_mapping[i]) + " at row " + std::to_string(i) + " is outside the KV cache (" +
                std::to_string(kv.n_slots()) + " slots)");
    }
  }
  if (b.seqs.empty()) bad_batch("no sequences");
  size_t covered = 0;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const ForwardBatch::Seq& seq = b.seqs[s];
    const std::string name = "sequence " + std::to_string(s) + ": ";
    if (seq.n_query < 1 || seq.first_row < 0 || static_cast<size_t>(seq.first_row) + static_cast<size_t>(seq.n_query) > n) {
      bad_batch(name + "rows [" + std::to_string(seq.first_row) + ", +" + std::to_string(seq.n_query) +
                ") are not inside the batch of " + std::to_string(n));
    }
    if (seq.context_len < seq.n_query) bad_batch(name + "context_len is smaller than n_query");
    if (seq.lora_slot < -1 || seq.lora_slot >= int32_t(lora_slots()))
      bad_batch(name + "LoRA slot " + std::to_string(seq.lora_slot) + " is not -1 or one of the model's " + std::to_string(lora_slots()) + " slots");
    if (seq.context_len > n_ctx_) {
      throw Error("context overflow: " + name + "context length " + std::to_string(seq.context_len) +
                  " exceeds the context size " + std::to_string(n_ctx_) + " (n_ctx)");
    }
    if (static_cast<uint64_t>(seq.block_table.size()) * kv.block_size() < static_cast<uint64_t>(seq.context_len)) {
      bad_batch(name + "block table of " + std::to_string(seq.block_table.size()) + " blocks cannot hold " +
                std::to_string(seq.context_len) + " tokens");
    }
    if (kv.has_window_rings() &&
        uint64_t(kv.window_ring_blocks()) * kv.block_size() + 1 < uint64_t(info_.sliding_window) + uint64_t(seq.n_query)) {
      bad_batch(name + std::to_string(seq.n_query) + " rows do not fit a window ring of " +
                std::to_string(kv.window_ring_blocks()) + " blocks (at most " +
                std::to_string(uint64_t(kv.window_ring_blocks()) * kv.block_size() + 1 - info_.sliding_window) +
                " rows of one sequence per forward pass)");
    }
    if ((info_.is_hybrid() || kv.has_window_rings()) &&
        (seq.state_slot < 0 || static_cast<uint32_t>(seq.state_slot) >= kv.n_state_slots())) {
      bad_batch(name + "state slot " + std::to_string(seq.state_slot) + " is outside the KV cache's " +
                std::to_string(kv.n_state_slots()) + " state slots");
    }
    for (int32_t block : seq.block_table) {
      if (block < 0 || static_cast<uint32_t>(block) >= kv.n_blocks()) {
        bad_batch(name + "block " + std::to_string(block) + " is outside the KV cache (" + std::to_string(kv.n_blocks()) +
                  " blocks)");
      }
    }
    for (int32_t i = 0; i < seq.n_query; ++i) {
      const int32_t expected = seq.context_len - seq.n_query + i;
      if (b.positions[static_cast<size_t>(seq.first_row + i)] != expected) {
        bad_batch(name + "row " + std::to_string(seq.first_row + i) + " has position " +
                  std::to_string(b.positions[static_cast<size_t>(seq.first_row + i)]) + ", expected " +
                  std::to_string(expected) + " from context_len and n_query");
      }
    }
    covered += static_cast<size_t>(seq.n_query);
  }
  if (covered != n) bad_batch("sequences cover " + std::to_string(covered) + " rows of " + std::to_string(n));
  for (int32_t row : b.logit_rows) {
    if (row < 0 || static_cast<size_t>(row) >= n) bad_batch("logit row " + std::to_string(row) + " is outside the batch");
  }
  for (size_t i = 0; i < b.embd_rows.size(); ++i) {
    const int32_t row = b.embd_rows[i];
    if (row < 0 || static_cast<size_t>(row) >= n || (i > 0 && row <= b.embd_rows[i - 1]))
      bad_batch("embedding row " + std::to_string(row) + " is outside the batch or out of order");
  }
  if (!b.rope_positions.empty() && (!info_.mrope || b.rope_positions.size() != 4 * n))
    bad_batch(info_.mrope ? "rope_positions holds " + std::to_string(b.rope_positions.size()) + " values for 4 x " + std::to_string(n) + " rows"
                          : std::string("rope_positions given to a model without M-RoPE"));
  if (b.embd.size() != b.embd_rows.size() * static_cast<size_t>(info_.embd_row_width()))
    bad_batch("embd holds " + std::to_string(b.embd.size()) + " values for " + std::to_string(b.embd_rows.size()) + " rows of " +
              std::to_string(info_.embd_row_width()));
  for (const auto& seq : b.seqs)
    if (seq.non_causal && !supports_non_causal())
      bad_batch("a non-causal sequence entry, which backend '" + backend_.name() + "' cannot run (ABI 1.9 LOOM_SEQ_NON_CAUSAL)");
}

void Model::ensure_scratch(int64_t n_tok, int64_t n_out) {
  if (n_tok <= cap_tok_ && n_out <= cap_out_ && compute_) return;
  cap_tok_ = std::max<int64_t>(cap_tok_, static_cast<int64_t>(align_up(static_cast<uint64_t>(n_tok), 16)));
  cap_out_ = std::max<int64_t>(cap_out_, std::max<int64_t>(n_out, 1));
  const uint64_t t = static_cast<uint64_t>(cap_tok_), r = static_cast<uint64_t>(cap_out_);
  uint64_t off = 0;
  auto take = [&](uint64_t floats) {
    const uint64_t at = off;
    off = align_up(off + floats * 4, 256);
    return at;
  };
  uint64_t q_dim = 0, kv_dim = 0;  // the largest over the layers (gemma4's differ)
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    q_dim = std::max<uint64_t>(q_dim, uint64_t(info_.q_dim(il)));
    kv_dim = std::max<uint64_t>(kv_dim, uint64_t(info_.kv_dim(il)));
  }
  const uint64_t dim = uint64_t(info_.dim), ple = uint64_t(info_.per_layer_dim) * uint64_t(info_.n_layers);
  off_x_ = take(dim * t);
  off_h_ = take(dim * t);
  off_q_ = take(q_dim * t);
  off_k_ = take(kv_dim * t);
  off_v_ = take(kv_dim * t);
  off_attn_ = take(q_dim * t);
  off_rot_ = hadamard_.empty() ? 0 : take((q_dim + 2 * kv_dim) * t);
  const uint64_t n_used = uint64_t(info_.n_expert_used);
  const uint64_t ff = std::max<uint64_t>(uint64_t(info_.ff_dim), uint64_t(info_.expert_ff_dim) * n_used);
  off_g_ = take(ff * t);
  off_u_ = take(ff * t);
  if (info_.is_moe()) {
    off_router_ = take(uint64_t(info_.n_expert) * t);
    off_expert_w_ = take(n_used * t);
    off_expert_ids_ = take(n_used * t);  // I32, the same size
    off_expert_out_ = take(dim * n_used * t);
  }
  if (info_.shared_expert_ff_dim > 0) {
    off_shared_g_ = take(uint64_t(info_.shared_expert_ff_dim) * t);
    off_shared_u_ = take(uint64_t(info_.shared_expert_ff_dim) * t);
    off_shared_out_ = take(dim * t);
    off_shared_gate_ = take(t);
    off_shared_sum_ = take(dim * t);
  }
  if (info_.is_hybrid()) {
    off_qg_ = take(2 * q_dim * t);
    off_ssm_in_ = take(uint64_t(info_.ssm_conv_dim()) * t);
    off_ssm_conv_ = take(uint64_t(info_.ssm_conv_dim()) * t);
    off_ssm_z_ = take(uint64_t(info_.ssm_value_dim()) * t);
    off_ssm_out_ = take(uint64_t(info_.ssm_value_dim()) * t);
    off_ssm_g_ = take(uint64_t(info_.ssm_n_v_heads) * t);
    off_ssm_beta_ = take(uint64_t(info_.ssm_n_v_heads) * t);
  }
  off_xo_ = take(dim * r);
  off_logits_ = take(uint64_t(info_.n_vocab) * r);
  if (ple > 0) {
    off_ple_ = take(ple * t);
    off_ple_proj_ = take(ple * t);
    off_ple_gate_ = take(uint64_t(info_.per_layer_dim) * t);
  }
  compute_.reset();  // every earlier forward has synchronized, so nothing uses it
  compute_ = backend_.alloc(off, LOOM_BUFFER_USAGE_COMPUTE);
}

void Model::stage_inputs(const ForwardBatch& b, int64_t max_blocks, const KvCache& kv) {
  const size_t n = b.tokens.size(), n_out = b.logit_rows.size(), n_seqs = b.seqs.size();
  const size_t width = static_cast<size_t>(max_blocks);
  // Each part starts at a 16-element boundary so views stay aligned.
  auto pad = [](size_t count) { return (count + 15) / 16 * 16; };
  size_t at = 0;
  auto take = [&](size_t count) {
    const size_t start = at;
    at += pad(count);
    return start;
  };
  const size_t tokens = take(n), positions = take(info_.mrope ? 4 * n : n), slots = take(n), rows = take(n_out), seqs = take(4 * n_seqs);
  const size_t tables = take(width * n_seqs);
  const size_t state_seqs = info_.is_hybrid() ? take(4 * n_seqs) : 0;
  // Window rings (kv_cache.h): the sliding layers' own slots and block tables.
  const uint32_t ring = kv.window_ring_blocks();
  const size_t ring_slots = ring ? take(n) : 0, ring_tables = ring ? take(width * n_seqs) : 0;
  const ModelInfo& m = info_;
  q_temperature_ = m.attn_temperature_scale != 0.0f &&
                   std::any_of(b.positions.begin(), b.positions.end(), [&](int32_t p) { return p >= m.n_ctx_original; });
  const size_t q_dim = static_cast<size_t>(m.q_dim());
  const size_t temperature = q_temperature_ ? take(q_dim * n) : 0;
  const size_t n_layers = static_cast<size_t>(m.n_layers);
  const size_t ple_rows = m.per_layer_dim > 0 ? take(n * n_layers) : 0;
  const size_t embd = take(b.embd.size());  // F32 values staged as 32-bit words
  lora_rows_ = std::any_of(b.seqs.begin(), b.seqs.end(), [](const ForwardBatch::Seq& seq) { return seq.lora_slot >= 0; });
  const size_t lora_rows_at = lora_rows_ ? take(n) : 0;
  staging_.assign(at, 0);  // keeps its capacity: no allocation once the largest batch was seen
  std::copy(b.tokens.begin(), b.tokens.end(), staging_.begin() + static_cast<ptrdiff_t>(tokens));
  std::copy(b.positions.begin(), b.positions.end(), staging_.begin() + static_cast<ptrdiff_t>(positions));
  if (info_.mrope) {  // without image rows: the position in the first three components, 0 in the extra one (llama.cpp's)
    for (size_t c = 1; c < 3; ++c)
      std::copy(b.positions.begin(), b.positions.end(), staging_.begin() + static_cast<ptrdiff_t>(positions + c * n));
    if (!b.rope_positions.empty()) std::copy(b.rope_positions.begin(), b.rope_positions.end(), staging_.begin() + static_cast<ptrdiff_t>(positions));
  }
  std::copy(b.slot_mapping.begin(), b.slot_mapping.end(), staging_.begin() + static_cast<ptrdiff_t>(slots));
  std::copy(b.logit_rows.begin(), b.logit_rows.end(), staging_.begin() + static_cast<ptrdiff_t>(rows));
  for (size_t s = 0; s < n_seqs; ++s) {
    const ForwardBatch::Seq& seq = b.seqs[s];
    int32_t* d = staging_.data() + seqs + 4 * s;
    d[0] = seq.first_row;
    d[1] = seq.n_query;
    d[2] = seq.context_len;
    d[3] = seq.non_causal ? LOOM_SEQ_NON_CAUSAL : 0;
    std::copy(seq.block_table.begin(), seq.block_table.end(), staging_.begin() + static_cast<ptrdiff_t>(tables + width * s));
    if (ring) {
      // Every logical block maps into the sequence's ring; the kernels read only the window's keys.
      int32_t* t = staging_.data() + ring_tables + width * s;
      const int32_t first = seq.state_slot * int32_t(ring);
      for (size_t blk = 0; blk < width; ++blk) t[blk] = first + int32_t(blk % ring);
      const int32_t bs = int32_t(kv.block_size());
      for (int32_t i = 0; i < seq.n_query; ++i) {
        const size_t row = size_t(seq.first_row + i);
        const int32_t p = b.positions[row];
        staging_[ring_slots + row] = b.slot_mapping[row] < 0 ? -1 : (first + (p / bs) % int32_t(ring)) * bs + p % bs;
      }
    }
    if (info_.is_hybrid()) {
      int32_t* r = staging_.data() + state_seqs + 4 * s;
      r[0] = seq.first_row;
      r[1] = seq.n_query;
      r[2] = seq.state_slot;
      r[3] = seq.context_len == seq.n_query ? 1 : 0;  // starts at position 0: the state starts from zeros
    }
  }
  if (q_temperature_) {
    for (size_t i = 0; i < n; ++i) {
      const double buckets = std::floor(double(b.positions[i]) / m.n_ctx_original) + 1.0;
      const float t = static_cast<float>(std::log(buckets) * m.attn_temperature_scale + 1.0);
      int32_t bits;
      std::memcpy(&bits, &t, 4);  // staged as 32-bit words; the backend reads them as F32
      std::fill_n(staging_.begin() + static_cast<ptrdiff_t>(temperature + q_dim * i), q_dim, bits);
    }
  }
  if (m.per_layer_dim > 0) {
    // Layer-major, so each layer's per-layer inputs are one contiguous [per_layer_dim, n_tok] block.
    // Given rows (an image's) take token 0's table rows, as llama.cpp's gemma4 does for embeddings.
    for (size_t il = 0; il < n_layers; ++il) {
      for (size_t i = 0, next_given = 0; i < n; ++i) {
        const bool given = next_given < b.embd_rows.size() && static_cast<size_t>(b.embd_rows[next_given]) == i;
        next_given += given ? 1 : 0;  // embd_rows ascend (checked above)
        const size_t token = given ? 0 : static_cast<size_t>(b.tokens[i]);
        staging_[ple_rows + il * n + i] = static_cast<int32_t>(token * n_layers + il);
      }
    }
  }
  if (!b.embd.empty()) std::memcpy(staging_.data() + embd, b.embd.data(), b.embd.size() * 4);
  if (lora_rows_) {
    for (const ForwardBatch::Seq& seq : b.seqs)
      std::fill_n(staging_.begin() + static_cast<ptrdiff_t>(lora_rows_at + size_t(seq.first_row)), seq.n_query, seq.lora_slot);
  }
  off_lora_slots_ = lora_rows_at * 4;
  embd_runs_.clear();
  for (size_t i = 0; i < b.embd_rows.size(); ++i) {
    const bool extends = i > 0 && b.embd_rows[i] == b.embd_rows[i - 1] + 1;
    if (extends) embd_runs_.back()++;
    else embd_runs_.insert(embd_runs_.end(), {b.embd_rows[i], 1});
  }
  off_embd_ = embd * 4;
  off_ple_rows_ = ple_rows * 4;
  off_q_temperature_ = temperature * 4;
  off_tokens_ = tokens * 4;
  off_positions_ = positions * 4;
  off_slots_ = slots * 4;
  off_rows_ = rows * 4;
  off_seqs_ = seqs * 4;
  off_tables_ = tables * 4;
  off_state_seqs_ = state_seqs * 4;
  off_ring_slots_ = ring_slots * 4;
  off_ring_tables_ = ring_tables * 4;
  const uint64_t bytes = at * 4;
  if (!inputs_ || inputs_.size() < bytes) {
    inputs_.reset();
    inputs_ = backend_.alloc(std::max<uint64_t>(bytes * 2, 4096), LOOM_BUFFER_USAGE_COMPUTE);
  }
  backend_.upload(inputs_, 0, staging_.data(), bytes);
}

void Model::build_graph(int64_t n, int64_t n_out, int64_t n_seqs, int64_t max_blocks, const KvCache& kv) {
  const ModelInfo& m = info_;
  const int64_t dim = m.dim, ple = m.per_layer_dim;
  auto f32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    return tensor_view(compute_, off, LOOM_DTYPE_F32, ne0, ne1, ne2);
  };
  auto i32 = [&](uint64_t off, int64_t ne0, int64_t ne1 = 1) {
    return tensor_view(inputs_, off, LOOM_DTYPE_I32, ne0, ne1);
  };
  attn_global_.block_size = kv.block_size();
  attn_local_.block_size = kv.block_size();

  ops_.clear();
  auto op = [&](loom_op_type type, const loom_tensor& dst, std::initializer_list<loom_tensor> srcs,
                const void* params = nullptr) { ops_.push_back(make_op(type, dst, srcs, params)); };
  auto norm = [&](const loom_tensor& dst, const loom_tensor& src, const loom_tensor& weight) {
    op(LOOM_OP_RMS_NORM, dst, {src, weight}, &norm_params_);
  };

  const loom_tensor x = f32(off_x_, dim, n), h = f32(off_h_, dim, n);
  const loom_tensor positions = m.mrope ? tensor_view(inputs_, off_positions_, LOOM_DTYPE_I32, n, 4) : i32(off_positions_, n);
  const loom_tensor slots = i32(off_slots_, n);
  const loom_tensor seqs = i32(off_seqs_, 4, n_seqs), tables = i32(off_tables_, max_blocks, n_seqs);
  const loom_tensor ring_slots = kv.has_window_rings() ? i32(off_ring_slots_, n) : slots;
  const loom_tensor ring_tables = kv.has_window_rings() ? i32(off_ring_tables_, max_blocks, n_seqs) : tables;

  op(LOOM_OP_GET_ROWS, x, {tok_embd_, i32(off_tokens_, n)});
  if (m.embedding_scale != 1.0f) op(LOOM_OP_SCALE, x, {x}, &embd_scale_);
  // Given rows (an image's) replace their tokens' embeddings after the scale: llama.cpp scales only
  // token embeddings (gemma3: "do not normalize weights for raw embeddings input").
  // A deepstack model's given rows are (1 + n_deepstack) x dim wide: part 0 is the input, part k + 1
  // is added to layer k's output (given_part strides over the other parts).
  const uint64_t given_width = uint64_t(m.embd_row_width()) * 4;
  auto given_part = [&](int64_t part, uint64_t given, int64_t count) {
    loom_tensor t = tensor_view(inputs_, off_embd_ + given * given_width + uint64_t(part * dim) * 4, LOOM_DTYPE_F32, dim, count);
    t.nb[1] = given_width;
    t.nb[2] = t.nb[3] = given_width * uint64_t(count);
    return t;
  };
  for (size_t r = 0, given = 0; r < embd_runs_.size(); r += 2) {
    const int64_t first = embd_runs_[r], count = embd_runs_[r + 1];
    op(LOOM_OP_COPY, f32(off_x_ + uint64_t(first * dim) * 4, dim, count), {given_part(0, given, count)});
    given += uint64_t(count);
  }
  // gemma4's per-layer inputs, layer-major [ple, n, n_layers]: (norm(x·Pᵀ / sqrt(dim)) +
  // table[token] * sqrt(ple)) / sqrt(2), P's rows for one layer at a time.
  auto ple_input = [&](int32_t il) { return f32(off_ple_ + uint64_t(il) * uint64_t(ple * n) * 4, ple, n); };
  if (ple > 0) {
    const loom_tensor all = f32(off_ple_, ple, n * m.n_layers), proj = f32(off_ple_proj_, ple, n * m.n_layers);
    op(LOOM_OP_GET_ROWS, all, {ple_table_, i32(off_ple_rows_, n * m.n_layers)});
    op(LOOM_OP_SCALE, all, {all}, &ple_embd_scale_);
    for (int32_t il = 0; il < m.n_layers; ++il) {
      op(LOOM_OP_MATMUL, f32(off_ple_proj_ + uint64_t(il) * uint64_t(ple * n) * 4, ple, n),
         {row_range(ple_model_proj_, int64_t{il} * ple, ple), x});
    }
    op(LOOM_OP_SCALE, proj, {proj}, &ple_proj_scale_);
    norm(proj, proj, ple_proj_norm_);
    op(LOOM_OP_ADD, all, {all, proj});
    op(LOOM_OP_SCALE, all, {all}, &ple_sum_scale_);
  }
  // LongRoPE picks its factor set by the context the model serves, as llama.cpp does (n_ctx_seq).
  const loom_tensor* freq_factors = m.rope_freq_factors ? &rope_freqs_
                                    : m.rope_long_short ? (n_ctx_ > m.n_ctx_original ? &rope_long_ : &rope_short_)
                                                        : nullptr;
  for (int32_t il = 0; il < m.n_layers; ++il) {
    const LayerWeights& l = layers_[static_cast<size_t>(il)];
    const LayerShape& shape = m.layer(il);
    const bool local = m.layer_is_local[static_cast<size_t>(il)];
    const int64_t hd = shape.head_dim, q_dim = m.q_dim(il), kv_dim = m.kv_dim(il), ff = shape.ff_dim;
    const loom_tensor q = f32(off_q_, q_dim, n), k = f32(off_k_, kv_dim, n), v = f32(off_v_, kv_dim, n);
    const loom_tensor q3 = f32(off_q_, hd, m.n_heads, n), k3 = f32(off_k_, hd, shape.n_kv_heads, n);
    const loom_tensor v3 = f32(off_v_, hd, shape.n_kv_heads, n);
    const loom_tensor attn3 = f32(off_attn_, hd, m.n_heads, n), attn = f32(off_attn_, q_dim, n);
    const loom_tensor g = f32(off_g_, ff, n), u = f32(off_u_, ff, n);
    const bool owns_kv = m.owns_kv(il);

    // Without a pre-norm (olmo2) the block reads the residual stream itself.
    if (m.pre_norms) norm(h, x, l.attn_norm);
    const loom_tensor& attn_in = m.pre_norms ? h : x;
    if (m.is_recurrent(il)) {
      build_linear_attention(il, attn_in, h, n, n_seqs, kv);  // model_linear_attention.cpp
    } else {
      // qwen35: the q projection holds each head's q then its output gate; the q norm reads q out of it.
      const loom_tensor qg = f32(off_qg_, 2 * q_dim, n);
      loom_tensor q_in = q3, gate3 = q3;
      if (m.attn_output_gate) {
        q_in = tensor_view(compute_, off_qg_, LOOM_DTYPE_F32, hd, m.n_heads, n);
        q_in.nb[1] = uint64_t(2 * hd) * 4;
        q_in.nb[2] = uint64_t(2 * q_dim) * 4;
        gate3 = q_in;
        gate3.offset += uint64_t(hd) * 4;
      }
      op(LOOM_OP_MATMUL, m.attn_output_gate ? qg : q, {l.wq, attn_in});
      if (owns_kv) {
        op(LOOM_OP_MATMUL, k, {l.wk, attn_in});
        op(LOOM_OP_MATMUL, v, {l.wv, attn_in});
      }
      // Adapters after the three projections, which the CPU backend runs as one group.
      add_lora_op(ops_, il, int(LoraTarget::attn_q), m.attn_output_gate ? qg : q, attn_in, n);
      if (owns_kv) {
        add_lora_op(ops_, il, int(LoraTarget::attn_k), k, attn_in, n);
        add_lora_op(ops_, il, int(LoraTarget::attn_v), v, attn_in, n);
      }
      if (l.bq.buffer != nullptr) op(LOOM_OP_ADD, q, {q, l.bq});
      if (l.bk.buffer != nullptr) op(LOOM_OP_ADD, k, {k, l.bk});
      if (l.bv.buffer != nullptr) op(LOOM_OP_ADD, v, {v, l.bv});
      if (m.qk_norm) {
        norm(q3, q_in, l.q_norm);
        if (owns_kv) norm(k3, k3, l.k_norm);
      } else if (m.qk_norm_full) {
        norm(q, q, l.q_norm);
        norm(k, k, l.k_norm);
      }
      if (m.v_norm && owns_kv) op(LOOM_OP_RMS_NORM, v3, {v3}, &norm_params_);
      const loom_rope_params* rope = local ? &rope_local_ : &rope_global_;
      const loom_tensor* factors = local && m.freq_factors_global_only ? nullptr : freq_factors;
      if (!m.layer_uses_rope[static_cast<size_t>(il)]) {
        // smollm3's NoPE layers: positions reach them only through the other layers.
      } else if (factors != nullptr) {
        op(LOOM_OP_ROPE, q3, {q3, positions, *factors}, rope);
        if (owns_kv) op(LOOM_OP_ROPE, k3, {k3, positions, *factors}, rope);
      } else {
        op(LOOM_OP_ROPE, q3, {q3, positions}, rope);
        if (owns_kv) op(LOOM_OP_ROPE, k3, {k3, positions}, rope);
      }
      if (q_temperature_) op(LOOM_OP_MUL, q, {q, tensor_view(inputs_, off_q_temperature_, LOOM_DTYPE_F32, q_dim, n)});
      // Sliding layers address their window rings when the cache has them (kv_cache.h).
      const bool in_ring = local && m.sliding_window > 0;
      const loom_tensor& layer_slots = in_ring ? ring_slots : slots;
      const loom_tensor& layer_tables = in_ring ? ring_tables : tables;
      // A quantized cache holds keys and values rotated (hadamard.h): queries turn with the keys, and
      // the output turns back.
      const int64_t n_rot_k = kv_dtype_rotates(kv.dtype()) && !m.attn_output_gate ? key_rotation_size(hd) : 0;
      const int64_t n_rot_v = n_rot_k > 0 ? value_rotation_size(hd) : 0;
      loom_tensor q_att = q3, k_stored = k3, v_stored = v3, attn_out = attn;
      if (n_rot_k > 0) {
        const uint64_t rot_k = off_rot_ + uint64_t(q_dim * n) * 4, rot_v = rot_k + uint64_t(kv_dim * n) * 4;
        const loom_tensor& hk = hadamard_.at(n_rot_k);
        const loom_tensor& hv = hadamard_.at(n_rot_v);
        op(LOOM_OP_MATMUL, f32(off_rot_, n_rot_k, q_dim * n / n_rot_k), {hk, f32(off_q_, n_rot_k, q_dim * n / n_rot_k)});
        q_att = f32(off_rot_, hd, m.n_heads, n);
        if (owns_kv) {
          op(LOOM_OP_MATMUL, f32(rot_k, n_rot_k, kv_dim * n / n_rot_k), {hk, f32(off_k_, n_rot_k, kv_dim * n / n_rot_k)});
          op(LOOM_OP_MATMUL, f32(rot_v, n_rot_v, kv_dim * n / n_rot_v), {hv, f32(off_v_, n_rot_v, kv_dim * n / n_rot_v)});
          k_stored = f32(rot_k, hd, shape.n_kv_heads, n);
          v_stored = f32(rot_v, hd, shape.n_kv_heads, n);
        }
      }
      if (owns_kv) op(LOOM_OP_STORE_KV, no_tensor(), {k_stored, v_stored, layer_slots, kv.k(il), kv.v(il)});
      const loom_attention_params* attn_params = local ? &attn_local_ : &attn_global_;
      if (l.attn_sinks.buffer != nullptr) {
        op(LOOM_OP_PAGED_ATTENTION, attn3, {q_att, kv.k(il), kv.v(il), layer_tables, seqs, l.attn_sinks}, attn_params);
      } else {
        op(LOOM_OP_PAGED_ATTENTION, attn3, {q_att, kv.k(il), kv.v(il), layer_tables, seqs}, attn_params);
      }
      if (n_rot_v > 0) {  // the rotated q is spent: its room takes the output turned back
        op(LOOM_OP_MATMUL, f32(off_rot_, n_rot_v, q_dim * n / n_rot_v), {hadamard_.at(n_rot_v), f32(off_attn_, n_rot_v, q_dim * n / n_rot_v)});
        attn_out = f32(off_rot_, q_dim, n);
      }
      if (m.attn_output_gate) op(LOOM_OP_GLU, attn3, {gate3, attn3}, &sigmoid_params_);
      op(LOOM_OP_MATMUL, h, {l.wo, attn_out});
      add_lora_op(ops_, il, int(LoraTarget::attn_output), h, attn_out, n);
      if (l.bo.buffer != nullptr) op(LOOM_OP_ADD, h, {h, l.bo});
    }
    if (m.post_norms) norm(h, h, l.post_attn_norm);
    if (m.residual_scale != 1.0f) op(LOOM_OP_SCALE, h, {h}, &residual_scale_);
    op(LOOM_OP_ADD, x, {x, h});

    if (m.pre_norms) norm(h, x, l.ffn_norm);
    const loom_tensor& ffn_in = m.pre_norms ? h : x;
    if (m.is_moe()) {
      build_moe_ffn(l, ffn_in, h, n);  // model_moe.cpp
    } else {
      op(LOOM_OP_MATMUL, g, {l.w_gate, ffn_in});
      op(LOOM_OP_MATMUL, u, {l.w_up, ffn_in});
      add_lora_op(ops_, il, int(LoraTarget::ffn_gate), g, ffn_in, n);
      add_lora_op(ops_, il, int(LoraTarget::ffn_up), u, ffn_in, n);
      op(LOOM_OP_GLU, g, {g, u}, &glu_params_);
      op(LOOM_OP_MATMUL, h, {l.w_down, g});
      add_lora_op(ops_, il, int(LoraTarget::ffn_down), h, g, n);
    }
    if (m.post_norms) norm(h, h, l.post_ffn_norm);
    if (m.residual_scale != 1.0f) op(LOOM_OP_SCALE, h, {h}, &residual_scale_);
    op(LOOM_OP_ADD, x, {x, h});

    if (ple > 0) {
      // x += norm((act(x·Gᵀ) * this layer's per-layer input)·Projᵀ)
      const loom_tensor gate = f32(off_ple_gate_, ple, n);
      op(LOOM_OP_MATMUL, gate, {l.ple_gate, x});
      op(LOOM_OP_GLU, gate, {gate, ple_input(il)}, &glu_params_);
      op(LOOM_OP_MATMUL, h, {l.ple_proj, gate});
      norm(h, h, l.ple_post_norm);
      op(LOOM_OP_ADD, x, {x, h});
    }
    if (m.layer_output_scale) op(LOOM_OP_SCALE, x, {x}, &layer_scale_[static_cast<size_t>(il)]);
    if (il < m.n_deepstack) {  // Qwen3-VL: the image rows' deepstack part for this layer joins the stream
      for (size_t r = 0, given = 0; r < embd_runs_.size(); r += 2) {
        const int64_t first = embd_runs_[r], count = embd_runs_[r + 1];
        const loom_tensor rows = f32(off_x_ + uint64_t(first * dim) * 4, dim, count), part = f32(off_h_ + uint64_t(first * dim) * 4, dim, count);
        op(LOOM_OP_COPY, part, {given_part(il + 1, given, count)});
        op(LOOM_OP_ADD, rows, {rows, part});
        given += uint64_t(count);
      }
    }
  }
  if (n_out > 0) {
    // Only the wanted rows go through the output projection (the biggest matmul for small models).
    const loom_tensor xo = f32(off_xo_, dim, n_out);
    op(LOOM_OP_GET_ROWS, xo, {x, i32(off_rows_, n_out)});
    norm(xo, xo, output_norm_);
    if (!hidden_only_) {
      const loom_tensor logits = f32(off_logits_, m.n_vocab, n_out);
      op(LOOM_OP_MATMUL, logits, {output_, xo});
      if (m.logit_scale != 1.0f) op(LOOM_OP_SCALE, logits, {logits}, &logit_scale_);
    }
  }
}

void Model::forward_hidden(const ForwardBatch& batch, KvCache& kv, std::vector<float>& hidden_out) {
  hidden_only_ = true;
  try {
    run_graph(batch, kv);
  } catch (...) {
    hidden_only_ = false;
    throw;
  }
  hidden_only_ = false;
  hidden_out.resize(batch.logit_rows.size() * static_cast<size_t>(info_.dim));
  backend_.download(hidden_out.data(), compute_, off_xo_, hidden_out.size() * sizeof(float));
  backend_.synchronize();
}

void Model::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits_out) {
  run_graph(batch, kv);
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  logits_out.resize(static_cast<size_t>(n_out) * static_cast<size_t>(info_.n_vocab));
  backend_.download(logits_out.data(), compute_, off_logits_, logits_out.size() * sizeof(float));
  backend_.synchronize();
  // Gemma 2's final soft-capping, on the host: the logits are here anyway, and the backend ABI has
  // no tanh op (a backend op would save this pass over n_vocab values per row).
  if (info_.final_softcap > 0.0f) {
    const float cap = info_.final_softcap, inv_cap = 1.0f / info_.final_softcap;
    for (float& logit : logits_out) logit = cap * std::tanh(logit * inv_cap);
  }
}

void Model::run_graph(const ForwardBatch& batch, KvCache& kv) {
  validate(batch, kv);
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  size_t max_blocks = 1;
  for (const auto& seq : batch.seqs) max_blocks = std::max(max_blocks, seq.block_table.size());

  ensure_scratch(n, n_out);
  stage_inputs(batch, static_cast<int64_t>(max_blocks), kv);
  const GraphKey key{n,          n_out,           n_seqs,           static_cast<int64_t>(max_blocks),
                     cap_tok_,   cap_out_,        kv.generation(),  kv.buffer_.get(),
                     compute_.get(), inputs_.get(), q_temperature_, hidden_only_, embd_runs_, lora_rows_};
  if (!(key == graph_key_)) {
    graph_key_ = GraphKey{};  // a failed build must not leave a half-built list marked valid
    build_graph(n, n_out, n_seqs, static_cast<int64_t>(max_blocks), kv);
    graph_key_ = key;
  }
  backend_.run(ops_);
}

}  // namespace loom
