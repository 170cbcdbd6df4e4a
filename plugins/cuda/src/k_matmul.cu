// MATMUL: dst[n_out, n_tok] = x[n_in, n_tok] · W[n_in, n_out]ᵀ.
//  * Few tokens (decode): mat-vec kernels, one warp per output row and up to 8 token columns per
//    pass. Quantized weights: the activations are first quantized to int8 blocks of 32 (scale d and
//    d·Σq, like llama.cpp's q8_1) and each 32-weight chunk is dotted with __dp4a. Float weights:
//    fp32 FMA.
//  * Many tokens (prefill, >= gemm_min_tokens): cuBLAS GemmEx on tensor cores with fp32
//    accumulation. F32 weights use SGEMM; F16/BF16 weights are used in place; quantized weights are
//    dequantized to fp16 into the stream's scratch arena, a chunk of rows at a time (bounded
//    scratch instead of a permanent fp16 copy of every weight).
#include <algorithm>

#include "device_common.cuh"
#include "kernels.h"

namespace loom::cuda {

namespace {

struct Q8Block {
  float d;        // scale: x ≈ d * q
  float s;        // d * Σq, for formats with a per-chunk offset (Q4_K's min)
  int8_t qs[32];
};
static_assert(sizeof(Q8Block) == 40, "Q8Block layout");

constexpr int kRowsPerBlock = 4;  // warps per block, one output row each
constexpr int kMaxCols = 8;       // token columns per pass

// Types with an int8 (__dp4a) mat-vec kernel; the other quantized types decode chunks to floats.
bool has_int8_kernel(loom_dtype t) { return t == LOOM_DTYPE_Q4_0 || t == LOOM_DTYPE_Q8_0 || t == LOOM_DTYPE_Q4_K || t == LOOM_DTYPE_Q6_K; }
bool is_quantized(loom_dtype t) {
  return t != LOOM_DTYPE_F32 && t != LOOM_DTYPE_F16 && t != LOOM_DTYPE_BF16;
}
uint64_t align256(uint64_t n) { return (n + 255) & ~uint64_t(255); }

// ---- activation quantization ----------------------------------------------------------------------

// One warp per 32-value chunk of one token row.
__global__ void quantize_q8_kernel(DevTensor x, Q8Block* out, int64_t n_chunks, int64_t n_total) {
  const int64_t chunk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (chunk >= n_total) return;
  const int64_t t = chunk / n_chunks, c = chunk % n_chunks;
  const float v = reinterpret_cast<const float*>(row_ptr(x, t))[c * 32 + lane];
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.0f;
  const int q = amax > 0.0f ? __float2int_rn(v / d) : 0;
  const float sum = warp_sum(float(q));
  Q8Block& b = out[chunk];
  b.qs[lane] = int8_t(q);
  if (lane == 0) {
    b.d = d;
    b.s = d * sum;
  }
}

// The mat-vec kernels' last step: each token column's per-lane partial sums, reduced over the warp,
// into output row o.
__device__ __forceinline__ void store_row_sums(const float (&sum)[kMaxCols], int n_cols, int lane, DevTensor& dst, int64_t t0,
                                               int64_t o) {
#pragma unroll
  for (int k = 0; k < kMaxCols; k++) {
    if (k >= n_cols) break;
    const float s = warp_sum(sum[k]);
    if (lane == 0) reinterpret_cast<float*>(row_ptr(dst, t0 + k))[o] = s;
  }
}

// ---- quantized chunk x q8 dot products ------------------------------------------------------------

__device__ __forceinline__ int load_b2(const uint8_t* p, int i) {  // 4 bytes at p + 4i, 2-byte aligned
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p) + 2 * i;
  return int(uint32_t(h[0]) | (uint32_t(h[1]) << 16));
}

// The 32 weights of chunk c as signed int8 (8 ints) plus how to scale the integer dot products.
struct WeightChunk {
  int v[8];
  float a;   // multiplies d_x * Σ(v·q) (Q6_K: first half)
  float a2;  // Q6_K: second half
  float b;   // Q4_K: multiplies s_x (the chunk's minimum term)
};

template <loom_dtype T>
__device__ __forceinline__ void load_chunk(const uint8_t* row, int64_t c, WeightChunk& w) {
  if constexpr (T == LOOM_DTYPE_Q4_0) {
    const auto* b = reinterpret_cast<const loom_block_q4_0*>(row) + c;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int q = load_b2(b->qs, i);
      w.v[i] = __vsubss4(q & 0x0F0F0F0F, 0x08080808);
      w.v[i + 4] = __vsubss4((q >> 4) & 0x0F0F0F0F, 0x08080808);
    }
    w.a = h2f(b->d);
  } else if constexpr (T == LOOM_DTYPE_Q8_0) {
    const auto* b = reinterpret_cast<const loom_block_q8_0*>(row) + c;
#pragma unroll
    for (int i = 0; i < 8; i++) w.v[i] = load_b2(reinterpret_cast<const uint8_t*>(b->qs), i);
    w.a = h2f(b->d);
  } else if constexpr (T == LOOM_DTYPE_Q4_K) {
    const auto* b = reinterpret_cast<const loom_block_q4_k*>(row) + c / 8;
    const int j = int(c % 8);
    int sc, m;
    scale_min_k4(j, b->scales, sc, m);
    const uint8_t* q = b->qs + 32 * (j / 2);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; i++) w.v[i] = (load_b2(q, i) >> shift) & 0x0F0F0F0F;
    w.a = h2f(b->d) * float(sc);
    w.b = h2f(b->dmin) * float(m);
  } else {  // Q6_K
    const auto* b = reinterpret_cast<const loom_block_q6_k*>(row) + c / 8;
    const int j = int(c % 8), half = j / 4, qq = j % 4;
    const uint8_t* ql = b->ql + 64 * half + (qq & 1) * 32;
    const uint8_t* qh = b->qh + 32 * half;
    const int lshift = (qq / 2) * 4, hshift = 2 * qq;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int lo = (load_b2(ql, i) >> lshift) & 0x0F0F0F0F;
      const int hi = ((load_b2(qh, i) >> hshift) & 0x03030303) << 4;
      w.v[i] = __vsubss4(lo | hi, 0x20202020);
    }
    const float d = h2f(b->d);
    w.a = d * float(b->scales[8 * half + 2 * qq]);
    w.a2 = d * float(b->scales[8 * half + 2 * qq + 1]);
  }
}

