// Row-wise and element-wise kernels: GET_ROWS, ADD/MUL, SCALE, RMS_NORM, ROPE, GLU/UNARY, COPY,
// SOFTMAX and STORE_KV. One thread block per row (or per head x token); rows may be strided.
#include "device_common.cuh"
#include "kernels.h"

namespace loom::cuda {

void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float activation(loom_activation act, float x) {
  switch (act) {
    case LOOM_ACTIVATION_SILU: return x / (1.0f + expf(-x));
    case LOOM_ACTIVATION_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case LOOM_ACTIVATION_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case LOOM_ACTIVATION_RELU: return x > 0.0f ? x : 0.0f;
    default: return x;
  }
}

// dst[:, i] = table[:, ids[i]], decoded to F32.
__global__ void get_rows_kernel(DevTensor table, DevTensor ids, DevTensor dst, int* error_word) {
  const int64_t i = blockIdx.x;
  const int32_t id = *reinterpret_cast<const int32_t*>(ids.data + i * ids.nb[0]);
  if (id < 0 || id >= table.ne[1]) {
    if (threadIdx.x == 0) report_error(error_word, kBadRowId);
    return;
  }
  const uint8_t* src = table.data + int64_t(id) * table.nb[1];
  float* out = reinterpret_cast<float*>(dst.data + i * dst.nb[1]);
  const int64_t n = table.ne[0];
  if (is_float_type(table.dtype)) {
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) out[e] = load_float(table.dtype, src, e);
    return;
  }
  for (int64_t c = threadIdx.x; c < n / 32; c += blockDim.x) {
    float v[32];
    dequant_chunk32(table.dtype, src, c, v);
#pragma unroll
    for (int j = 0; j < 32; j++) out[c * 32 + j] = v[j];
  }
}

__global__ void binary_kernel(DevTensor x, DevTensor y, DevTensor dst, bool is_add) {
  const int64_t r = blockIdx.x;
  const bool broadcast = y.ne[1] * y.ne[2] * y.ne[3] == 1;
  const float* xr = reinterpret_cast<const float*>(row_ptr(x, r));
  const float* yr = reinterpret_cast<const float*>(row_ptr(y, broadcast ? 0 : r));
  float* out = reinterpret_cast<float*>(row_ptr(dst, r));
  for (int64_t i = threadIdx.x; i < x.ne[0]; i += blockDim.x) out[i] = is_add ? xr[i] + yr[i] : xr[i] * yr[i];
}

__global__ void scale_kernel(DevTensor x, DevTensor dst, float s) {
  const float* xr = reinterpret_cast<const float*>(row_ptr(x, blockIdx.x));
  float* out = reinterpret_cast<float*>(row_ptr(dst, blockIdx.x));
  for (int64_t i = threadIdx.x; i < x.ne[0]; i += blockDim.x) out[i] = xr[i] * s;
}

