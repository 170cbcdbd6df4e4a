// Reference ops (everything except the attention pair, which lives in reference_attention.cpp).
// Plain loops, one op per function; shapes are written innermost first.
#include "reference_ops.h"

#include "encoder_ops.h"
#include "lora_ops.h"
#include "moe_ops.h"
#include "recurrent_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::cpu {

int64_t checked_index(const Tensor& ids, int64_t i, int64_t limit, const char* what) {
  const int64_t v = reinterpret_cast<const int32_t*>(ids.data + i * ids.nb[0])[0];
  if (v < 0 || v >= limit)
    invalid(std::string(what) + " " + std::to_string(v) + " at index " + std::to_string(i) + " is outside [0, " +
            std::to_string(limit) + ")");
  return v;
}

RopePositions rope_positions(const OpArgs& a, int64_t token) {
  const Tensor& pos = a.src[1];
  RopePositions r;
  for (int k = 0; k < 4; k++) {
    const int64_t row = a.params.mrope ? k : 0;
    r.component[k] = reinterpret_cast<const int32_t*>(pos.data + row * int64_t(pos.nb[1]))[token * int64_t(pos.nb[0] / 4)];
  }
  return r;
}

namespace {

// Which position pair i turns by: M-RoPE's section of the pair's sector, else the only one.
int rope_component(const OpParams& p, uint32_t i) {
  if (!p.mrope) return 0;
  const int64_t total = int64_t(p.sections[0]) + p.sections[1] + p.sections[2] + p.sections[3];
  const int64_t sector = int64_t(i) % total;
  if (p.mrope_interleaved) {  // Qwen3-VL: time, height, width in turn while each section lasts
    if (sector % 3 == 1 && sector < 3 * int64_t(p.sections[1])) return 1;
    if (sector % 3 == 2 && sector < 3 * int64_t(p.sections[2])) return 2;
    if (sector % 3 == 0 && sector < 3 * int64_t(p.sections[0])) return 0;
    return 3;
  }
  int64_t end = 0;
  for (int k = 0; k < 3; k++) {
    end += p.sections[k];
    if (sector < end) return k;
  }
  return 3;
}

}  // namespace

void rope_cos_sin(const OpParams& p, const RopePositions& positions, const float* freq_factors, float* cos_out, float* sin_out) {
  for (uint32_t i = 0; i < p.n_dims / 2; i++) {
    // theta_i = pos * freq_scale * base^(-2i / n_dims) / factor_i, in double so large positions stay exact.
    const int64_t pos = positions.component[rope_component(p, i)];
    const double factor = freq_factors != nullptr ? double(freq_factors[i]) : 1.0;
    const double theta_extrap = double(pos) * std::pow(double(p.freq_base), -2.0 * i / double(p.n_dims)) / factor;
    double theta = double(p.freq_scale) * theta_extrap;
    if (p.yarn_ext_factor != 0.0f) {
      // YaRN: pairs below the ramp keep their original frequency, pairs above it are interpolated.
      const double y = (double(i) - p.yarn_corr_low) / std::max(0.001, double(p.yarn_corr_high) - p.yarn_corr_low);
      const double ramp = (1.0 - std::clamp(y, 0.0, 1.0)) * p.yarn_ext_factor;
      theta = theta * (1.0 - ramp) + theta_extrap * ramp;
    }
    cos_out[i] = float(std::cos(theta));
    sin_out[i] = float(std::sin(theta));
  }
}

std::vector<float> rope_freq_factors(const OpArgs& a) {
  std::vector<float> factors;
  if (!a.params.rope_freq_factors) return factors;
  const Tensor& f = a.src[2];
  for (int64_t i = 0; i < f.ne[0]; i++) factors.push_back(reinterpret_cast<const float*>(f.data)[i * int64_t(f.nb[0] / 4)]);
  return factors;
}

