// PAGED_ATTENTION over the block table, F32 / F16 / INT8_KV / F8_E4M3 caches read in-kernel.
//  * Decode (few query rows per sequence): flash-decoding. One block per (query row, KV head,
//    split of 256 keys): the block loads the group's query heads once and each key once for the
//    whole group (grouped-query aware), computes a partial softmax (max, sum, Σp·v) and a combine
//    kernel merges the splits. The split count comes from the block table's capacity, so the grid
//    depends only on shapes (graph-capturable); splits past a sequence's context exit at once.
//  * Prefill: one block per (32 query rows, head), tiled over 32 keys at a time through shared
//    memory with an online softmax (FlashAttention-1 style, fp32 FMA).
// Both honour the sliding window and the logit softcap; rows not owned by any sequence are left as
// they are, like the reference.
#include <algorithm>

#include "device_common.cuh"
#include "kernels.h"

namespace loom::cuda {

namespace {

constexpr int kSplit = 256;  // keys per decode split
constexpr int kTileQ = 32;   // query rows per prefill block
constexpr int kTileK = 32;   // keys per prefill tile

struct SeqEntry {
  int first_row, n_query, ctx_len, valid;
};

__device__ __forceinline__ SeqEntry read_seq(const DevTensor& seqs, int s) {
  const auto* col = reinterpret_cast<const int32_t*>(seqs.data + int64_t(s) * seqs.nb[1]);
  return {col[0], col[1], col[2], 1};
}

__device__ __forceinline__ int first_visible(int pos, uint32_t window) {
  return window == 0 || pos < int(window) ? 0 : pos - int(window) + 1;
}

// Cache row of key position `kpos` (nullptr and an error report when the block id is bad).
__device__ __forceinline__ const uint8_t* kv_row(const DevTensor& cache, const DevTensor& tables, int seq, int kpos,
                                                 int block_size, int64_t kv_head, int* error_word) {
  const int32_t block = reinterpret_cast<const int32_t*>(tables.data + int64_t(seq) * tables.nb[1])[kpos / block_size];
  if (block < 0 || (int64_t(block) + 1) * block_size > cache.ne[2]) {
    report_error(error_word, kBadBlock);
    return nullptr;
  }
  const int64_t slot = int64_t(block) * block_size + kpos % block_size;
  return cache.data + kv_head * cache.nb[1] + slot * cache.nb[2];
}

__device__ __forceinline__ float kv_scale(loom_dtype t, const uint8_t* row) {
  if (t != LOOM_DTYPE_INT8_KV) return 1.0f;
  const uint32_t bits = uint32_t(row[0]) | uint32_t(row[1]) << 8 | uint32_t(row[2]) << 16 | uint32_t(row[3]) << 24;
  return __uint_as_float(bits);
}
__device__ __forceinline__ float kv_load(loom_dtype t, const uint8_t* row, int d, float scale) {
  if (t == LOOM_DTYPE_F32) return reinterpret_cast<const float*>(row)[d];
  if (t == LOOM_DTYPE_F16) return h2f(reinterpret_cast<const uint16_t*>(row)[d]);
  if (t == LOOM_DTYPE_F8_E4M3) return e4m32f(row[d]);
  return float(reinterpret_cast<const int8_t*>(row + 4)[d]) * scale;
}

__device__ __forceinline__ float cap(float x, float softcap) { return softcap > 0.0f ? softcap * tanhf(x / softcap) : x; }

// row_seq[t] = sequence owning query row t (the buffer was memset to -1). Also validates seqs.
__global__ void map_rows_kernel(DevTensor seqs, DevTensor tables, int n_tok, int block_size, int* row_seq, int* error_word) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= seqs.ne[1]) return;
  const SeqEntry e = read_seq(seqs, s);
  if (e.first_row < 0 || e.n_query < 0 || e.first_row + e.n_query > n_tok || e.n_query > e.ctx_len ||
      int64_t(e.ctx_len) > tables.ne[0] * block_size) {
    report_error(error_word, kBadSequence);
    return;
  }
  for (int i = 0; i < e.n_query; i++) row_seq[e.first_row + i] = s;
}