template <loom_dtype T>
__device__ __forceinline__ float chunk_dot(const WeightChunk& w, const Q8Block& x) {
  const int* xq = reinterpret_cast<const int*>(x.qs);
  if constexpr (T == LOOM_DTYPE_Q6_K) {
    int s0 = 0, s1 = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) s0 = __dp4a(w.v[i], xq[i], s0);
#pragma unroll
    for (int i = 4; i < 8; i++) s1 = __dp4a(w.v[i], xq[i], s1);
    return x.d * (w.a * float(s0) + w.a2 * float(s1));
  } else {
    int s = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) s = __dp4a(w.v[i], xq[i], s);
    if constexpr (T == LOOM_DTYPE_Q4_K) return w.a * x.d * float(s) - w.b * x.s;
    return w.a * x.d * float(s);
  }
}

// One warp per output row, `n_cols` (<= 8) token columns starting at blockIdx.y * 8.
template <loom_dtype T>
__global__ void __launch_bounds__(kRowsPerBlock * 32) mmvq_kernel(DevTensor w, const Q8Block* xq, DevTensor dst, int64_t n_chunks, int64_t n_tok) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (o >= w.ne[1]) return;
  const int64_t t0 = int64_t(blockIdx.y) * kMaxCols;
  const int n_cols = int(min(int64_t(kMaxCols), n_tok - t0));
  const uint8_t* row = w.data + o * w.nb[1];
  float sum[kMaxCols] = {};
  for (int64_t c = lane; c < n_chunks; c += 32) {
    WeightChunk wc;
    load_chunk<T>(row, c, wc);
#pragma unroll
    for (int k = 0; k < kMaxCols; k++)
      if (k < n_cols) sum[k] += chunk_dot<T>(wc, xq[(t0 + k) * n_chunks + c]);
  }
  store_row_sums(sum, n_cols, lane, dst, t0, o);
}

