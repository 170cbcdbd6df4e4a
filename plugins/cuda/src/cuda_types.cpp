// dtype layouts and CUDA error translation.
#include "cuda_types.h"

namespace loom::cuda {

void check_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  const std::string message = std::string("cuda backend: ") + what + " failed: " + cudaGetErrorName(error) + " (" +
                              cudaGetErrorString(error) + ")";
  if (error == cudaErrorMemoryAllocation) throw OpError(LOOM_STATUS_OUT_OF_MEMORY, message);
  throw OpError(LOOM_STATUS_DEVICE_ERROR, message);
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const std::string message = std::string("cuda backend: ") + what + " failed: cuBLAS status " + std::to_string(int(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OpError(LOOM_STATUS_OUT_OF_MEMORY, message);
  throw OpError(LOOM_STATUS_DEVICE_ERROR, message);
}

const char* device_error_text(int code) {
  switch (code) {
    case kBadRowId: return "GET_ROWS: a row id is outside the table";
    case kBadSlot: return "STORE_KV: a slot is outside the cache";
    case kBadSequence: return "PAGED_ATTENTION: a seqs entry is inconsistent with the batch (rows, context length or block table size)";
    case kBadBlock: return "PAGED_ATTENTION: a block id is outside the cache";
    case kBadLoraSlot: return "LORA: a row's adapter slot (src3) is outside -1..n_slots-1";
    default: return "unknown device-side error";
  }
}

TypeLayout type_layout(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return {1, 4};
    case LOOM_DTYPE_I32: return {1, 4};
    case LOOM_DTYPE_F16: return {1, 2};
    case LOOM_DTYPE_BF16: return {1, 2};
    case LOOM_DTYPE_Q4_0: return {LOOM_QK4_0, sizeof(loom_block_q4_0)};
    case LOOM_DTYPE_Q8_0: return {LOOM_QK8_0, sizeof(loom_block_q8_0)};
    case LOOM_DTYPE_Q4_K: return {LOOM_QK_K, sizeof(loom_block_q4_k)};
    case LOOM_DTYPE_Q6_K: return {LOOM_QK_K, sizeof(loom_block_q6_k)};
    // GGML's layouts (ggml-common.h), decoded by dequant_chunk32_more (device_common.cuh).
    case LOOM_DTYPE_Q4_1: return {32, 20};
    case LOOM_DTYPE_Q5_0: return {32, 22};
    case LOOM_DTYPE_Q5_1: return {32, 24};
    case LOOM_DTYPE_IQ4_NL: return {32, 18};
    case LOOM_DTYPE_Q2_K: return {LOOM_QK_K, 84};
    case LOOM_DTYPE_Q3_K: return {LOOM_QK_K, 110};
    case LOOM_DTYPE_Q5_K: return {LOOM_QK_K, 176};
    case LOOM_DTYPE_IQ4_XS: return {LOOM_QK_K, 136};
    case LOOM_DTYPE_INT8_KV: return {1, 1};  // int8 elements after a 4-byte scale
    case LOOM_DTYPE_F8_E4M3: return {1, 1};
    default: return {};
  }
}

const char* dtype_name(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32: return "F32";
    case LOOM_DTYPE_F16: return "F16";
    case LOOM_DTYPE_BF16: return "BF16";
    case LOOM_DTYPE_I32: return "I32";
    case LOOM_DTYPE_Q4_0: return "Q4_0";
    case LOOM_DTYPE_Q4_1: return "Q4_1";
    case LOOM_DTYPE_Q5_0: return "Q5_0";
    case LOOM_DTYPE_Q5_1: return "Q5_1";
    case LOOM_DTYPE_Q8_0: return "Q8_0";
    case LOOM_DTYPE_Q2_K: return "Q2_K";
    case LOOM_DTYPE_Q3_K: return "Q3_K";
    case LOOM_DTYPE_Q4_K: return "Q4_K";
    case LOOM_DTYPE_Q5_K: return "Q5_K";
    case LOOM_DTYPE_Q6_K: return "Q6_K";
    case LOOM_DTYPE_IQ4_NL: return "IQ4_NL";
    case LOOM_DTYPE_IQ4_XS: return "IQ4_XS";
    case LOOM_DTYPE_INT8_KV: return "INT8_KV";
    case LOOM_DTYPE_I8_ROW: return "I8_ROW";
    case LOOM_DTYPE_I4_G128: return "I4_G128";
    case LOOM_DTYPE_F8_E4M3: return "F8_E4M3";
    default: return "unknown";
  }
}

uint64_t row_bytes(loom_dtype type, int64_t ne0) {
  if (type == LOOM_DTYPE_INT8_KV) return 4 + uint64_t(ne0);
  const TypeLayout l = type_layout(type);
  return uint64_t(ne0 / l.block_elems) * l.block_bytes;
}

bool is_weight_dtype(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_F16:
    case LOOM_DTYPE_BF16:
    case LOOM_DTYPE_Q4_0:
    case LOOM_DTYPE_Q4_1:
    case LOOM_DTYPE_Q5_0:
    case LOOM_DTYPE_Q5_1:
    case LOOM_DTYPE_Q8_0:
    case LOOM_DTYPE_Q2_K:
    case LOOM_DTYPE_Q3_K:
    case LOOM_DTYPE_Q4_K:
    case LOOM_DTYPE_Q5_K:
    case LOOM_DTYPE_Q6_K:
    case LOOM_DTYPE_IQ4_NL:
    case LOOM_DTYPE_IQ4_XS: return true;
    default: return false;
  }
}

bool is_kv_dtype(loom_dtype type) {
  return type == LOOM_DTYPE_F32 || type == LOOM_DTYPE_F16 || type == LOOM_DTYPE_INT8_KV || type == LOOM_DTYPE_F8_E4M3;
}

}  // namespace loom::cuda