struct AttnArgs {
  DevTensor q, k_cache, v_cache, tables, seqs, dst;
  float scale, softcap;
  int block_size;
  uint32_t window;
  int group;     // query heads per KV head
  int n_splits;  // decode only
  const int* row_seq;
  float* part_o;  // [n_tok][n_heads][n_splits][head_dim]
  float2* part_ml;  // [n_tok][n_heads][n_splits] (max, sum)
  int* error_word;
};

// ---- decode ------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(128) decode_split_kernel(AttnArgs a) {
  const int split = blockIdx.x, kv_head = blockIdx.y, t = blockIdx.z;
  const int D = int(a.q.ne[0]), H = int(a.q.ne[1]), G = a.group;
  const int seq = a.row_seq[t];
  if (seq < 0) return;
  const SeqEntry e = read_seq(a.seqs, seq);
  const int pos = e.ctx_len - e.n_query + (t - e.first_row);
  const int k_lo = max(first_visible(pos, a.window), split * kSplit);
  const int k_hi = min(pos + 1, (split + 1) * kSplit);
  const int n_keys = k_hi - k_lo;
  const int64_t part = (int64_t(t) * H + int64_t(kv_head) * G) * a.n_splits + split;  // head j adds j * n_splits
  if (n_keys <= 0) {
    for (int j = threadIdx.x; j < G; j += blockDim.x) a.part_ml[part + int64_t(j) * a.n_splits] = make_float2(-INFINITY, 0.0f);
    return;
  }
  __shared__ float q_s[kMaxGroup * kMaxHeadDim];
  __shared__ float p_s[kMaxGroup * kSplit];
  __shared__ float2 ml_s[kMaxGroup];
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    const int j = i / D, d = i % D;
    q_s[i] = reinterpret_cast<const float*>(a.q.data + int64_t(kv_head * G + j) * a.q.nb[1] + int64_t(t) * a.q.nb[2])[d] * a.scale;
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  const loom_dtype kt = a.k_cache.dtype, vt = a.v_cache.dtype;
  // Scores: one warp per key, every head of the group at once.
  for (int kk = warp; kk < n_keys; kk += n_warps) {
    const uint8_t* row = kv_row(a.k_cache, a.tables, seq, k_lo + kk, a.block_size, kv_head, a.error_word);
    float kd[kMaxHeadDim / 32];
    const float ks = row ? kv_scale(kt, row) : 0.0f;
#pragma unroll
    for (int e2 = 0; e2 < kMaxHeadDim / 32; e2++) {
      const int d = lane + 32 * e2;
      kd[e2] = (row && d < D) ? kv_load(kt, row, d, ks) : 0.0f;
    }
    for (int j = 0; j < G; j++) {
      float dot = 0.0f;
#pragma unroll
      for (int e2 = 0; e2 < kMaxHeadDim / 32; e2++) {
        const int d = lane + 32 * e2;
        if (d < D) dot += q_s[j * D + d] * kd[e2];
      }
      dot = warp_sum(dot);
      if (lane == 0) p_s[j * kSplit + kk] = cap(dot, a.softcap);
    }
  }
  __syncthreads();
  // Softmax pieces per head: one warp per head.
  for (int j = warp; j < G; j += n_warps) {
    float m = -INFINITY;
    for (int kk = lane; kk < n_keys; kk += 32) m = fmaxf(m, p_s[j * kSplit + kk]);
    m = warp_max(m);
    float l = 0.0f;
    for (int kk = lane; kk < n_keys; kk += 32) {
      const float p = expf(p_s[j * kSplit + kk] - m);
      p_s[j * kSplit + kk] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) ml_s[j] = make_float2(m, l);
  }
  __syncthreads();
  // Σ p·v: each thread owns up to two dimensions, for every head of the group.
  float acc[2][kMaxGroup];
#pragma unroll
  for (int x = 0; x < 2; x++)