// Float weights: fp32 FMA, lanes read consecutive elements (coalesced).
template <loom_dtype T>
__global__ void __launch_bounds__(kRowsPerBlock * 32) mmv_float_kernel(DevTensor w, DevTensor x, DevTensor dst, int64_t n_tok) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (o >= w.ne[1]) return;
  const int64_t t0 = int64_t(blockIdx.y) * kMaxCols;
  const int n_cols = int(min(int64_t(kMaxCols), n_tok - t0));
  const uint8_t* row = w.data + o * w.nb[1];
  const float* xr[kMaxCols];
#pragma unroll
  for (int k = 0; k < kMaxCols; k++) xr[k] = reinterpret_cast<const float*>(row_ptr(x, t0 + min(k, n_cols - 1)));
  float sum[kMaxCols] = {};
  for (int64_t i = lane; i < w.ne[0]; i += 32) {
    const float wv = load_float(T, row, i);
#pragma unroll
    for (int k = 0; k < kMaxCols; k++)
      if (k < n_cols) sum[k] += wv * xr[k][i];
  }
  store_row_sums(sum, n_cols, lane, dst, t0, o);
}

// Other quantized weights: each lane decodes its chunks to floats (dequant_chunk32) and multiplies
// them with the fp32 activations; simpler than an int8 path, for the less common types.
__global__ void __launch_bounds__(kRowsPerBlock * 32) mmv_dequant_kernel(DevTensor w, DevTensor x, DevTensor dst, int64_t n_tok) {
  const int lane = threadIdx.x % 32;
  const int64_t o = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (o >= w.ne[1]) return;
  const int64_t t0 = int64_t(blockIdx.y) * kMaxCols;
  const int n_cols = int(min(int64_t(kMaxCols), n_tok - t0));
  const uint8_t* row = w.data + o * w.nb[1];
  float sum[kMaxCols] = {};
  for (int64_t c = lane; c < w.ne[0] / 32; c += 32) {
    float v[32];
    dequant_chunk32(w.dtype, row, c, v);
#pragma unroll
    for (int k = 0; k < kMaxCols; k++) {
      if (k >= n_cols) break;
      const float* xr = reinterpret_cast<const float*>(row_ptr(x, t0 + k)) + c * 32;
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < 32; j++) s += v[j] * xr[j];
      sum[k] += s;
    }
  }
  store_row_sums(sum, n_cols, lane, dst, t0, o);
}

// ---- GEMM path helpers ------------------------------------------------------------------------------

// x (F32, strided rows) -> dense fp16 or bf16 [n_tok][n_in].
__global__ void convert_x_kernel(DevTensor x, uint16_t* out, bool to_bf16) {
  const int64_t t = blockIdx.x;
  const float* xr = reinterpret_cast<const float*>(row_ptr(x, t));
  uint16_t* o = out + t * x.ne[0];
  for (int64_t i = threadIdx.x; i < x.ne[0]; i += blockDim.x) o[i] = to_bf16 ? f2bf(xr[i]) : f2h(xr[i]);
}

// Rows [row0, row0 + n_rows) of a quantized W -> dense fp16 [n_rows][n_in]; one thread per chunk.
__global__ void dequant_f16_kernel(DevTensor w, int64_t row0, int64_t n_rows, __half* out) {
  const int64_t n_chunks = w.ne[0] / 32;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_rows * n_chunks) return;
  const int64_t r = idx / n_chunks, c = idx % n_chunks;
  float v[32];
  dequant_chunk32(w.dtype, w.data + (row0 + r) * w.nb[1], c, v);
  __half2* o = reinterpret_cast<__half2*>(out + r * w.ne[0] + c * 32);
