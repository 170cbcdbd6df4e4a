// The model's KV memory: every attention layer's K/V pool, the recurrent layers' state slots, and the
// window rings of sliding-window layers (kv_cache.h says how a ring maps positions to slots).
#include <algorithm>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "model/hadamard.h"
#include "model/model.h"

namespace loom {

namespace {

constexpr uint64_t kAlign = 256;

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

KvCache Model::create_kv_cache(uint32_t n_blocks, uint32_t block_size, loom_dtype dtype, uint32_t n_state_slots,
                               uint32_t window_ring_blocks) {
  if (n_blocks == 0 || block_size == 0) throw Error("KV cache: n_blocks and block_size must be > 0");
  const auto& caps = backend_.caps();
  if (caps.max_block_size > 0 && block_size > caps.max_block_size) {
    throw Error("KV cache: block_size " + std::to_string(block_size) + " exceeds backend '" + backend_.name() +
                "' limit " + std::to_string(caps.max_block_size));
  }
  if (dtype == LOOM_DTYPE_Q8_0 || dtype == LOOM_DTYPE_Q4_0) {  // rows are whole blocks of 32 values
    for (int32_t il = 0; il < info_.n_layers; ++il) {
      if (info_.owns_kv(il) && info_.layer(il).head_dim % 32 != 0) {
        throw Error("KV cache: dtype " + dtype_name(dtype) + " stores rows in blocks of 32 values, and layer " +
                    std::to_string(il) + "'s head size is " + std::to_string(info_.layer(il).head_dim) +
                    " (use f16, f32 or int8)");
      }
    }
  }
  if (caps.n_kv_dtypes > 0 && !backend_.supports_kv_dtype(dtype)) {
    throw Error("KV cache: dtype " + dtype_name(dtype) + " is not supported by backend '" + backend_.name() + "'");
  }
  KvCache kv;
  kv.n_blocks_ = n_blocks;
  kv.block_size_ = block_size;
  kv.dtype_ = dtype;
  const bool rings = window_ring_blocks > 0 && info_.has_sliding_layers();
  if (rings) {
    if (n_state_slots == 0) throw Error("KV cache: window rings need at least one state slot");
    if (uint64_t(window_ring_blocks) * block_size < info_.sliding_window) {
      throw Error("KV cache: a window ring of " + std::to_string(window_ring_blocks) + " blocks cannot hold the " +
                  std::to_string(info_.sliding_window) + "-token window");
    }
    kv.window_ring_blocks_ = window_ring_blocks;
    kv.n_state_slots_ = n_state_slots;
  }
  // Each layer's K and V sized by its own geometry (and a sliding layer's by the rings); a layer
  // sharing another's KV gets its views.
  auto layer_slots = [&](int32_t il) {
    return rings && info_.layer_is_local[size_t(il)] ? kv.n_window_slots() : kv.n_slots();
  };
  std::vector<uint64_t> base(static_cast<size_t>(info_.n_layers)), per_tensor(base.size());
  uint64_t total = 0;
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    if (!info_.owns_kv(il)) continue;
    const LayerShape& shape = info_.layer(il);
    const size_t i = static_cast<size_t>(il);
    per_tensor[i] = align_up(dtype_row_bytes(dtype, shape.head_dim) * uint64_t(shape.n_kv_heads) * layer_slots(il), kAlign);
    base[i] = total;
    total += 2 * per_tensor[i];
  }
  kv.buffer_ = backend_.alloc(std::max<uint64_t>(total, kAlign), LOOM_BUFFER_USAGE_KV);
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    const int32_t source = info_.layer(il).kv_source;
    if (info_.is_recurrent(il)) {
      kv.k_.push_back(no_tensor());
      kv.v_.push_back(no_tensor());
      continue;
    }
    if (source != il) {
      kv.k_.push_back(kv.k_[static_cast<size_t>(source)]);
      kv.v_.push_back(kv.v_[static_cast<size_t>(source)]);
      continue;
    }
    const LayerShape& shape = info_.layer(il);
    const size_t i = static_cast<size_t>(il);
    const auto n = static_cast<int64_t>(layer_slots(il));
    kv.k_.push_back(tensor_view(kv.buffer_, base[i], dtype, shape.head_dim, shape.n_kv_heads, n));
    kv.v_.push_back(tensor_view(kv.buffer_, base[i] + per_tensor[i], dtype, shape.head_dim, shape.n_kv_heads, n));
  }
  if (info_.is_hybrid()) create_state_pool(kv, n_state_slots);
  prepare_kv_rotation(dtype);
  kv.generation_ = next_kv_generation_++;
  return kv;
}