namespace {

// dst[dim, n] = table[:, ids[i]]
void get_rows(const OpArgs& a) {
  const Tensor &table = a.src[0], &ids = a.src[1], &dst = a.dst;
  for (int64_t i = 0; i < ids.ne[0]; i++) {
    const int64_t id = checked_index(ids, i, table.ne[1], "GET_ROWS: row id");
    dequantize_row(table.dtype, table.at(id), dst.frow(i), table.ne[0]);
  }
}

// dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ
void matmul(const OpArgs& a) {
  const Tensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  std::vector<float> w_row(static_cast<size_t>(n_in));  // [n_in]
  for (int64_t o = 0; o < n_out; o++) {
    dequantize_row(w.dtype, w.at(o), w_row.data(), n_in);
    for (int64_t t = 0; t < n_tok; t++) {
      const float* xt = x.frow(t);
      double sum = 0.0;
      for (int64_t i = 0; i < n_in; i++) sum += double(w_row[i]) * double(xt[i]);
      dst.frow(t)[o] = float(sum);
    }
  }
}

// dst = src0 (+|*) src1, src1 the same shape or one row broadcast over every row.
void binary(const OpArgs& a, bool is_add) {
  const Tensor &x = a.src[0], &y = a.src[1], &dst = a.dst;
  const bool broadcast = y.n_rows() == 1;
  for (int64_t r = 0; r < x.n_rows(); r++) {
    const float* xr = x.frow(r);
    const float* yr = y.frow(broadcast ? 0 : r);
    float* out = dst.frow(r);
    for (int64_t i = 0; i < x.ne[0]; i++) out[i] = is_add ? xr[i] + yr[i] : xr[i] * yr[i];
  }
}

void scale(const OpArgs& a) {
  for (int64_t r = 0; r < a.src[0].n_rows(); r++) {
    const float* x = a.src[0].frow(r);
    float* out = a.dst.frow(r);
    for (int64_t i = 0; i < a.src[0].ne[0]; i++) out[i] = x[i] * a.params.scale;
  }
}

// y = x / sqrt(mean(x²) + eps) * w
void rms_norm(const OpArgs& a) {
  const Tensor &x = a.src[0], &w = a.src[1];
  const int64_t n = x.ne[0];
  for (int64_t r = 0; r < x.n_rows(); r++) {
    const float* xr = x.frow(r);
    float* out = a.dst.frow(r);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; i++) sum_sq += double(xr[i]) * xr[i];
    const float inv_rms = float(1.0 / std::sqrt(sum_sq / double(n) + double(a.params.eps)));
    for (int64_t i = 0; i < n; i++) out[i] = xr[i] * inv_rms * (w.present() ? w.frow(0)[i] : 1.0f);
  }
}

// x [head_dim, n_heads, n_tok]: rotate the first n_dims of every head by its token's position.
void rope(const OpArgs& a) {
  const Tensor &x = a.src[0], &dst = a.dst;
  const int64_t head_dim = x.ne[0], n_heads = x.ne[1], n_tok = x.ne[2];
  const int64_t half = a.params.n_dims / 2;
  std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
  const std::vector<float> factors = rope_freq_factors(a);
  for (int64_t t = 0; t < n_tok; t++) {
    rope_cos_sin(a.params, rope_positions(a, t), factors.empty() ? nullptr : factors.data(), cos_t.data(), sin_t.data());
    for (int64_t h = 0; h < n_heads; h++) {
      const float* in = reinterpret_cast<const float*>(x.at(h, t));
      float* out = reinterpret_cast<float*>(dst.at(h, t));
      std::vector<float> row(in, in + head_dim);  // [head_dim] copy so dst may alias x
      for (int64_t i = 0; i < half; i++) {
        // NORMAL rotates adjacent pairs (2i, 2i+1); NEOX rotates (i, i + n_dims/2).
        const int64_t i0 = a.params.rope_mode == LOOM_ROPE_NEOX ? i : 2 * i;
        const int64_t i1 = a.params.rope_mode == LOOM_ROPE_NEOX ? i + half : 2 * i + 1;
        out[i0] = row[i0] * cos_t[i] - row[i1] * sin_t[i];
        out[i1] = row[i0] * sin_t[i] + row[i1] * cos_t[i];
      }
      for (int64_t i = 2 * half; i < head_dim; i++) out[i] = row[i];
    }
  }
}