#pragma unroll
    for (int j = 0; j < kMaxGroup; j++) acc[x][j] = 0.0f;
  const int d0 = threadIdx.x, d1 = threadIdx.x + 128;
  for (int kk = 0; kk < n_keys; kk++) {
    const uint8_t* row = kv_row(a.v_cache, a.tables, seq, k_lo + kk, a.block_size, kv_head, a.error_word);
    if (row == nullptr) continue;
    const float vs = kv_scale(vt, row);
    const float v0 = d0 < D ? kv_load(vt, row, d0, vs) : 0.0f;
    const float v1 = d1 < D ? kv_load(vt, row, d1, vs) : 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxGroup; j++) {
      if (j < G) {
        const float p = p_s[j * kSplit + kk];
        acc[0][j] += p * v0;
        acc[1][j] += p * v1;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxGroup; j++) {
    if (j >= G) break;
    float* o = a.part_o + (part + int64_t(j) * a.n_splits) * D;
    if (d0 < D) o[d0] = acc[0][j];
    if (d1 < D) o[d1] = acc[1][j];
    if (threadIdx.x == 0) a.part_ml[part + int64_t(j) * a.n_splits] = ml_s[j];
  }
}

// Merges the splits of one (row, head): out = Σ e^{m_s - M} o_s / Σ e^{m_s - M} l_s.
__global__ void decode_combine_kernel(AttnArgs a) {
  const int t = blockIdx.x, h = blockIdx.y;
  if (a.row_seq[t] < 0) return;
  const int D = int(a.q.ne[0]), H = int(a.q.ne[1]);
  const int64_t base = (int64_t(t) * H + h) * a.n_splits;
  float M = -INFINITY;
  for (int s = 0; s < a.n_splits; s++) M = fmaxf(M, a.part_ml[base + s].x);
  float L = 0.0f;
  for (int s = 0; s < a.n_splits; s++) {
    const float2 ml = a.part_ml[base + s];
    if (ml.x != -INFINITY) L += ml.y * expf(ml.x - M);
  }
  float* out = reinterpret_cast<float*>(a.dst.data + int64_t(h) * a.dst.nb[1] + int64_t(t) * a.dst.nb[2]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < a.n_splits; s++) {
      const float2 ml = a.part_ml[base + s];
      if (ml.x != -INFINITY) sum += a.part_o[(base + s) * D + d] * expf(ml.x - M);
    }
    out[d] = L > 0.0f ? sum / L : 0.0f;
  }
}

// ---- prefill -----------------------------------------------------------------------------------------

