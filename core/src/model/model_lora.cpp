// Model's run-time adapters: the slots' device stacks, filling and emptying a slot, and the LORA op
// that follows a projection's MATMUL in the op list.
#include <cstring>

#include "common/error.h"
#include <algorithm>
#include "model/lora_weights.h"
#include "model/model.h"

namespace loom {

// The projection an adapter's target names, as the op list runs it: nullptr when this layer has none
// an adapter can add to (a layer reading another's KV, a fused matrix, a mixture of experts, a
// recurrent layer's mixer).
const loom_tensor* Model::lora_base(int32_t il, int target) const {
  const LayerWeights& l = layers_[size_t(il)];
  const bool fused_qkv = l.w_qkv.buffer != nullptr, fused_gate_up = l.w_gate_up.buffer != nullptr;
  const loom_tensor* t = nullptr;
  switch (LoraTarget(target)) {
    case LoraTarget::attn_q: t = fused_qkv ? nullptr : &l.wq; break;
    case LoraTarget::attn_k: t = fused_qkv ? nullptr : &l.wk; break;
    case LoraTarget::attn_v: t = fused_qkv ? nullptr : &l.wv; break;
    case LoraTarget::attn_output: t = &l.wo; break;
    case LoraTarget::ffn_gate: t = fused_gate_up ? nullptr : &l.w_gate; break;
    case LoraTarget::ffn_up: t = fused_gate_up ? nullptr : &l.w_up; break;
    case LoraTarget::ffn_down: t = &l.w_down; break;
  }
  return t != nullptr && t->buffer != nullptr && !info_.is_recurrent(il) ? t : nullptr;
}

void Model::enable_lora(uint32_t n_slots, uint32_t max_rank) {
  lora_.reset();
  graph_key_ = GraphKey{};
  if (n_slots == 0) return;
  if (max_rank == 0) throw Error("max_lora_rank must be at least 1");
  auto w = std::make_unique<LoraWeights>();
  w->n_slots = n_slots, w->max_rank = max_rank;
  w->layers.resize(size_t(info_.n_layers));
  uint64_t bytes = 0;
  bool any = false;
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    for (int t = 0; t < kLoraTargets; ++t) {
      const loom_tensor* base = lora_base(il, t);
      if (base == nullptr) continue;
      LoraWeights::Stack& s = w->layers[size_t(il)][size_t(t)];
      s.n_in = base->ne[0], s.n_out = base->ne[1];
      bytes += uint64_t(s.n_in + s.n_out) * max_rank * n_slots * 4;
      any = true;
    }
  }
  if (!any) throw Error("this model has no projection a LoRA adapter can target (attention and FFN projections that are not fused or experts)");
  const uint64_t scales_at = (bytes + 63) / 64 * 64;
  w->buffer = backend_.alloc(scales_at + uint64_t(n_slots) * 4, LOOM_BUFFER_USAGE_WEIGHTS);
  uint64_t at = 0;
  for (auto& layer : w->layers) {
    for (LoraWeights::Stack& s : layer) {
      if (s.n_in == 0) continue;
      s.a = tensor_view(w->buffer, at, LOOM_DTYPE_F32, s.n_in, max_rank, n_slots);
      at += uint64_t(s.n_in) * max_rank * n_slots * 4;
      s.b = tensor_view(w->buffer, at, LOOM_DTYPE_F32, s.n_out, max_rank, n_slots);  // B transposed
      at += uint64_t(s.n_out) * max_rank * n_slots * 4;
    }
  }
  w->scales = tensor_view(w->buffer, scales_at, LOOM_DTYPE_F32, n_slots);
  w->scale_values.assign(n_slots, 0.0f);
  w->names.assign(n_slots, "");
  // The backend must run the op before anything is filled: a probe of the first stack's shape.
  const LoraWeights::Stack* first = nullptr;
  for (const auto& layer : w->layers)
    for (const LoraWeights::Stack& s : layer)
      if (first == nullptr && s.n_in != 0) first = &s;
  const loom_tensor x = tensor_view(w->buffer, 0, LOOM_DTYPE_F32, first->n_in, 1), dst = tensor_view(w->buffer, 0, LOOM_DTYPE_F32, first->n_out, 1);
  const loom_tensor slots = tensor_view(w->buffer, 0, LOOM_DTYPE_I32, 1);
  const std::string reason = backend_.unsupported_reason(make_op(LOOM_OP_LORA, dst, {first->a, first->b, x, slots, w->scales}));
  if (!reason.empty()) throw Error("LoRA adapters need the LORA op (ABI 1.16), which the " + backend_.name() + " backend does not run: " + reason);
  std::vector<uint8_t> zeros(1 << 20, 0);
  for (uint64_t done = 0; done < w->buffer.size(); done += zeros.size())
    backend_.upload(w->buffer, done, zeros.data(), std::min<uint64_t>(zeros.size(), w->buffer.size() - done));
  backend_.synchronize();
  lora_ = std::move(w);
}

uint32_t Model::lora_slots() const { return lora_ ? lora_->n_slots : 0; }
uint32_t Model::max_lora_rank() const { return lora_ ? lora_->max_rank : 0; }