// y = x / sqrt(mean(x²) + eps) * w   (w optional)
__global__ void rms_norm_kernel(DevTensor x, DevTensor w, DevTensor dst, float eps) {
  const float* xr = reinterpret_cast<const float*>(row_ptr(x, blockIdx.x));
  float* out = reinterpret_cast<float*>(row_ptr(dst, blockIdx.x));
  const float* wr = reinterpret_cast<const float*>(w.data);
  const int64_t n = x.ne[0];
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i] * xr[i];
  sum = block_sum(sum);
  const float inv = rsqrtf(sum / float(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = xr[i] * inv * (wr ? wr[i] : 1.0f);
}

// x [head_dim, n_heads, n_tok]; one block per (token, head). Angles in double like the reference,
// so positions in the thousands keep their phase.
// With frequency factors (src2) each pair's angle is divided by its factor; YaRN blends the scaled
// and original frequencies by a ramp over the pair index (the ABI's formula, as the CPU reference).
__global__ void rope_kernel(DevTensor x, DevTensor pos, DevTensor factors, DevTensor dst, OpParams p) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const float* in = reinterpret_cast<const float*>(x.data + h * x.nb[1] + t * x.nb[2]);
  float* out = reinterpret_cast<float*>(dst.data + h * dst.nb[1] + t * dst.nb[2]);
  const int64_t position = *reinterpret_cast<const int32_t*>(pos.data + t * pos.nb[0]);
  const int64_t half = p.n_dims / 2;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    double theta_extrap = double(position) * pow(double(p.freq_base), -2.0 * double(i) / double(p.n_dims));
    if (p.rope_freq_factors) theta_extrap /= double(reinterpret_cast<const float*>(factors.data)[i]);
    double r = 0.0;
    if (p.yarn_ext_factor != 0.0f) {
      const double span = fmax(0.001, double(p.yarn_corr_high) - double(p.yarn_corr_low));
      r = double(p.yarn_ext_factor) * (1.0 - fmin(fmax((double(i) - double(p.yarn_corr_low)) / span, 0.0), 1.0));
    }
    const double theta = theta_extrap * (double(p.freq_scale) * (1.0 - r) + r);
    double s, c;
    sincos(theta, &s, &c);
    const float cs = float(c), sn = float(s);
    const int64_t i0 = p.rope_mode == LOOM_ROPE_NEOX ? i : 2 * i;
    const int64_t i1 = p.rope_mode == LOOM_ROPE_NEOX ? i + half : 2 * i + 1;
    const float a = in[i0], b = in[i1];  // read both before writing: dst may alias x
    out[i0] = a * cs - b * sn;
    out[i1] = a * sn + b * cs;
  }
  for (int64_t i = 2 * half + threadIdx.x; i < x.ne[0]; i += blockDim.x) out[i] = in[i];
}

__global__ void glu_kernel(DevTensor g, DevTensor u, DevTensor dst, loom_activation act) {
  const float* gr = reinterpret_cast<const float*>(row_ptr(g, blockIdx.x));
  const float* ur = u.data ? reinterpret_cast<const float*>(row_ptr(u, blockIdx.x)) : nullptr;
  float* out = reinterpret_cast<float*>(row_ptr(dst, blockIdx.x));
  for (int64_t i = threadIdx.x; i < g.ne[0]; i += blockDim.x) out[i] = activation(act, gr[i]) * (ur ? ur[i] : 1.0f);
}

__global__ void copy_kernel(DevTensor src, DevTensor dst) {
  const uint8_t* in = row_ptr(src, blockIdx.x);
  uint8_t* out = row_ptr(dst, blockIdx.x);
  for (int64_t i = threadIdx.x; i < src.ne[0]; i += blockDim.x) {
    const float v = load_float(src.dtype, in, i);
    if (dst.dtype == LOOM_DTYPE_F32) reinterpret_cast<float*>(out)[i] = v;
    else if (dst.dtype == LOOM_DTYPE_F16) reinterpret_cast<uint16_t*>(out)[i] = f2h(v);
    else reinterpret_cast<uint16_t*>(out)[i] = f2bf(v);
  }
}

__global__ void softmax_kernel(DevTensor x, DevTensor dst) {
  const float* xr = reinterpret_cast<const float*>(row_ptr(x, blockIdx.x));
  float* out = reinterpret_cast<float*>(row_ptr(dst, blockIdx.x));
  const int64_t n = x.ne[0];
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
  m = block_max(m);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(xr[i] - m);
  sum = block_sum(sum);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = expf(xr[i] - m) * inv;
}

// Writes one head's row of k or v into the cache at `slot`, converting to the cache type.
__device__ void store_row(const DevTensor& cache, int64_t head, int64_t slot, const float* x) {
  uint8_t* row = cache.data + head * cache.nb[1] + slot * cache.nb[2];
  const int64_t n = cache.ne[0];
  if (cache.dtype == LOOM_DTYPE_F32) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) reinterpret_cast<float*>(row)[i] = x[i];
  } else if (cache.dtype == LOOM_DTYPE_F16) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) reinterpret_cast<uint16_t*>(row)[i] = f2h(x[i]);
  } else if (cache.dtype == LOOM_DTYPE_F8_E4M3) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = f2e4m3(x[i]);
  } else {  // INT8_KV: f32 scale = max|x| / 127, then round(x / scale) clamped to ±127
    float amax = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) amax = fmaxf(amax, fabsf(x[i]));
    amax = block_max(amax);
    const float scale = amax / 127.0f;
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    if (threadIdx.x == 0) {
      const uint32_t bits = __float_as_uint(scale);  // rows need not be 4-byte aligned
      for (int b = 0; b < 4; b++) row[b] = uint8_t(bits >> (8 * b));
    }
    auto* q = reinterpret_cast<int8_t*>(row + 4);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) q[i] = int8_t(rintf(fminf(fmaxf(x[i] * inv, -127.0f), 127.0f)));
  }
}