#pragma unroll
  for (int j = 0; j < 16; j++) o[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
}

bool dense_rows(const DevTensor& t, uint64_t elem) {
  return t.rows_dense() && t.nb[1] % elem == 0;
}

bool use_gemm(const OpArgs& a, const LaunchContext& ctx) {
  const DevTensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  if (x.n_rows() < ctx.gemm_min_tokens) return false;
  // cuBLAS needs one leading dimension per operand.
  if (!dense_rows(dst, 4)) return false;
  if (w.dtype == LOOM_DTYPE_F32) return dense_rows(x, 4) && w.nb[1] % 4 == 0;
  if (w.dtype == LOOM_DTYPE_F16 || w.dtype == LOOM_DTYPE_BF16) return w.nb[1] % 2 == 0;
  return w.ne[0] % 8 == 0;
}

int64_t gemm_chunk_rows(const OpArgs& a, const LaunchContext& ctx) {
  const int64_t n_in = a.src[0].ne[0], n_out = a.src[0].ne[1];
  int64_t rows = int64_t(ctx.gemm_chunk_bytes / uint64_t(n_in * 2));
  if (rows >= 128) rows = rows / 128 * 128;
  return std::clamp<int64_t>(rows, 1, n_out);
}

void run_gemm(const OpArgs& a, const LaunchContext& ctx) {
  const DevTensor &w = a.src[0], &x = a.src[1], &dst = a.dst;
  const int64_t n_in = w.ne[0], n_out = w.ne[1], n_tok = x.n_rows();
  const int ldc = int(dst.nb[1] / 4);
  const float one = 1.0f, zero = 0.0f;
  if (w.dtype == LOOM_DTYPE_F32) {
    check_cublas(cublasSgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(n_tok), int(n_in), &one,
                             reinterpret_cast<const float*>(w.data), int(w.nb[1] / 4), reinterpret_cast<const float*>(x.data),
                             int(x.nb[1] / 4), &zero, reinterpret_cast<float*>(dst.data), ldc),
                 "cublasSgemm");
    return;
  }
  const bool bf16 = w.dtype == LOOM_DTYPE_BF16;
  const cudaDataType_t ab_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  auto* xh = reinterpret_cast<uint16_t*>(ctx.scratch);
  convert_x_kernel<<<unsigned(n_tok), 256, 0, ctx.stream>>>(x, xh, bf16);
  check_launch("MATMUL activation conversion");
  if (w.dtype == LOOM_DTYPE_F16 || bf16) {
    check_cublas(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(n_out), int(n_tok), int(n_in), &one, w.data, ab_type,
                              int(w.nb[1] / 2), xh, ab_type, int(n_in), &zero, dst.data, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return;
  }
  auto* wh = reinterpret_cast<__half*>(ctx.scratch + align256(uint64_t(n_tok * n_in) * 2));
  const int64_t chunk = gemm_chunk_rows(a, ctx);
  for (int64_t row0 = 0; row0 < n_out; row0 += chunk) {
    const int64_t rows = std::min(chunk, n_out - row0);
    dequant_f16_kernel<<<grid_1d(rows * (n_in / 32), 256), 256, 0, ctx.stream>>>(w, row0, rows, wh);
    check_launch("MATMUL weight dequantization");
    check_cublas(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), int(n_tok), int(n_in), &one, wh, CUDA_R_16F,
                              int(n_in), xh, CUDA_R_16F, int(n_in), &zero, dst.data + row0 * 4, CUDA_R_32F, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
}

template <loom_dtype T>
void run_mmvq(const OpArgs& a, const LaunchContext& ctx) {
  const DevTensor &w = a.src[0], &x = a.src[1];
  const int64_t n_chunks = w.ne[0] / 32, n_tok = x.n_rows();
  auto* xq = reinterpret_cast<Q8Block*>(ctx.scratch);
  quantize_q8_kernel<<<grid_1d(n_tok * n_chunks * 32, 256), 256, 0, ctx.stream>>>(x, xq, n_chunks, n_tok * n_chunks);
  check_launch("MATMUL activation quantization");
  const dim3 grid(grid_1d(w.ne[1], kRowsPerBlock), unsigned((n_tok + kMaxCols - 1) / kMaxCols));
  mmvq_kernel<T><<<grid, kRowsPerBlock * 32, 0, ctx.stream>>>(w, xq, a.dst, n_chunks, n_tok);
  check_launch("MATMUL mat-vec kernel");
}

template <loom_dtype T>
void run_mmv_float(const OpArgs& a, const LaunchContext& ctx) {
  const int64_t n_tok = a.src[1].n_rows();
  const dim3 grid(grid_1d(a.src[0].ne[1], kRowsPerBlock), unsigned((n_tok + kMaxCols - 1) / kMaxCols));
  mmv_float_kernel<T><<<grid, kRowsPerBlock * 32, 0, ctx.stream>>>(a.src[0], a.src[1], a.dst, n_tok);
  check_launch("MATMUL mat-vec kernel");
}

}  // namespace

