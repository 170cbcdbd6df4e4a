// Checks an op's dtypes, shapes and (when buffers are given) bounds, and turns it into OpArgs.
#pragma once

#include "cpu_tensor.h"

// The plugin's definition of the opaque buffer handle: host memory, 64-byte aligned.
struct loom_buffer {
  uint32_t magic;  // kBufferMagic while alive: catches some stale or foreign handles
  uint8_t* data;
  uint64_t size;
};

namespace loom::cpu {

inline constexpr uint32_t kBufferMagic = 0x4c43504bu;

// Throws OpError: UNSUPPORTED for dtype/op combinations this backend does not implement,
// INVALID_ARGUMENT for inconsistent shapes, strides, params or out-of-bounds views.
// With need_buffers == false only types and shapes are checked (supports_op); data stays nullptr.
OpArgs resolve_op(const loom_op& op, bool need_buffers);

}  // namespace loom::cpu
