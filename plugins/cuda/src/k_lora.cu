// LORA (ABI 1.16): run-time adapters added to the base MATMUL's output, each row through its own
// adapter slot. One thread block per batch row: the rank products A_s·x land in shared memory (one
// warp per rank row, lanes along n_in), then every thread adds its outputs' share of B_s·(A_s·x) along
// the outputs, where B is stored transposed so consecutive threads read consecutive bytes.
#include "device_common.cuh"
#include "kernels.h"

namespace loom::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__global__ void lora_kernel(DevTensor A, DevTensor Bt, DevTensor x, DevTensor slots, DevTensor scales, DevTensor dst, int* error_word) {
  extern __shared__ float down[];  // [rank]
  const int64_t t = blockIdx.x;
  const int32_t s = *reinterpret_cast<const int32_t*>(slots.data + t * slots.nb[0]);
  const int64_t n_in = A.ne[0], rank = A.ne[1], n_slots = A.ne[2], n_out = Bt.ne[0];
  if (s == -1) return;  // the base model's row: nothing to add
  if (s < -1 || s >= n_slots) {
    if (threadIdx.x == 0) report_error(error_word, kBadLoraSlot);
    return;
  }
  const float scale = reinterpret_cast<const float*>(scales.data)[s];
  const float* xr = reinterpret_cast<const float*>(x.data + t * x.nb[1]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t j = warp; j < rank; j += kWarps) {
    const uint8_t* a_row = A.data + j * A.nb[1] + int64_t(s) * A.nb[2];
    float sum = 0.0f;
    for (int64_t i = lane; i < n_in; i += 32) sum += load_float(A.dtype, a_row, i) * xr[i];
    sum = warp_sum(sum);
    if (lane == 0) down[j] = scale * sum;
  }
  __syncthreads();
  float* out = reinterpret_cast<float*>(dst.data + t * dst.nb[1]);
  for (int64_t o = threadIdx.x; o < n_out; o += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < rank; j++) acc += down[j] * load_float(Bt.dtype, Bt.data + j * Bt.nb[1] + int64_t(s) * Bt.nb[2], o);
    out[o] += acc;
  }
}

}  // namespace

void launch_lora(const OpArgs& a, const LaunchContext& ctx) {
  const int64_t rank = a.src[0].ne[1], n_tok = a.src[2].ne[1];
  if (rank > kMaxLoraRank) unsupported("LORA: rank " + std::to_string(rank) + " is above the cuda backend's limit of " + std::to_string(kMaxLoraRank));
  if (n_tok == 0) return;
  lora_kernel<<<unsigned(n_tok), kThreads, size_t(rank) * sizeof(float), ctx.stream>>>(a.src[0], a.src[1], a.src[2], a.src[3], a.src[4], a.dst,
                                                                                      ctx.error_word);
  check_launch("lora_kernel");
}

}  // namespace loom::cuda
