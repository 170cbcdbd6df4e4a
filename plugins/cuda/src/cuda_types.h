// The CUDA backend's internal vocabulary, shared by the host-side C++ (g++) and the kernels (nvcc):
// validated device tensor views, op parameters with defaults filled in, and the per-launch context.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "loom/backend.h"

namespace loom::cuda {

// An error raised inside the plugin; the ABI edge turns it into `status` + last_error message.
struct OpError : std::runtime_error {
  loom_status status;
  OpError(loom_status s, const std::string& message) : std::runtime_error(message), status(s) {}
};
[[noreturn]] inline void invalid(const std::string& message) { throw OpError(LOOM_STATUS_INVALID_ARGUMENT, message); }
[[noreturn]] inline void unsupported(const std::string& message) { throw OpError(LOOM_STATUS_UNSUPPORTED, message); }
// Throws DEVICE_ERROR (or OUT_OF_MEMORY) naming the CUDA call that failed.
void check_cuda(cudaError_t error, const char* what);
void check_cublas(cublasStatus_t status, const char* what);

// Data-dependent errors found by kernels (an id, slot or block out of range): the first one is
// written to the stream's error word and reported by stream_synchronize.
enum DeviceErrorCode : int {
  kDeviceOk = 0,
  kBadRowId = 1,      // GET_ROWS id outside the table
  kBadSlot = 2,       // STORE_KV slot outside the cache
  kBadSequence = 3,   // PAGED_ATTENTION seqs entry inconsistent with the batch
  kBadBlock = 4,      // PAGED_ATTENTION block id outside the cache
  kBadLoraSlot = 5,   // LORA slot outside -1..n_slots-1
};
const char* device_error_text(int code);

// ---- dtype layout (bit-exact with GGML's blocks) ----------------------------------------------------
struct TypeLayout {
  int64_t block_elems = 0;  // 0 = unknown to this backend
  uint64_t block_bytes = 0;
};
TypeLayout type_layout(loom_dtype type);
const char* dtype_name(loom_dtype type);
uint64_t row_bytes(loom_dtype type, int64_t ne0);
bool is_weight_dtype(loom_dtype type);  // MATMUL / GET_ROWS src0 types with kernels here
bool is_kv_dtype(loom_dtype type);      // F32, F16, INT8_KV

// ---- validated views ----------------------------------------------------------------------------------
// A device tensor whose bounds were checked against its buffer. data == nullptr: absent operand.
struct DevTensor {
  loom_dtype dtype = LOOM_DTYPE_F32;
  uint8_t* data = nullptr;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t nb[4] = {0, 0, 0, 0};
  bool present() const { return data != nullptr; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  // Rows are dense when row r sits at r * nb[1] (every kernel here indexes rows that way when true).
  bool rows_dense() const { return (ne[2] == 1 || nb[2] == nb[1] * uint64_t(ne[1])) && (ne[3] == 1 || nb[3] == nb[2] * uint64_t(ne[2])); }
};

struct OpParams {
  float scale = 1.0f;
  float eps = 1e-6f;
  loom_rope_mode rope_mode = LOOM_ROPE_NORMAL;
  uint32_t n_dims = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool rope_freq_factors = false;  // src2 divides each pair's frequency (ABI 1.1)
  float yarn_ext_factor = 0.0f, yarn_corr_low = 0.0f, yarn_corr_high = 0.0f;  // YaRN (ABI 1.2)
  loom_activation activation = LOOM_ACTIVATION_SILU;
  float attn_scale = 0.0f;
  uint32_t block_size = 0;
  uint32_t sliding_window = 0;
  float softcap = 0.0f;
};

struct OpArgs {
  loom_op_type type = 0;
  DevTensor dst;
  uint32_t n_src = 0;
  DevTensor src[LOOM_OP_MAX_SRC];
  OpParams params;
};

// Everything a launcher needs besides the op. Scratch is a per-stream arena sized before the op
// list is launched (so nothing is allocated while a CUDA graph is being captured).
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  uint8_t* scratch = nullptr;
  uint64_t scratch_size = 0;
  int* error_word = nullptr;  // device-visible (mapped pinned) int
  int sm_count = 1;
  int64_t gemm_min_tokens = 64;                     // MATMUL with this many tokens or more uses cuBLAS
  uint64_t gemm_chunk_bytes = uint64_t(256) << 20;  // fp16 weight scratch per cuBLAS call
};

}  // namespace loom::cuda
