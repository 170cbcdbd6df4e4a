// Checks an op's dtypes, shapes and (when buffers are given) bounds, and turns it into OpArgs with
// device pointers. The rules are plugins/common/backend_op_validation.h, shared with the other backends,
// so all accept and refuse the same ops (plus the attention kernel's head_dim limit).
#pragma once

#include "cuda_types.h"

// The plugin's definition of the opaque buffer handle: one device allocation.
struct loom_buffer {
  uint32_t magic;  // kBufferMagic while alive: catches some stale or foreign handles
  uint8_t* data;   // device pointer
  uint64_t size;
  uint64_t capacity;         // bytes actually allocated (>= size; the allocator rounds up)
  loom_buffer_usage usage;
};

namespace loom::cuda {

inline constexpr uint32_t kBufferMagic = 0x4c435542u;

// Throws OpError: UNSUPPORTED for dtype/op combinations this backend does not implement,
// INVALID_ARGUMENT for inconsistent shapes, strides, params or out-of-bounds views.
// With need_buffers == false only types and shapes are checked (supports_op); data stays nullptr.
OpArgs resolve_op(const loom_op& op, bool need_buffers);

}  // namespace loom::cuda
