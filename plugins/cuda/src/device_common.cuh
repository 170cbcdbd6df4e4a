// Device-side helpers shared by the .cu files: element conversions, strided row addressing,
// block reductions, 32-element chunk decoding of every weight format, and error reporting.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_types.h"

namespace loom::cuda {

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
// Same rounding as the CPU reference (round to nearest even, NaN kept quiet), so COPY is bit-exact.
__device__ __forceinline__ uint16_t f2bf(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);
  return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }

// Row r of the flattened [ne1, ne2, ne3] index space of a tensor.
__device__ __forceinline__ uint8_t* row_ptr(const DevTensor& t, int64_t r) {
  const int64_t i1 = r % t.ne[1], i2 = (r / t.ne[1]) % t.ne[2], i3 = r / (t.ne[1] * t.ne[2]);
  return t.data + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Records the first data-dependent error of the stream's work.
__device__ __forceinline__ void report_error(int* word, int code) { atomicCAS(word, 0, code); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Block-wide sum / max (blockDim.x a multiple of 32, <= 1024). Every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? part[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  v = warp_max(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? part[lane] : -INFINITY;
  return warp_max(v);
}

// Q4_K's packing of eight 6-bit scales and mins (ggml's get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Decodes 32 consecutive weights (chunk `c` of a row, i.e. elements 32c..32c+31) into out[0..31].
// Quantized types only; float types are read element by element.
__device__ __forceinline__ void dequant_chunk32(loom_dtype type, const uint8_t* row, int64_t c, float* out) {
  if (type == LOOM_DTYPE_Q4_0) {
    const auto* b = reinterpret_cast<const loom_block_q4_0*>(row) + c;
    const float d = h2f(b->d);
#pragma unroll
    for (int j = 0; j < 16; j++) {
      out[j] = float((b->qs[j] & 0xF) - 8) * d;
      out[j + 16] = float((b->qs[j] >> 4) - 8) * d;
    }
  } else if (type == LOOM_DTYPE_Q8_0) {
    const auto* b = reinterpret_cast<const loom_block_q8_0*>(row) + c;
    const float d = h2f(b->d);
#pragma unroll
    for (int j = 0; j < 32; j++) out[j] = float(b->qs[j]) * d;
  } else if (type == LOOM_DTYPE_Q4_K) {
    const auto* b = reinterpret_cast<const loom_block_q4_k*>(row) + c / 8;
    const int j = int(c % 8);
    int sc, m;
    scale_min_k4(j, b->scales, sc, m);
    const float d = h2f(b->d) * float(sc), mn = h2f(b->dmin) * float(m);
    const uint8_t* q = b->qs + 32 * (j / 2);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; l++) out[l] = d * float((q[l] >> shift) & 0xF) - mn;
  } else {  // Q6_K
    const auto* b = reinterpret_cast<const loom_block_q6_k*>(row) + c / 8;
    const int j = int(c % 8), half = j / 4, qq = j % 4;
    const uint8_t* ql = b->ql + 64 * half + (qq & 1) * 32;
    const uint8_t* qh = b->qh + 32 * half;
    const int8_t* sc = b->scales + 8 * half + 2 * qq;
    const int lshift = (qq / 2) * 4, hshift = 2 * qq;
    const float d = h2f(b->d);
#pragma unroll
    for (int l = 0; l < 32; l++) {
      const int raw = ((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4);
      out[l] = d * float(sc[l / 16]) * float(raw - 32);
    }
  }
}

__device__ __forceinline__ bool is_float_type(loom_dtype t) {
  return t == LOOM_DTYPE_F32 || t == LOOM_DTYPE_F16 || t == LOOM_DTYPE_BF16;
}
__device__ __forceinline__ float load_float(loom_dtype t, const uint8_t* row, int64_t i) {
  if (t == LOOM_DTYPE_F32) return reinterpret_cast<const float*>(row)[i];
  if (t == LOOM_DTYPE_F16) return h2f(reinterpret_cast<const uint16_t*>(row)[i]);
  return bf2f(reinterpret_cast<const uint16_t*>(row)[i]);
}

inline unsigned grid_1d(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }
void check_launch(const char* kernel);  // throws on a launch error (k_rowops.cu)

}  // namespace loom::cuda
