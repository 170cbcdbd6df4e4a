#include <algorithm>
// Recording of validated ops: storage-buffer windows, push constants (layouts mirror the shaders'
// `Push` blocks) and workgroup counts. Every shader loops over rows past 65535 groups.
#include <cmath>
#include <cstring>
#include <vector>

#include "vk_stream.h"
#include "vk_tensor.h"

namespace loom::vk {
namespace {

// A tensor's storage-buffer window and the tensor's byte offset inside it.
struct Bound {
  Binding binding;
  uint64_t rel = 0;
};

Bound bind_range(const Context& ctx, const loom_buffer* buffer, uint64_t lo, uint64_t hi, const char* role) {
  const uint64_t align = std::max<uint64_t>(ctx.binding_alignment(), 4);
  const uint64_t start = lo - lo % align;
  const uint64_t range = (hi - start + 3) & ~uint64_t(3);
  if (range > ctx.max_binding_range())
    unsupported(std::string(role) + " spans " + std::to_string(range) + " bytes, more than the device's storage-buffer range of " +
                std::to_string(ctx.max_binding_range()) + " bytes");
  return {{buffer->block.buffer, start, range}, lo - start};
}

Bound bind(const Context& ctx, const Tensor& t, const char* role) {
  return bind_range(ctx, t.buffer, t.offset, t.offset + t.extent, role);
}

struct Push {
  uint32_t w[kPushBytes / 4] = {};
  uint32_t n = 0;
  Push& u(uint64_t v) {
    if (n >= kPushBytes / 4) throw OpError(LOOM_STATUS_INTERNAL, "vulkan backend: push constants overflow");
    w[n++] = uint32_t(v);
    return *this;
  }
  Push& f(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return u(bits);
  }
  uint32_t bytes() const { return n * 4; }
};

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

std::string variant(const Context& ctx, const std::string& base) { return ctx.use_subgroups() ? base + "_sg" : base; }

std::string weight_suffix(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return "f32";
    case LOOM_DTYPE_F16: return "f16";
    case LOOM_DTYPE_BF16: return "bf16";
    case LOOM_DTYPE_Q4_0: return "q4_0";
    case LOOM_DTYPE_Q8_0: return "q8_0";
    case LOOM_DTYPE_Q4_1: return "q4_1";
    case LOOM_DTYPE_Q5_0: return "q5_0";
    case LOOM_DTYPE_Q5_1: return "q5_1";
    case LOOM_DTYPE_Q2_K: return "q2_k";
    case LOOM_DTYPE_Q3_K: return "q3_k";
    case LOOM_DTYPE_Q4_K: return "q4_k";
    case LOOM_DTYPE_Q5_K: return "q5_k";
    case LOOM_DTYPE_Q6_K: return "q6_k";
    case LOOM_DTYPE_IQ4_NL: return "iq4_nl";
    case LOOM_DTYPE_IQ4_XS: return "iq4_xs";
    case LOOM_DTYPE_MXFP4: return "mxfp4";
    case LOOM_DTYPE_F8_E4M3_B32: return "f8_e4m3_b32";
    default: unsupported(std::string("no shader for weight dtype ") + dtype_name(dtype));
  }
}

// Rows per window so that a window of a [n_in, n_rows] weight fits one storage-buffer binding.
int64_t rows_per_window(const Context& ctx, const Tensor& w) {
  const uint64_t rb = row_bytes(w.dtype, w.ne[0]);
  const uint64_t budget = ctx.max_binding_range() - std::max<uint64_t>(ctx.binding_alignment(), 4) - 4;
  if (rb > budget) unsupported("a weight row of " + std::to_string(rb) + " bytes exceeds the device's storage-buffer range");
  if (w.ne[1] == 1 || w.nb[1] == 0) return w.ne[1];
  return std::max<int64_t>(1, int64_t((budget - rb) / w.nb[1]) + 1);
}

// Row ops: push layout of rows.glsl.
void record_rows(Context& ctx, Stream& s, const std::string& shader, const Tensor& a, const Tensor* b, const Tensor& d,
                 uint32_t mode, float f, bool one_group_per_row) {
  Binding bindings[kBindings] = {};
  const Bound ba = bind(ctx, a, "src0"), bd = bind(ctx, d, "dst");
  bindings[0] = ba.binding;
  bindings[2] = bd.binding;
  Push p;
  p.u(ba.rel).u(a.nb[1]).u(a.nb[2]).u(a.nb[3]);
  if (b != nullptr && b->present) {
    const Bound bb = bind(ctx, *b, "src1");
    bindings[1] = bb.binding;
    const bool broadcast = b->n_rows() == 1;
    p.u(bb.rel).u(broadcast ? 0 : b->nb[1]).u(broadcast ? 0 : b->nb[2]).u(broadcast ? 0 : b->nb[3]);
  } else {
    bindings[1] = ba.binding;  // never read; keeps every declared binding valid
    p.u(0).u(0).u(0).u(0);
  }
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]).u(d.nb[3]);
  p.u(a.ne[0]).u(a.ne[1]).u(a.ne[2]).u(a.n_rows()).u(mode).f(f);
  s.dispatch(shader, bindings, p.w, p.bytes(), one_group_per_row ? 1 : ceil_div(uint64_t(a.ne[0]), 64), uint64_t(a.n_rows()));
}