// One block per (token, kv head).
__global__ void store_kv_kernel(DevTensor k, DevTensor v, DevTensor slots, DevTensor k_cache, DevTensor v_cache, int* error_word) {
  const int64_t t = blockIdx.x, h = blockIdx.y;
  const int32_t slot = *reinterpret_cast<const int32_t*>(slots.data + t * slots.nb[0]);
  if (slot < 0) return;  // padding
  if (slot >= k_cache.ne[2]) {
    if (threadIdx.x == 0) report_error(error_word, kBadSlot);
    return;
  }
  store_row(k_cache, h, slot, reinterpret_cast<const float*>(k.data + h * k.nb[1] + t * k.nb[2]));
  store_row(v_cache, h, slot, reinterpret_cast<const float*>(v.data + h * v.nb[1] + t * v.nb[2]));
}

int threads_for(int64_t n) { return n >= 256 ? kThreads : n > 64 ? 128 : 64; }

}  // namespace

void launch_get_rows(const OpArgs& a, const LaunchContext& ctx) {
  get_rows_kernel<<<unsigned(a.src[1].ne[0]), 128, 0, ctx.stream>>>(a.src[0], a.src[1], a.dst, ctx.error_word);
  check_launch("GET_ROWS kernel");
}

void launch_binary(const OpArgs& a, const LaunchContext& ctx) {
  binary_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], a.src[1], a.dst, a.type == LOOM_OP_ADD);
  check_launch("ADD/MUL kernel");
}

void launch_scale(const OpArgs& a, const LaunchContext& ctx) {
  scale_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], a.dst, a.params.scale);
  check_launch("SCALE kernel");
}

void launch_rms_norm(const OpArgs& a, const LaunchContext& ctx) {
  rms_norm_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], a.src[1], a.dst, a.params.eps);
  check_launch("RMS_NORM kernel");
}

void launch_rope(const OpArgs& a, const LaunchContext& ctx) {
  const dim3 grid(unsigned(a.src[0].ne[2]), unsigned(a.src[0].ne[1]));
  rope_kernel<<<grid, 64, 0, ctx.stream>>>(a.src[0], a.src[1], a.params.rope_freq_factors ? a.src[2] : a.src[0], a.dst, a.params);
  check_launch("ROPE kernel");
}

void launch_glu(const OpArgs& a, const LaunchContext& ctx) {
  const DevTensor up = a.type == LOOM_OP_GLU ? a.src[1] : DevTensor{};
  glu_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], up, a.dst, a.params.activation);
  check_launch("GLU kernel");
}

void launch_copy(const OpArgs& a, const LaunchContext& ctx) {
  copy_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], a.dst);
  check_launch("COPY kernel");
}

void launch_softmax(const OpArgs& a, const LaunchContext& ctx) {
  softmax_kernel<<<unsigned(a.src[0].n_rows()), threads_for(a.src[0].ne[0]), 0, ctx.stream>>>(a.src[0], a.dst);
  check_launch("SOFTMAX kernel");
}

void launch_store_kv(const OpArgs& a, const LaunchContext& ctx) {
  const dim3 grid(unsigned(a.src[0].ne[2]), unsigned(a.src[0].ne[1]));
  store_kv_kernel<<<grid, 128, 0, ctx.stream>>>(a.src[0], a.src[1], a.src[2], a.src[3], a.src[4], ctx.error_word);
  check_launch("STORE_KV kernel");
}

}  // namespace loom::cuda