template <int DMAX>
__global__ void __launch_bounds__(128) prefill_kernel(AttnArgs a) {
  extern __shared__ float smem[];
  const int D = int(a.q.ne[0]), S = D + 1;  // padded row stride against bank conflicts
  float* q_s = smem;                       // [kTileQ][S]
  float* k_s = q_s + kTileQ * S;           // [kTileK][S]
  float* v_s = k_s + kTileK * S;           // [kTileK][S]
  float* p_s = v_s + kTileK * S;           // [kTileQ][kTileK + 1]
  __shared__ int rs[kTileQ];
  const int h = blockIdx.y, kv_head = h / a.group;
  const int r0 = blockIdx.x * kTileQ, n_tok = int(a.q.ne[2]);
  const int r = threadIdx.x / 4, sub = threadIdx.x % 4;
  if (threadIdx.x < kTileQ) rs[threadIdx.x] = r0 + int(threadIdx.x) < n_tok ? a.row_seq[r0 + threadIdx.x] : -1;
  __syncthreads();
  // The tile's rows may belong to several sequences: handle each run of equal rs[] in turn.
  for (int seg = 0; seg < kTileQ;) {
    const int seq = rs[seg];
    int seg_end = seg + 1;
    while (seg_end < kTileQ && rs[seg_end] == seq) seg_end++;
    if (seq < 0) {
      seg = seg_end;
      continue;
    }
    const SeqEntry e = read_seq(a.seqs, seq);
    const int base_pos = e.ctx_len - e.n_query - e.first_row;  // pos of row t = base_pos + t
    const int pos_first = base_pos + r0 + seg, pos_last = base_pos + r0 + seg_end - 1;
    const bool active = r >= seg && r < seg_end;
    const int my_pos = base_pos + r0 + r;
    const int my_first = first_visible(my_pos, a.window);
    for (int i = threadIdx.x; i < kTileQ * D; i += blockDim.x) {
      const int rr = i / D, d = i % D;
      q_s[rr * S + d] = (rr >= seg && rr < seg_end)
                            ? reinterpret_cast<const float*>(a.q.data + int64_t(h) * a.q.nb[1] + int64_t(r0 + rr) * a.q.nb[2])[d] * a.scale
                            : 0.0f;
    }
    float o[DMAX / 4];
#pragma unroll
    for (int k = 0; k < DMAX / 4; k++) o[k] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int k_begin = first_visible(pos_first, a.window);
    for (int k0 = k_begin; k0 <= pos_last; k0 += kTileK) {
      __syncthreads();  // previous tile (and q_s) fully consumed / written
      for (int i = threadIdx.x; i < kTileK * D; i += blockDim.x) {
        const int kk = i / D, d = i % D, kp = k0 + kk;
        float kv = 0.0f, vv = 0.0f;
        if (kp <= pos_last) {
          const uint8_t* krow = kv_row(a.k_cache, a.tables, seq, kp, a.block_size, kv_head, a.error_word);
          const uint8_t* vrow = kv_row(a.v_cache, a.tables, seq, kp, a.block_size, kv_head, a.error_word);
          if (krow) kv = kv_load(a.k_cache.dtype, krow, d, kv_scale(a.k_cache.dtype, krow));
          if (vrow) vv = kv_load(a.v_cache.dtype, vrow, d, kv_scale(a.v_cache.dtype, vrow));
        }
        k_s[kk * S + d] = kv;
        v_s[kk * S + d] = vv;
      }
      __syncthreads();
      // Scores of row r against keys sub, sub + 4, ...
      float sc[kTileK / 4];
      float tile_max = -INFINITY;
#pragma unroll
      for (int x = 0; x < kTileK / 4; x++) {
        const int kk = sub + 4 * x, kp = k0 + kk;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q_s[r * S + d] * k_s[kk * S + d];
        const bool visible = active && kp >= my_first && kp <= my_pos;
        sc[x] = visible ? cap(dot, a.softcap) : -INFINITY;
        tile_max = fmaxf(tile_max, sc[x]);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m, tile_max);
      float psum = 0.0f;
#pragma unroll
      for (int x = 0; x < kTileK / 4; x++) {
        const float p = m_new == -INFINITY ? 0.0f : expf(sc[x] - m_new);
        p_s[r * (kTileK + 1) + sub + 4 * x] = p;
        psum += p;
      }
      psum += __shfl_xor_sync(0xffffffffu, psum, 1);
      psum += __shfl_xor_sync(0xffffffffu, psum, 2);
      const float corr = (m == -INFINITY) ? 0.0f : expf(m - m_new);
      l = l * corr + psum;
      m = m_new;
      __syncwarp();
#pragma unroll
      for (int k = 0; k < DMAX / 4; k++) {
        const int d = sub + 4 * k;
        if (d < D) {
          float acc = o[k] * corr;
          for (int kk = 0; kk < kTileK; kk++) acc += p_s[r * (kTileK + 1) + kk] * v_s[kk * S + d];
          o[k] = acc;
        }
      }
    }
    if (active) {
      float* out = reinterpret_cast<float*>(a.dst.data + int64_t(h) * a.dst.nb[1] + int64_t(r0 + r) * a.dst.nb[2]);
#pragma unroll
      for (int k = 0; k < DMAX / 4; k++) {
        const int d = sub + 4 * k;
        if (d < D) out[d] = l > 0.0f ? o[k] / l : 0.0f;
      }
    }
    __syncthreads();  // q_s is rewritten by the next segment
    seg = seg_end;
  }
}