void record_matmul(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &w = a.src[0], &x = a.src[1], &d = a.dst;
  const int64_t n_out = w.ne[1], n_tok = x.n_rows();
  const Bound bx = bind(ctx, x, "src1 (x)"), bd = bind(ctx, d, "dst");
  // matvec.comp (64 invocations per workgroup, 1 or 4 tokens per pass) with one row per invocation
  // or per subgroup; matmul.comp (one row per workgroup, 8 tokens per pass) otherwise.
  const MatvecLayout layout = ctx.matvec_layout();
  const uint64_t tokens_per_pass = n_tok == 1 ? 1 : 4;
  std::string shader = (n_tok == 1 ? "matvec1_" : "matvec_") + weight_suffix(w.dtype);
  uint64_t rows_per_group = 64, tokens_per_group = tokens_per_pass;
  if (layout == MatvecLayout::subgroup) {
    shader += "_sg";
    rows_per_group = std::max<uint64_t>(1, 64 / ctx.subgroup_size());
  } else if (layout == MatvecLayout::workgroup) {
    shader = variant(ctx, "matmul_" + weight_suffix(w.dtype));
    rows_per_group = 1;
    tokens_per_group = 8;
  }
  const int64_t window = rows_per_window(ctx, w);
  for (int64_t r0 = 0; r0 < n_out; r0 += window) {
    const int64_t n_rows = std::min(window, n_out - r0);
    const uint64_t lo = w.offset + uint64_t(r0) * w.nb[1];
    const Bound bw = bind_range(ctx, w.buffer, lo, lo + uint64_t(n_rows - 1) * w.nb[1] + row_bytes(w.dtype, w.ne[0]), "src0 (weights)");
    Binding bindings[kBindings] = {};
    bindings[0] = bw.binding;
    bindings[1] = bx.binding;
    bindings[2] = bd.binding;
    Push p;
    p.u(bw.rel).u(w.nb[1]);
    p.u(bx.rel).u(x.nb[1]).u(x.nb[2]).u(x.nb[3]);
    p.u(bd.rel + uint64_t(r0) * 4).u(d.nb[1]).u(d.nb[2]).u(d.nb[3]);
    p.u(x.ne[1]).u(x.ne[2]).u(w.ne[0]).u(n_rows).u(n_tok);
    s.dispatch(shader, bindings, p.w, p.bytes(), ceil_div(uint64_t(n_rows), rows_per_group), ceil_div(uint64_t(n_tok), tokens_per_group));
  }
}

void record_get_rows(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &table = a.src[0], &ids = a.src[1], &d = a.dst;
  const Bound bi = bind(ctx, ids, "src1 (ids)"), bd = bind(ctx, d, "dst");
  const std::string shader = "get_rows_" + weight_suffix(table.dtype);
  const int64_t window = rows_per_window(ctx, table);
  const uint64_t n_chunks = ceil_div(uint64_t(table.ne[0]), 32);
  for (int64_t r0 = 0; r0 < table.ne[1]; r0 += window) {
    const int64_t n_rows = std::min(window, table.ne[1] - r0);
    const uint64_t lo = table.offset + uint64_t(r0) * table.nb[1];
    const Bound bw = bind_range(ctx, table.buffer, lo, lo + uint64_t(n_rows - 1) * table.nb[1] + row_bytes(table.dtype, table.ne[0]), "src0 (table)");
    Binding bindings[kBindings] = {};
    bindings[0] = bw.binding;
    bindings[1] = bi.binding;
    bindings[2] = bd.binding;
    Push p;
    p.u(bw.rel).u(table.nb[1]).u(bi.rel).u(ids.nb[0]).u(bd.rel).u(d.nb[1]);
    p.u(table.ne[0]).u(ids.ne[0]).u(r0).u(n_rows).u(table.ne[1]);
    s.dispatch(shader, bindings, p.w, p.bytes(), ceil_div(n_chunks, 32), uint64_t(ids.ne[0]));
  }
}