// dst = act(gate) * up   (or act(x) for UNARY)
void glu(const OpArgs& a, bool gated) {
  for (int64_t r = 0; r < a.src[0].n_rows(); r++) {
    const float* g = a.src[0].frow(r);
    const float* u = gated ? a.src[1].frow(r) : nullptr;
    float* out = a.dst.frow(r);
    for (int64_t i = 0; i < a.src[0].ne[0]; i++)
      out[i] = gated ? glu_value(a.params.activation, g[i], u[i]) : activation_value(a.params.activation, g[i]);
  }
}

float load_element(loom_dtype type, const uint8_t* row, int64_t i) {
  if (type == LOOM_DTYPE_F32) return reinterpret_cast<const float*>(row)[i];
  if (type == LOOM_DTYPE_F16) return half_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
  return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
}

void store_element(loom_dtype type, uint8_t* row, int64_t i, float v) {
  if (type == LOOM_DTYPE_F32) reinterpret_cast<float*>(row)[i] = v;
  else if (type == LOOM_DTYPE_F16) reinterpret_cast<uint16_t*>(row)[i] = float_to_half(v);
  else reinterpret_cast<uint16_t*>(row)[i] = float_to_bf16(v);
}

// dst = convert(src0) between F32, F16 and BF16 (F16 and BF16 widen to F32 exactly).
void copy(const OpArgs& a) {
  for (int64_t r = 0; r < a.src[0].n_rows(); r++)
    for (int64_t i = 0; i < a.src[0].ne[0]; i++)
      store_element(a.dst.dtype, a.dst.row(r), i, load_element(a.src[0].dtype, a.src[0].row(r), i));
}

void softmax(const OpArgs& a) {
  const int64_t n = a.src[0].ne[0];
  for (int64_t r = 0; r < a.src[0].n_rows(); r++) {
    const float* x = a.src[0].frow(r);
    float* out = a.dst.frow(r);
    const float max = *std::max_element(x, x + n);
    double sum = 0.0;
    std::vector<double> e(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) sum += e[size_t(i)] = std::exp(double(x[i]) - max);
    for (int64_t i = 0; i < n; i++) out[i] = float(e[size_t(i)] / sum);
  }
}

void in_order(int64_t n_tasks, const std::function<void(int64_t)>& fn) {
  for (int64_t t = 0; t < n_tasks; ++t) fn(t);
}

}  // namespace

void run_reference_op(const OpArgs& a) {
  switch (a.type) {
    case LOOM_OP_GET_ROWS: return get_rows(a);
    case LOOM_OP_MATMUL: return matmul(a);
    case LOOM_OP_ADD: return binary(a, true);
    case LOOM_OP_MUL: return binary(a, false);
    case LOOM_OP_SCALE: return scale(a);
    case LOOM_OP_RMS_NORM: return rms_norm(a);
    case LOOM_OP_ROPE: return rope(a);
    case LOOM_OP_GLU: return glu(a, true);
    case LOOM_OP_UNARY: return glu(a, false);
    case LOOM_OP_COPY: return copy(a);
    case LOOM_OP_SOFTMAX: return softmax(a);
    case LOOM_OP_STORE_KV: return reference_store_kv(a);
    case LOOM_OP_PAGED_ATTENTION: return reference_paged_attention(a);
    case LOOM_OP_MOE_ROUTE: return moe_route_rows(a, 0, a.src[0].ne[1]);
    case LOOM_OP_MOE_MATMUL: return reference_moe_matmul(a);
    case LOOM_OP_MOE_SUM: return moe_sum_rows(a, 0, a.src[0].ne[2]);
    case LOOM_OP_SSM_CONV: return ssm_conv(a, in_order);
    case LOOM_OP_GATED_DELTA_NET: return gated_delta_net(a, in_order);
    case LOOM_OP_LAYER_NORM: return layer_norm(a, in_order);
    case LOOM_OP_ATTENTION: return encoder_attention(a, in_order);
    case LOOM_OP_PATCHES: return image_patches(a, in_order);
    case LOOM_OP_POOL_2D: return pool_2d(a, in_order);
    case LOOM_OP_CLAMP: return clamp(a, in_order);
    case LOOM_OP_LORA: return lora(a, in_order);
    default: unsupported("op " + std::to_string(a.type) + " has no reference implementation");
  }
}

}  // namespace loom::cpu