void Model::set_lora(uint32_t slot, const LoraAdapter& adapter, float scale) {
  if (!lora_ || slot >= lora_->n_slots) throw Error("LoRA slot " + std::to_string(slot) + " does not exist (" + std::to_string(lora_slots()) + " slots)");
  LoraWeights& w = *lora_;
  const std::string where = adapter.path.string() + ": ";
  if (!adapter.architecture.empty() && adapter.architecture != info_.arch_name)
    throw Error(where + "an adapter for '" + adapter.architecture + "', not for this model's '" + info_.arch_name + "'");
  if (adapter.max_rank > int64_t(w.max_rank))
    throw Error(where + "rank " + std::to_string(adapter.max_rank) + " exceeds max_lora_rank " + std::to_string(w.max_rank));
  // Every matrix is checked before the slot changes.
  std::vector<std::array<const LoraMatrix*, kLoraTargets>> chosen(w.layers.size());
  for (auto& row : chosen) row.fill(nullptr);
  for (const LoraMatrix& m : adapter.matrices) {
    const std::string name = "blk." + std::to_string(m.layer) + "." + lora_target_name(m.target) + ".weight";
    if (m.layer < 0 || size_t(m.layer) >= w.layers.size()) throw Error(where + "'" + name + "' is past the model's layers");
    const LoraWeights::Stack& s = w.layers[size_t(m.layer)][size_t(m.target)];
    if (s.n_in == 0) throw Error(where + "adapts '" + name + "', which this model has not (or has fused, or as experts)");
    if (m.n_in != s.n_in || m.n_out != s.n_out)
      throw Error(where + "'" + name + "' is [" + std::to_string(m.n_in) + ", " + std::to_string(m.n_out) + "] through the adapter, the base weight [" +
                  std::to_string(s.n_in) + ", " + std::to_string(s.n_out) + "]");
    chosen[size_t(m.layer)][size_t(m.target)] = &m;
  }
  const uint64_t rank = w.max_rank;
  std::vector<float> a, b;
  for (size_t il = 0; il < w.layers.size(); ++il) {
    for (int t = 0; t < kLoraTargets; ++t) {
      const LoraWeights::Stack& s = w.layers[il][size_t(t)];
      if (s.n_in == 0) continue;
      const LoraMatrix* m = chosen[il][size_t(t)];
      a.assign(size_t(s.n_in) * rank, 0);
      b.assign(size_t(s.n_out) * rank, 0);
      if (m != nullptr) {
        std::copy(m->a.begin(), m->a.end(), a.begin());  // rows past its rank stay zero
        for (int64_t o = 0; o < s.n_out; ++o)  // row j of the stack is B's column j
          for (int64_t j = 0; j < m->rank; ++j) b[size_t(j) * size_t(s.n_out) + size_t(o)] = m->b[size_t(o * m->rank + j)];
      }
      backend_.upload(w.buffer, s.a.offset + slot * a.size() * 4, a.data(), a.size() * 4);
      backend_.upload(w.buffer, s.b.offset + slot * b.size() * 4, b.data(), b.size() * 4);
      backend_.synchronize();  // a and b are reused for the next stack
    }
  }
  w.scale_values[slot] = scale;
  w.names[slot] = adapter.name;
  backend_.upload(w.buffer, w.scales.offset, w.scale_values.data(), w.scale_values.size() * 4);
  backend_.synchronize();
}

void Model::clear_lora(uint32_t slot) {
  if (!lora_ || slot >= lora_->n_slots) return;
  LoraWeights& w = *lora_;
  std::vector<float> zeros;
  for (auto& layer : w.layers) {
    for (const LoraWeights::Stack& s : layer) {
      if (s.n_in == 0) continue;
      zeros.assign(size_t(std::max(s.n_in, s.n_out)) * w.max_rank, 0);
      backend_.upload(w.buffer, s.a.offset + slot * uint64_t(s.n_in) * w.max_rank * 4, zeros.data(), uint64_t(s.n_in) * w.max_rank * 4);
      backend_.upload(w.buffer, s.b.offset + slot * uint64_t(s.n_out) * w.max_rank * 4, zeros.data(), uint64_t(s.n_out) * w.max_rank * 4);
      backend_.synchronize();
    }
  }
  w.scale_values[slot] = 0.0f;
  w.names[slot].clear();
  backend_.upload(w.buffer, w.scales.offset, w.scale_values.data(), w.scale_values.size() * 4);
  backend_.synchronize();
}

void Model::add_lora_op(std::vector<loom_op>& ops, int32_t il, int target, const loom_tensor& dst, const loom_tensor& in, int64_t n_tok) const {
  if (!lora_rows_ || !lora_) return;
  const LoraWeights::Stack& s = lora_->layers[size_t(il)][size_t(target)];
  if (s.n_in == 0) return;
  const loom_tensor slots = tensor_view(inputs_, off_lora_slots_, LOOM_DTYPE_I32, n_tok);
  ops.push_back(make_op(LOOM_OP_LORA, dst, {s.a, s.b, in, slots, lora_->scales}));
}

}  // namespace loom
