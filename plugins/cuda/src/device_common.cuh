// Device-side helpers shared by the .cu files: element conversions, strided row addressing,
// block reductions, 32-element chunk decoding of every weight format, and error reporting.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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

// ggml's kvalues_iq4nl: the 16 non-uniform levels of the IQ4 codebook.
__device__ __constant__ static const float kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                             1,    13,   25,  38,  53,  69,  89,  113};

__device__ __forceinline__ float load_f16(const uint8_t* p) {
  return h2f(uint16_t(p[0] | (uint16_t(p[1]) << 8)));
}

// The GGML types beyond Q4_0 / Q8_0 / Q4_K / Q6_K, decoded as ggml's dequantize_row_* does, from
// raw bytes (layouts in ggml-common.h). Chunk c is one block (32-element types) or one eighth of
// a 256-element super-block.
__device__ __forceinline__ void dequant_chunk32_more(loom_dtype type, const uint8_t* row, int64_t c, float* out) {
  if (type == LOOM_DTYPE_Q4_1) {  // d, m, qs[16]
    const uint8_t* b = row + c * 20;
    const float d = load_f16(b), m = load_f16(b + 2);
    for (int j = 0; j < 16; j++) {
      out[j] = float(b[4 + j] & 0xF) * d + m;
      out[j + 16] = float(b[4 + j] >> 4) * d + m;
    }
  } else if (type == LOOM_DTYPE_Q5_0 || type == LOOM_DTYPE_Q5_1) {  // d, [m,] qh[4], qs[16]
    const bool has_min = type == LOOM_DTYPE_Q5_1;
    const uint8_t* b = row + c * (has_min ? 24 : 22);
    const float d = load_f16(b), m = has_min ? load_f16(b + 2) : 0.0f;
    const uint8_t* qhp = b + (has_min ? 4 : 2);
    const uint32_t qh = uint32_t(qhp[0]) | (uint32_t(qhp[1]) << 8) | (uint32_t(qhp[2]) << 16) | (uint32_t(qhp[3]) << 24);
    const uint8_t* qs = qhp + 4;
    for (int j = 0; j < 16; j++) {
      const int lo = (qs[j] & 0xF) | int(((qh >> j) & 1) << 4), hi = (qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
      out[j] = has_min ? float(lo) * d + m : float(lo - 16) * d;
      out[j + 16] = has_min ? float(hi) * d + m : float(hi - 16) * d;
    }
  } else if (type == LOOM_DTYPE_IQ4_NL) {  // d, qs[16]
    const uint8_t* b = row + c * 18;
    const float d = load_f16(b);
    for (int j = 0; j < 16; j++) {
      out[j] = d * kIq4Levels[b[2 + j] & 0xF];
      out[j + 16] = d * kIq4Levels[b[2 + j] >> 4];
    }
  } else if (type == LOOM_DTYPE_IQ4_XS) {  // d, scales_h (u16), scales_l[4], qs[128]
    const uint8_t* b = row + (c / 8) * 136;
    const int ib = int(c % 8);
    const int scales_h = b[2] | (b[3] << 8);
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float d = load_f16(b) * float(ls - 32);
    const uint8_t* qs = b + 8 + 16 * ib;
    for (int j = 0; j < 16; j++) {
      out[j] = d * kIq4Levels[qs[j] & 0xF];
      out[j + 16] = d * kIq4Levels[qs[j] >> 4];
    }
  } else if (type == LOOM_DTYPE_Q5_K) {  // d, dmin, scales[12], qh[32], qs[128]
    const uint8_t* b = row + (c / 8) * 176;
    const int j = int(c % 8);
    int sc, m;
    scale_min_k4(j, b + 4, sc, m);
    const float d = load_f16(b) * float(sc), mn = load_f16(b + 2) * float(m);
    const uint8_t* qs = b + 48 + 32 * (j / 2);
    const int shift = (j & 1) * 4;
    for (int l = 0; l < 32; l++) out[l] = d * float(((qs[l] >> shift) & 0xF) | (((b[16 + l] >> j) & 1) << 4)) - mn;
  } else if (type == LOOM_DTYPE_Q2_K) {  // scales[16], qs[64], d, dmin
    const uint8_t* b = row + (c / 8) * 84;
    const int cc = int(c % 8), h = cc / 4, j = cc % 4;
    const float d = load_f16(b + 80), dmin = load_f16(b + 82);
    for (int l = 0; l < 32; l++) {
      const int sc = b[8 * h + 2 * j + l / 16];
      out[l] = d * float(sc & 0xF) * float((b[16 + 32 * h + l] >> (2 * j)) & 3) - dmin * float(sc >> 4);
    }
  } else {  // Q3_K: hmask[32], qs[64], scales[12], d
    const uint8_t* b = row + (c / 8) * 110;
    const int cc = int(c % 8), h = cc / 4, j = cc % 4;
    const float d = load_f16(b + 108);
    for (int l = 0; l < 32; l++) {
      const int k = 8 * h + 2 * j + l / 16;
      const int low = k < 8 ? b[96 + k] & 0xF : b[96 + k - 8] >> 4;
      const int high = (b[104 + k % 4] >> (2 * (k / 4))) & 3;
      const int q = ((b[32 + 32 * h + l] >> (2 * j)) & 3) - (((b[l] >> (4 * h + j)) & 1) ? 0 : 4);
      out[l] = d * float((low | (high << 4)) - 32) * float(q);
    }
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
  } else if (type != LOOM_DTYPE_Q6_K) {
    dequant_chunk32_more(type, row, c, out);
  } else {
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

// The F8_E4M3 KV cache: CUDA's own conversions (hardware on sm_89 and later), satfinite as vLLM's
// fp8_e4m3 cache writes it: beyond +-448 saturates, ties to even.
__device__ __forceinline__ uint8_t f2e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
__device__ __forceinline__ float e4m32f(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), __NV_E4M3)));
}

}  // namespace loom::cuda