void record_rope(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &x = a.src[0], &pos = a.src[1], &d = a.dst;
  const OpParams& pr = a.params;
  const bool f64 = ctx.has_float64();
  // Inverse frequencies base^(-2i / n_dims) * (freq_scale (1 - r_i) + r_i), in double like the
  // reference: r_i is YaRN's ramp toward the original frequency (0 without YaRN).
  const uint32_t half = pr.n_dims / 2;
  std::vector<uint8_t> bytes(std::max<size_t>(1, half) * (f64 ? 8 : 4));
  for (uint32_t i = 0; i < half; i++) {
    double r = 0.0;
    if (pr.yarn_ext_factor != 0.0f) {
      const double span = std::max(0.001, double(pr.yarn_corr_high) - double(pr.yarn_corr_low));
      r = double(pr.yarn_ext_factor) * (1.0 - std::clamp((double(i) - double(pr.yarn_corr_low)) / span, 0.0, 1.0));
    }
    const double v = std::pow(double(pr.freq_base), -2.0 * i / double(pr.n_dims)) * (double(pr.freq_scale) * (1.0 - r) + r);
    if (f64) std::memcpy(bytes.data() + 8 * i, &v, 8);
    else {
      const float fv = float(v);
      std::memcpy(bytes.data() + 4 * i, &fv, 4);
    }
  }
  char key[128];
  std::snprintf(key, sizeof(key), "rope/%u/%a/%a/%a/%a/%a/%d", pr.n_dims, double(pr.freq_base), double(pr.freq_scale),
                double(pr.yarn_ext_factor), double(pr.yarn_corr_low), double(pr.yarn_corr_high), int(f64));
  const MemoryBlock& table = ctx.constant_table(key, bytes);
  const Bound bx = bind(ctx, x, "src0 (x)"), bp = bind(ctx, pos, "src1 (positions)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bx.binding;
  bindings[1] = bp.binding;
  bindings[2] = bd.binding;
  bindings[3] = {table.buffer, 0, VK_WHOLE_SIZE};
  uint64_t factors_rel = 0;
  if (pr.rope_freq_factors) {
    const Bound bf = bind(ctx, a.src[2], "src2 (freq_factors)");
    bindings[4] = bf.binding;
    factors_rel = bf.rel;
  } else {
    bindings[4] = bindings[3];  // unread; every binding needs a buffer
  }
  Push p;
  p.u(bx.rel).u(x.nb[1]).u(x.nb[2]).u(bp.rel).u(pos.nb[0]).u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(x.ne[0]).u(x.ne[1]).u(x.ne[2]).u(pr.n_dims).u(pr.rope_mode == LOOM_ROPE_NEOX ? 1 : 0);
  p.u(factors_rel).u(pr.rope_freq_factors ? 1 : 0);
  p.u(pr.mrope ? pos.nb[1] : 0).u(pr.mrope ? (pr.mrope_interleaved ? 2 : 1) : 0);
  for (const int32_t section : pr.sections) p.u(uint32_t(section));
  s.dispatch(f64 ? "rope_f64" : "rope", bindings, p.w, p.bytes(), 1, uint64_t(x.ne[1] * x.ne[2]));
}

void record_store_kv(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &k = a.src[0], &v = a.src[1], &slots = a.src[2], &kc = a.src[3], &vc = a.src[4];
  const Bound bk = bind(ctx, k, "src0 (k)"), bv = bind(ctx, v, "src1 (v)"), bs = bind(ctx, slots, "src2 (slot_mapping)");
  const Bound bkc = bind(ctx, kc, "src3 (k_cache)"), bvc = bind(ctx, vc, "src4 (v_cache)");
  Binding bindings[kBindings] = {};
  bindings[0] = bk.binding;
  bindings[1] = bv.binding;
  bindings[2] = bs.binding;
  bindings[3] = bkc.binding;
  bindings[4] = bvc.binding;
  Push p;
  p.u(bk.rel).u(k.nb[1]).u(k.nb[2]).u(bv.rel).u(v.nb[1]).u(v.nb[2]).u(bs.rel).u(slots.nb[0]);
  p.u(bkc.rel).u(kc.nb[1]).u(kc.nb[2]).u(bvc.rel).u(vc.nb[1]).u(vc.nb[2]);
  p.u(k.ne[0]).u(k.ne[1]).u(k.ne[2]).u(kc.ne[2]).u(uint32_t(kc.dtype));
  // One workgroup per row; block caches (Q8_0, Q4_0) take one invocation per 32-value block of K or V.
  uint64_t groups = uint64_t(k.ne[1] * k.ne[2]);
  if (kc.dtype == LOOM_DTYPE_Q8_0 || kc.dtype == LOOM_DTYPE_Q4_0) groups = ceil_div(groups * 2 * uint64_t(k.ne[0] / 32), 64);
  s.dispatch(variant(ctx, "store_kv"), bindings, p.w, p.bytes(), 1, groups);
}

void record_attention(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &q = a.src[0], &kc = a.src[1], &vc = a.src[2], &bt = a.src[3], &seqs = a.src[4], &d = a.dst;
  const Bound bq = bind(ctx, q, "src0 (q)"), bk = bind(ctx, kc, "src1 (k_cache)"), bv = bind(ctx, vc, "src2 (v_cache)");
  const Bound bt_b = bind(ctx, bt, "src3 (block_tables)"), bs = bind(ctx, seqs, "src4 (seqs)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bq.binding;
  bindings[1] = bk.binding;
  bindings[2] = bv.binding;
  bindings[3] = bt_b.binding;
  bindings[4] = bs.binding;
  bindings[5] = bd.binding;
  const bool sinks = a.n_src > 5 && a.src[5].present;
  Bound bsink = bq;  // never read without sinks; keeps every declared binding valid
  if (sinks) bsink = bind(ctx, a.src[5], "src5 (sinks)");
  bindings[6] = bsink.binding;
  Push p;
  p.u(bq.rel).u(q.nb[1]).u(q.nb[2]);
  p.u(bk.rel).u(kc.nb[1]).u(kc.nb[2]);
  p.u(bv.rel).u(vc.nb[1]).u(vc.nb[2]);
  p.u(bt_b.rel).u(bt.nb[1]);
  p.u(bs.rel).u(seqs.nb[1]);
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(q.ne[0]).u(q.ne[1]).u(kc.ne[1]).u(q.ne[2]).u(seqs.ne[1]).u(kc.ne[2]).u(bt.ne[0]).u(a.params.block_size);
  p.u(a.params.sliding_window).u(uint32_t(kc.dtype)).f(a.params.attn_scale).f(a.params.softcap);
  p.u(sinks ? 1 : 0).u(sinks ? bsink.rel : 0);
  // lavapipe's loop limit (see record_gated_delta_net) cut attention off silently between 12,000 and
  // 20,000 keys with heads of 128 (conformance backend.paged_attention.long_context): there a row
  // seeing more than 8192 keys is refused with an error instead.
  p.u(ctx.is_llvmpipe() ? 8192 : 0);
  p.u(a.params.seq_flags ? 1u : 0u);  // ABI 1.9: column 3 of seqs holds LOOM_SEQ_NON_CAUSAL
  s.dispatch(variant(ctx, "paged_attention"), bindings, p.w, p.bytes(), uint64_t(q.ne[2]), uint64_t(q.ne[1]));
}

// ATTENTION (ABI 1.9) through paged_attention.comp's dense mode: each sequence's keys are its own rows
// of the K and V tensors, read as an F32 "cache" whose slots are the rows.
void record_encoder_attention(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &q = a.src[0], &k = a.src[1], &v = a.src[2], &d = a.dst;
  if (q.ne[0] > 512) unsupported("ATTENTION: the vulkan backend takes heads of at most 512, got " + std::to_string(q.ne[0]));
  const Bound bq = bind(ctx, q, "src0 (q)"), bk = bind(ctx, k, "src1 (k)"), bv = bind(ctx, v, "src2 (v)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bq.binding;
  bindings[1] = bk.binding;
  bindings[2] = bv.binding;
  bindings[5] = bd.binding;
  bindings[6] = bq.binding;  // no sinks: never read
  uint64_t seqs_rel = 0, seqs_nb1 = 8, n_seqs = 1;
  if (a.n_src > 3 && a.src[3].present) {
    const Bound bs = bind(ctx, a.src[3], "src3 (seqs)");
    bindings[4] = bs.binding;
    seqs_rel = bs.rel, seqs_nb1 = a.src[3].nb[1], n_seqs = uint64_t(a.src[3].ne[1]);
  } else {
    // No table: every row is one sequence, {0, n_tok}, kept as a constant buffer.
    const int32_t all[2] = {0, int32_t(q.ne[2])};
    std::vector<uint8_t> bytes(sizeof all);
    std::memcpy(bytes.data(), all, sizeof all);
    const MemoryBlock& table = ctx.constant_table("attention_all/" + std::to_string(q.ne[2]), bytes);
    bindings[4] = {table.buffer, 0, VK_WHOLE_SIZE};
  }
  bindings[3] = bindings[4];  // no block table in dense mode: never read
  Push p;
  p.u(bq.rel).u(q.nb[1]).u(q.nb[2]);
  p.u(bk.rel).u(k.nb[1]).u(k.nb[2]);
  p.u(bv.rel).u(v.nb[1]).u(v.nb[2]);
  const bool alibi = a.params.alibi_max_bias != 0.0f, window = a.params.attn_window != 0;
  p.f(alibi ? a.params.alibi_max_bias : 0.0f).u(0);  // bt_off: no block table in dense mode; ALiBi's max bias
  p.u(seqs_rel).u(seqs_nb1);
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(q.ne[0]).u(q.ne[1]).u(k.ne[1]).u(q.ne[2]).u(n_seqs).u(k.ne[2]).u(1).u(1);
  p.u(a.params.attn_window).u(uint32_t(LOOM_DTYPE_F32)).f(a.params.attn_scale).f(0.0f);
  p.u(0).u(0);
  p.u(ctx.is_llvmpipe() ? 8192 : 0);
  p.u(2u | (a.params.causal ? 4u : 0u) | (window ? 8u : 0u) | (alibi ? 16u : 0u));
  s.dispatch(variant(ctx, "paged_attention"), bindings, p.w, p.bytes(), uint64_t(q.ne[2]), uint64_t(q.ne[1]));
}

void record_layer_norm(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &x = a.src[0], &d = a.dst;
  const bool weighted = a.n_src > 1 && a.src[1].present, biased = a.n_src > 2 && a.src[2].present;
  const Bound bx = bind(ctx, x, "src0"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bx.binding;
  bindings[2] = bd.binding;
  Bound bw = bx, bb = bx;  // an absent weight or bias is never read; every binding needs a buffer
  if (weighted) bw = bind(ctx, a.src[1], "src1 (weight)");
  if (biased) bb = bind(ctx, a.src[2], "src2 (bias)");
  bindings[1] = bw.binding;
  bindings[3] = bb.binding;
  Push p;
  p.u(bx.rel).u(x.nb[1]).u(x.nb[2]).u(x.nb[3]);
  p.u(weighted ? bw.rel : 0).u(biased ? bb.rel : 0);
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]).u(d.nb[3]);
  p.u(x.ne[0]).u(x.ne[1]).u(x.ne[2]).u(x.n_rows()).u((weighted ? 1u : 0u) | (biased ? 2u : 0u)).f(a.params.eps);
  s.dispatch(variant(ctx, "layer_norm"), bindings, p.w, p.bytes(), 1, uint64_t(x.n_rows()));
}

void record_patches(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &image = a.src[0], &d = a.dst;
  const Bound bi = bind(ctx, image, "src0 (image)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bi.binding;
  bindings[1] = bd.binding;
  const uint64_t p_size = a.params.window;
  Push p;
  p.u(bi.rel).u(image.nb[1]).u(image.nb[2]).u(bd.rel).u(d.nb[1]);
  p.u(p_size).u(image.ne[2]).u(uint64_t(image.ne[0]) / p_size).u(d.ne[1]);
  s.dispatch("patches", bindings, p.w, p.bytes(), ceil_div(uint64_t(d.ne[0]), 64), uint64_t(d.ne[1]));
}

void record_pool_2d(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &x = a.src[0], &d = a.dst;
  const Bound bx = bind(ctx, x, "src0"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bx.binding;
  bindings[1] = bd.binding;
  Push p;
  p.u(bx.rel).u(x.nb[1]).u(x.nb[2]).u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(x.ne[0]).u(d.ne[1]).u(uint64_t(d.ne[1] * d.ne[2])).u(a.params.window);
  s.dispatch("pool_2d", bindings, p.w, p.bytes(), ceil_div(uint64_t(x.ne[0]), 64), uint64_t(d.ne[1] * d.ne[2]));
}

void record_ssm_conv(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &x = a.src[0], &w = a.src[1], &states = a.src[2], &seqs = a.src[3], &d = a.dst;
  if (w.ne[0] > 16) unsupported("SSM_CONV: the vulkan backend convolves at most 16 taps, got " + std::to_string(w.ne[0]));
  const Bound bx = bind(ctx, x, "src0 (x)"), bw = bind(ctx, w, "src1 (weight)"), bs = bind(ctx, states, "src2 (states)");
  const Bound bq = bind(ctx, seqs, "src3 (seqs)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bx.binding;
  bindings[1] = bw.binding;
  bindings[2] = bs.binding;
  bindings[3] = bq.binding;
  bindings[4] = bd.binding;
  Push p;
  p.u(bx.rel).u(x.nb[1]).u(bw.rel).u(w.nb[1]).u(bs.rel).u(states.nb[1]).u(states.nb[2]).u(bq.rel).u(seqs.nb[1]);
  p.u(bd.rel).u(d.nb[1]).u(x.ne[0]).u(x.ne[1]).u(w.ne[0]).u(states.ne[2]).u(seqs.ne[1]);
  s.dispatch("ssm_conv", bindings, p.w, p.bytes(), ceil_div(uint64_t(x.ne[0]), 64), uint64_t(seqs.ne[1]));
}

void record_gated_delta_net(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &qk = a.src[0], &v = a.src[1], &g = a.src[2], &beta = a.src[3], &states = a.src[4], &seqs = a.src[5], &d = a.dst;
  if (qk.ne[0] > 256) unsupported("GATED_DELTA_NET: the vulkan backend takes key heads of at most 256, got " + std::to_string(qk.ne[0]));
  const Bound bqk = bind(ctx, qk, "src0 (qk)"), bv = bind(ctx, v, "src1 (v)"), bg = bind(ctx, g, "src2 (g)");
  const Bound bb = bind(ctx, beta, "src3 (beta)"), bs = bind(ctx, states, "src4 (states)"), bq = bind(ctx, seqs, "src5 (seqs)");
  const Bound bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bqk.binding;
  bindings[1] = bv.binding;
  bindings[2] = bg.binding;
  bindings[3] = bb.binding;
  bindings[4] = bs.binding;
  bindings[5] = bq.binding;
  bindings[6] = bd.binding;
  Push p;
  p.u(bqk.rel).u(qk.nb[1]).u(qk.nb[2]).u(qk.nb[3]);
  p.u(bv.rel).u(v.nb[1]).u(v.nb[2]);
  p.u(bg.rel).u(g.nb[1]).u(bb.rel).u(beta.nb[1]);
  p.u(bs.rel).u(states.nb[1]).u(states.nb[2]).u(states.nb[3]);
  p.u(bq.rel).u(seqs.nb[1]);
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(qk.ne[0]).u(qk.ne[1]).u(v.ne[0]).u(qk.ne[3]).u(states.ne[3]).u(seqs.ne[1]).u((a.params.delta_normalize_qk ? 1u : 0u) | (a.params.delta_grouped_heads ? 2u : 0u));
  p.f(a.params.delta_l2_eps).f(a.params.delta_q_scale);
  // lavapipe (llvmpipe) cuts long loop nests short (gallivm's loop limiter, 65535 iterations): a
  // prefill of 119 tokens with heads of 128, about 520 loop iterations per token and invocation,
  // reached it, and every later token came out wrong. There a batch runs in windows of tokens that
  // stay well under it, one dispatch each; other devices take the batch in one window.
  const uint64_t per_token = ceil_div(uint64_t(v.ne[0]), 64) * 2 * uint64_t(qk.ne[0]) + 64, n_tok = uint64_t(qk.ne[3]);
  const uint64_t window = ctx.is_llvmpipe() ? std::max<uint64_t>(1, 32768 / per_token) : std::max<uint64_t>(n_tok, 1);
  for (uint64_t lo = 0; lo < std::max<uint64_t>(n_tok, 1); lo += window) {
    Push windowed = p;
    windowed.u(lo).u(std::min(n_tok, lo + window));
    s.dispatch("gated_delta_net", bindings, windowed.w, windowed.bytes(), uint64_t(v.ne[1]), uint64_t(seqs.ne[1]));
  }
}

void record_moe_route(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &logits = a.src[0], &ids = a.src[1], &w = a.dst;
  if (logits.ne[0] > 512) unsupported("MOE_ROUTE: the vulkan backend routes at most 512 experts, got " + std::to_string(logits.ne[0]));
  const Bound bl = bind(ctx, logits, "src0 (router logits)"), bi = bind(ctx, ids, "src1 (ids)"), bw = bind(ctx, w, "dst (weights)");
  Binding bindings[kBindings] = {};
  bindings[0] = bl.binding;
  bindings[1] = bi.binding;
  bindings[2] = bw.binding;
  Push p;
  p.u(bl.rel).u(logits.nb[1]).u(bi.rel).u(ids.nb[1]).u(bw.rel).u(w.nb[1]);
  p.u(logits.ne[0]).u(a.params.moe_n_used).u(logits.ne[1]).u(uint32_t(a.params.moe_gating)).u(a.params.moe_normalize ? 1 : 0);
  p.f(a.params.scale);
  s.dispatch("moe_route", bindings, p.w, p.bytes(), ceil_div(uint64_t(logits.ne[1]), 64), 1);
}

void record_moe_matmul(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &w = a.src[0], &x = a.src[1], &ids = a.src[2], &d = a.dst;
  const bool bias = a.n_src > 3 && a.src[3].present;
  const Bound bw = bind(ctx, w, "src0 (expert weights)"), bx = bind(ctx, x, "src1 (x)"), bi = bind(ctx, ids, "src2 (ids)");
  const Bound bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bw.binding;
  bindings[1] = bx.binding;
  bindings[2] = bi.binding;
  bindings[4] = bd.binding;
  Push p;
  p.u(bw.rel).u(w.nb[1]).u(w.nb[2]).u(bx.rel).u(x.nb[1]).u(x.nb[2]).u(bi.rel).u(ids.nb[1]);
  if (bias) {
    const Bound bb = bind(ctx, a.src[3], "src3 (bias)");
    bindings[3] = bb.binding;
    p.u(bb.rel).u(a.src[3].nb[1]);
  } else {
    bindings[3] = bx.binding;  // never read; keeps every declared binding valid
    p.u(0).u(0);
  }
  p.u(bd.rel).u(d.nb[1]).u(d.nb[2]);
  p.u(w.ne[0]).u(w.ne[1]).u(ids.ne[0]).u(ids.ne[1]).u(w.ne[2]).u(x.ne[1] == 1 ? 1 : 0).u(bias ? 1 : 0);
  s.dispatch("moe_matvec_" + weight_suffix(w.dtype), bindings, p.w, p.bytes(), ceil_div(uint64_t(w.ne[1]), 64),
             uint64_t(ids.ne[0] * ids.ne[1]));
}

void record_moe_sum(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &src = a.src[0], &w = a.src[1], &d = a.dst;
  const Bound bs = bind(ctx, src, "src0"), bw = bind(ctx, w, "src1 (weights)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = bs.binding;
  bindings[1] = bw.binding;
  bindings[2] = bd.binding;
  Push p;
  p.u(bs.rel).u(src.nb[1]).u(src.nb[2]).u(bw.rel).u(w.nb[1]).u(bd.rel).u(d.nb[1]);
  p.u(src.ne[0]).u(src.ne[1]).u(src.ne[2]);
  s.dispatch("moe_sum", bindings, p.w, p.bytes(), ceil_div(uint64_t(src.ne[0]), 64), uint64_t(src.ne[2]));
}

void record_lora(Context& ctx, Stream& s, const OpArgs& a) {
  const Tensor &A = a.src[0], &B = a.src[1], &x = a.src[2], &slots = a.src[3], &scales = a.src[4], &d = a.dst;
  if (A.ne[1] > 256) unsupported("LORA: rank " + std::to_string(A.ne[1]) + " is more than lora.comp holds (256)");
  const Bound ba = bind(ctx, A, "src0 (A)"), bb = bind(ctx, B, "src1 (B)"), bx = bind(ctx, x, "src2 (x)");
  const Bound bs = bind(ctx, slots, "src3 (slots)"), bc = bind(ctx, scales, "src4 (scales)"), bd = bind(ctx, d, "dst");
  Binding bindings[kBindings] = {};
  bindings[0] = ba.binding;
  bindings[1] = bb.binding;
  bindings[2] = bx.binding;
  bindings[3] = bs.binding;
  bindings[4] = bc.binding;
  bindings[5] = bd.binding;
  Push p;
  p.u(ba.rel).u(A.nb[1]).u(A.nb[2]).u(bb.rel).u(B.nb[1]).u(B.nb[2]).u(bx.rel).u(x.nb[1]).u(bs.rel).u(bc.rel).u(bd.rel).u(d.nb[1]);
  p.u(A.ne[0]).u(A.ne[1]).u(B.ne[0]).u(A.ne[2]).u(x.ne[1]).u(A.dtype == LOOM_DTYPE_F16 ? 1 : 0).u(B.dtype == LOOM_DTYPE_F16 ? 1 : 0);
  const uint64_t n_tok = uint64_t(x.ne[1]);
  s.dispatch("lora", bindings, p.w, p.bytes(), std::min<uint64_t>(n_tok, 65535), ceil_div(n_tok, 65535));
}

}  // namespace

void record_op(Context& ctx, Stream& s, const OpArgs& a) {
  switch (a.type) {
    case LOOM_OP_MATMUL: return record_matmul(ctx, s, a);
    case LOOM_OP_GET_ROWS: return record_get_rows(ctx, s, a);
    case LOOM_OP_ADD: return record_rows(ctx, s, "binary", a.src[0], &a.src[1], a.dst, 0, 0.0f, false);
    case LOOM_OP_MUL: return record_rows(ctx, s, "binary", a.src[0], &a.src[1], a.dst, 1, 0.0f, false);
    case LOOM_OP_SCALE: return record_rows(ctx, s, "scale", a.src[0], nullptr, a.dst, 0, a.params.scale, false);
    case LOOM_OP_CLAMP: {  // the lower bound travels as the mode word's bits
      uint32_t lo_bits;
      std::memcpy(&lo_bits, &a.params.clamp_min, 4);
      return record_rows(ctx, s, "clamp", a.src[0], nullptr, a.dst, lo_bits, a.params.clamp_max, false);
    }
    case LOOM_OP_UNARY: return record_rows(ctx, s, "unary", a.src[0], nullptr, a.dst, uint32_t(a.params.activation), 0.0f, false);
    case LOOM_OP_GLU: return record_rows(ctx, s, "glu", a.src[0], &a.src[1], a.dst, uint32_t(a.params.activation), 0.0f, false);
    case LOOM_OP_RMS_NORM: {
      const bool weighted = a.n_src >= 2 && a.src[1].present;
      return record_rows(ctx, s, variant(ctx, "rms_norm"), a.src[0], weighted ? &a.src[1] : nullptr, a.dst, weighted ? 1 : 0,
                         a.params.eps, true);
    }
    case LOOM_OP_SOFTMAX: return record_rows(ctx, s, variant(ctx, "softmax"), a.src[0], nullptr, a.dst, 0, 0.0f, true);
    case LOOM_OP_COPY:
      return record_rows(ctx, s, "copy", a.src[0], nullptr, a.dst, uint32_t(a.src[0].dtype) | (uint32_t(a.dst.dtype) << 16), 0.0f, false);
    case LOOM_OP_ROPE: return record_rope(ctx, s, a);
    case LOOM_OP_STORE_KV: return record_store_kv(ctx, s, a);
    case LOOM_OP_PAGED_ATTENTION: return record_attention(ctx, s, a);
    case LOOM_OP_SSM_CONV: return record_ssm_conv(ctx, s, a);
    case LOOM_OP_MOE_ROUTE: return record_moe_route(ctx, s, a);
    case LOOM_OP_MOE_MATMUL: return record_moe_matmul(ctx, s, a);
    case LOOM_OP_MOE_SUM: return record_moe_sum(ctx, s, a);
    case LOOM_OP_LORA: return record_lora(ctx, s, a);
    case LOOM_OP_GATED_DELTA_NET: return record_gated_delta_net(ctx, s, a);
    case LOOM_OP_LAYER_NORM: return record_layer_norm(ctx, s, a);
    case LOOM_OP_ATTENTION: return record_encoder_attention(ctx, s, a);
    case LOOM_OP_PATCHES: return record_patches(ctx, s, a);
    case LOOM_OP_POOL_2D: return record_pool_2d(ctx, s, a);
    default: unsupported("op type " + std::to_string(a.type) + " is not implemented by the vulkan backend");
  }
}

}  // namespace loom::vk