// The Hadamard matrices a quantized cache's layers rotate by, uploaded once (hadamard.h).
void Model::prepare_kv_rotation(loom_dtype kv_dtype) {
  if (!kv_dtype_rotates(kv_dtype) || info_.attn_output_gate) return;
  std::vector<int64_t> sizes;
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    if (info_.is_recurrent(il)) continue;
    for (int64_t n : {key_rotation_size(info_.layer(il).head_dim), value_rotation_size(info_.layer(il).head_dim)}) {
      if (n > 0 && !hadamard_.count(n) && std::find(sizes.begin(), sizes.end(), n) == sizes.end()) sizes.push_back(n);
    }
  }
  if (sizes.empty()) return;
  for (const auto& [n, t] : hadamard_) sizes.push_back(n);  // a new buffer holds the old sizes too
  hadamard_.clear();
  uint64_t total = 0;
  for (int64_t n : sizes) total += align_up(uint64_t(n * n) * 4, kAlign);
  rotation_ = backend_.alloc(total, LOOM_BUFFER_USAGE_WEIGHTS);
  uint64_t at = 0;
  for (int64_t n : sizes) {
    const std::vector<float> h = hadamard_matrix(n);
    backend_.upload(rotation_, at, h.data(), h.size() * 4);
    hadamard_[n] = tensor_view(rotation_, at, LOOM_DTYPE_F32, n, n);
    at += align_up(uint64_t(n * n) * 4, kAlign);
  }
  backend_.synchronize();
  compute_.reset();  // the scratch grows room for the rotated q, k and v
  cap_tok_ = 0;
}

void Model::create_state_pool(KvCache& kv, uint32_t n_slots) const {
  if (n_slots == 0) throw Error("KV cache: " + info_.arch_name + " has recurrent layers and needs at least one state slot");
  const ModelInfo& m = info_;
  const uint64_t conv_bytes = align_up(uint64_t(m.ssm_conv_state_size()) * 4 * n_slots, kAlign);
  const uint64_t delta_bytes = align_up(uint64_t(m.ssm_delta_state_size()) * 4 * n_slots, kAlign);
  int32_t n_recurrent = 0;
  for (int32_t il = 0; il < m.n_layers; ++il) n_recurrent += m.is_recurrent(il) ? 1 : 0;
  const uint64_t total = uint64_t(n_recurrent) * (conv_bytes + delta_bytes);
  kv.state_buffer_ = backend_.alloc(total, LOOM_BUFFER_USAGE_KV);
  const std::vector<uint8_t> zeros(std::min<uint64_t>(total, uint64_t{1} << 24), 0);
  for (uint64_t at = 0; at < total; at += zeros.size()) {
    backend_.upload(kv.state_buffer_, at, zeros.data(), std::min<uint64_t>(zeros.size(), total - at));
    backend_.synchronize();
  }
  kv.n_state_slots_ = n_slots;
  uint64_t at = 0;
  for (int32_t il = 0; il < m.n_layers; ++il) {
    if (!m.is_recurrent(il)) {
      kv.conv_state_.push_back(no_tensor());
      kv.delta_state_.push_back(no_tensor());
      continue;
    }
    kv.conv_state_.push_back(tensor_view(kv.state_buffer_, at, LOOM_DTYPE_F32, m.ssm_d_conv - 1, m.ssm_conv_dim(), n_slots));
    kv.delta_state_.push_back(tensor_view(kv.state_buffer_, at + conv_bytes, LOOM_DTYPE_F32, m.ssm_d_k, m.ssm_d_v,
                                          m.ssm_n_v_heads, n_slots));
    at += conv_bytes + delta_bytes;
  }
}

// A slot's state is its recurrent layers' states and its sliding layers' window rings: everything
// about a sequence that is not in its block table.
void Model::copy_state_slot(const KvCache& kv, int32_t src_slot, int32_t dst_slot) {
  if (src_slot < 0 || dst_slot < 0 || uint32_t(src_slot) >= kv.n_state_slots_ || uint32_t(dst_slot) >= kv.n_state_slots_) {
    throw Error("state copy: slot " + std::to_string(src_slot) + " -> " + std::to_string(dst_slot) + " is outside the pool of " +
                std::to_string(kv.n_state_slots_));
  }
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    if (info_.is_recurrent(il)) {
      for (const loom_tensor* t : {&kv.conv_state(il), &kv.delta_state(il)}) {
        const int dim = t == &kv.conv_state(il) ? 2 : 3;
        backend_.copy(kv.state_buffer_, t->offset + uint64_t(dst_slot) * t->nb[dim], kv.state_buffer_,
                      t->offset + uint64_t(src_slot) * t->nb[dim], t->nb[dim]);
      }
    } else if (kv.has_window_rings() && info_.owns_kv(il) && info_.layer_is_local[size_t(il)]) {
      const uint64_t ring_slots = uint64_t(kv.window_ring_blocks_) * kv.block_size_;
      for (const loom_tensor* t : {&kv.k(il), &kv.v(il)}) {
        const uint64_t ring_bytes = ring_slots * t->nb[2];
        backend_.copy(kv.buffer_, t->offset + uint64_t(dst_slot) * ring_bytes, kv.buffer_,
                      t->offset + uint64_t(src_slot) * ring_bytes, ring_bytes);
      }
    }
  }
}

}  // namespace loom