uint64_t matmul_scratch_bytes(const OpArgs& a, const LaunchContext& ctx) {
  const DevTensor& w = a.src[0];
  const uint64_t n_in = uint64_t(w.ne[0]), n_tok = uint64_t(a.src[1].n_rows());
  if (use_gemm(a, ctx)) {
    if (w.dtype == LOOM_DTYPE_F32) return 0;
    uint64_t bytes = align256(n_tok * n_in * 2);
    if (is_quantized(w.dtype)) bytes += uint64_t(gemm_chunk_rows(a, ctx)) * n_in * 2;
    return bytes;
  }
  return has_int8_kernel(w.dtype) ? n_tok * (n_in / 32) * sizeof(Q8Block) : 0;
}

void launch_matmul(const OpArgs& a, const LaunchContext& ctx) {
  if (use_gemm(a, ctx)) return run_gemm(a, ctx);
  switch (a.src[0].dtype) {
    case LOOM_DTYPE_Q4_0: return run_mmvq<LOOM_DTYPE_Q4_0>(a, ctx);
    case LOOM_DTYPE_Q8_0: return run_mmvq<LOOM_DTYPE_Q8_0>(a, ctx);
    case LOOM_DTYPE_Q4_K: return run_mmvq<LOOM_DTYPE_Q4_K>(a, ctx);
    case LOOM_DTYPE_Q6_K: return run_mmvq<LOOM_DTYPE_Q6_K>(a, ctx);
    case LOOM_DTYPE_F32: return run_mmv_float<LOOM_DTYPE_F32>(a, ctx);
    case LOOM_DTYPE_F16: return run_mmv_float<LOOM_DTYPE_F16>(a, ctx);
    case LOOM_DTYPE_BF16: return run_mmv_float<LOOM_DTYPE_BF16>(a, ctx);
    case LOOM_DTYPE_Q4_1:
    case LOOM_DTYPE_Q5_0:
    case LOOM_DTYPE_Q5_1:
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_Q5_K:
    case LOOM_DTYPE_IQ4_NL:
    case LOOM_DTYPE_IQ4_XS: {
      const int64_t n_tok = a.src[1].n_rows();
      const dim3 grid(grid_1d(a.src[0].ne[1], kRowsPerBlock), unsigned((n_tok + kMaxCols - 1) / kMaxCols));
      mmv_dequant_kernel<<<grid, kRowsPerBlock * 32, 0, ctx.stream>>>(a.src[0], a.src[1], a.dst, n_tok);
      return check_launch("MATMUL mat-vec kernel (decoded chunks)");
    }
    default: unsupported(std::string("MATMUL: weight dtype ") + dtype_name(a.src[0].dtype) + " has no cuda kernel");
  }
}

}  // namespace loom::cuda