template <int DMAX>
void launch_prefill(const AttnArgs& args, const LaunchContext& ctx) {
  const int D = int(args.q.ne[0]);
  const size_t smem = sizeof(float) * (size_t(kTileQ + 2 * kTileK) * size_t(D + 1) + size_t(kTileQ) * (kTileK + 1));
  check_cuda(cudaFuncSetAttribute(prefill_kernel<DMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
             "cudaFuncSetAttribute (attention shared memory)");
  const dim3 grid(unsigned((args.q.ne[2] + kTileQ - 1) / kTileQ), unsigned(args.q.ne[1]));
  prefill_kernel<DMAX><<<grid, 128, smem, ctx.stream>>>(args);
  check_launch("PAGED_ATTENTION prefill kernel");
}

int n_splits_for(const OpArgs& a) {
  const int64_t capacity = a.src[3].ne[0] * int64_t(a.params.block_size);
  return int(std::max<int64_t>(1, (capacity + kSplit - 1) / kSplit));
}

bool use_decode(const OpArgs& a) {
  const int64_t n_tok = a.src[0].ne[2], n_seqs = a.src[4].ne[1];
  const int64_t group = a.src[0].ne[1] / a.src[1].ne[1];
  return group <= kMaxGroup && n_tok <= 65535 && n_tok <= 4 * n_seqs;
}

uint64_t align256(uint64_t n) { return (n + 255) & ~uint64_t(255); }

}  // namespace

uint64_t attention_scratch_bytes(const OpArgs& a) {
  const uint64_t n_tok = uint64_t(a.src[0].ne[2]);
  uint64_t bytes = align256(n_tok * 4);
  if (use_decode(a)) {
    const uint64_t parts = n_tok * uint64_t(a.src[0].ne[1]) * uint64_t(n_splits_for(a));
    bytes += align256(parts * uint64_t(a.src[0].ne[0]) * 4) + align256(parts * 8);
  }
  return bytes;
}

void launch_paged_attention(const OpArgs& a, const LaunchContext& ctx) {
  AttnArgs args;
  args.q = a.src[0], args.k_cache = a.src[1], args.v_cache = a.src[2], args.tables = a.src[3], args.seqs = a.src[4];
  args.dst = a.dst;
  args.scale = a.params.attn_scale;
  args.softcap = a.params.softcap;
  args.block_size = int(a.params.block_size);
  args.window = a.params.sliding_window;
  args.group = int(a.src[0].ne[1] / a.src[1].ne[1]);
  args.n_splits = n_splits_for(a);
  args.error_word = ctx.error_word;
  const int64_t n_tok = a.src[0].ne[2], n_seqs = a.src[4].ne[1];
  int* row_seq = reinterpret_cast<int*>(ctx.scratch);
  args.row_seq = row_seq;
  uint8_t* next = ctx.scratch + align256(uint64_t(n_tok) * 4);
  check_cuda(cudaMemsetAsync(row_seq, 0xff, size_t(n_tok) * 4, ctx.stream), "cudaMemsetAsync");
  map_rows_kernel<<<grid_1d(n_seqs, 128), 128, 0, ctx.stream>>>(args.seqs, args.tables, int(n_tok), args.block_size, row_seq, ctx.error_word);
  check_launch("PAGED_ATTENTION row map");
  if (use_decode(a)) {
    const uint64_t parts = uint64_t(n_tok) * uint64_t(a.src[0].ne[1]) * uint64_t(args.n_splits);
    args.part_o = reinterpret_cast<float*>(next);
    args.part_ml = reinterpret_cast<float2*>(next + align256(parts * uint64_t(a.src[0].ne[0]) * 4));
    const dim3 grid(unsigned(args.n_splits), unsigned(a.src[1].ne[1]), unsigned(n_tok));
    decode_split_kernel<<<grid, 128, 0, ctx.stream>>>(args);
    check_launch("PAGED_ATTENTION decode kernel");
    decode_combine_kernel<<<dim3(unsigned(n_tok), unsigned(a.src[0].ne[1])), 128, 0, ctx.stream>>>(args);
    check_launch("PAGED_ATTENTION combine kernel");
    return;
  }
  const int64_t D = a.src[0].ne[0];
  if (D <= 64) return launch_prefill<64>(args, ctx);
  if (D <= 128) return launch_prefill<128>(args, ctx);
  return launch_prefill<256>(args, ctx);
}

}  // namespace loom::cuda