namespace loom {

namespace {

// Where one block of one layer's K or V lies in the cache: its offset in the buffer and whether it is
// a ring's (Model::KvBlockParts).
struct KvBlockSpan {
  uint64_t offset = 0, bytes = 0;
  bool in_ring = false;
};

}  // namespace

uint64_t Model::kv_block_bytes(const KvCache& kv) const {
  uint64_t total = 0;
  for (int32_t il = 0; il < info_.n_layers; ++il) {
    if (info_.owns_kv(il)) total += uint64_t(kv.block_size_) * (kv.k(il).nb[2] + kv.v(il).nb[2]);
  }
  return total;
}

// The spans of one block, in the order kv_block_bytes counts them.
static std::vector<KvBlockSpan> kv_block_spans(const ModelInfo& info, const KvCache& kv, int32_t block, int32_t ring_slot,
                                               uint32_t first_position) {
  std::vector<KvBlockSpan> spans;
  const uint32_t bs = kv.block_size();
  for (int32_t il = 0; il < info.n_layers; ++il) {
    if (!info.owns_kv(il)) continue;
    const bool in_ring = kv.has_window_rings() && info.layer_is_local[size_t(il)];
    if (in_ring && (ring_slot < 0 || uint32_t(ring_slot) >= kv.n_state_slots())) {
      throw Error("KV block copy: ring " + std::to_string(ring_slot) + " is outside the " +
                  std::to_string(kv.n_state_slots()) + " rings");
    }
    if (!in_ring && (block < 0 || uint32_t(block) >= kv.n_blocks())) {
      throw Error("KV block copy: block " + std::to_string(block) + " is outside the pool of " + std::to_string(kv.n_blocks()));
    }
    const uint64_t slot = in_ring ? uint64_t(ring_slot) * kv.window_ring_blocks() * bs +
                                        uint64_t(first_position / bs % kv.window_ring_blocks()) * bs
                                  : uint64_t(block) * bs;
    for (const loom_tensor* t : {&kv.k(il), &kv.v(il)}) {
      spans.push_back({t->offset + slot * t->nb[2], uint64_t(bs) * t->nb[2], in_ring});
    }
  }
  return spans;
}

void Model::read_kv_block(const KvCache& kv, int32_t block, int32_t ring_slot, uint32_t first_position, void* out) const {
  auto* bytes = static_cast<uint8_t*>(out);
  for (const KvBlockSpan& span : kv_block_spans(info_, kv, block, ring_slot, first_position)) {
    backend_.download(bytes, kv.buffer_, span.offset, span.bytes);
    bytes += span.bytes;
  }
  backend_.synchronize();
}

void Model::write_kv_block(const KvCache& kv, int32_t block, int32_t ring_slot, uint32_t first_position, const void* in,
                           uint32_t parts) {
  const auto* bytes = static_cast<const uint8_t*>(in);
  for (const KvBlockSpan& span : kv_block_spans(info_, kv, block, ring_slot, first_position)) {
    if (parts & (span.in_ring ? kv_ring_part : kv_pool_part)) backend_.upload(kv.buffer_, span.offset, bytes, span.bytes);
    bytes += span.bytes;
  }
  backend_.synchronize();
}

// A slot's recurrent states, layer by layer: the short-conv state, then the delta-rule state.
static std::vector<KvBlockSpan> state_slot_spans(const ModelInfo& info, const KvCache& kv, int32_t slot) {
  if (slot < 0 || uint32_t(slot) >= kv.n_state_slots()) {
    throw Error("state copy: slot " + std::to_string(slot) + " is outside the pool of " + std::to_string(kv.n_state_slots()));
  }
  std::vector<KvBlockSpan> spans;
  for (int32_t il = 0; il < info.n_layers; ++il) {
    if (!info.is_recurrent(il)) continue;
    const loom_tensor& conv = kv.conv_state(il);
    const loom_tensor& delta = kv.delta_state(il);
    spans.push_back({conv.offset + uint64_t(slot) * conv.nb[2], conv.nb[2], false});
    spans.push_back({delta.offset + uint64_t(slot) * delta.nb[3], delta.nb[3], false});
  }
  return spans;
}

uint64_t Model::state_slot_bytes(const KvCache& kv) const {
  if (!info_.is_hybrid() || kv.n_state_slots() == 0) return 0;
  uint64_t total = 0;
  for (const KvBlockSpan& span : state_slot_spans(info_, kv, 0)) total += span.bytes;
  return total;
}

void Model::read_state_slot(const KvCache& kv, int32_t slot, void* out) const {
  auto* bytes = static_cast<uint8_t*>(out);
  for (const KvBlockSpan& span : state_slot_spans(info_, kv, slot)) {
    backend_.download(bytes, kv.state_buffer_, span.offset, span.bytes);
    bytes += span.bytes;
  }
  backend_.synchronize();
}

void Model::write_state_slot(const KvCache& kv, int32_t slot, const void* in) {
  const auto* bytes = static_cast<const uint8_t*>(in);
  for (const KvBlockSpan& span : state_slot_spans(info_, kv, slot)) {
    backend_.upload(kv.state_buffer_, span.offset, bytes, span.bytes);
    bytes += span.bytes;
  }
  backend_.synchronize();
}

}  // namespace loom
