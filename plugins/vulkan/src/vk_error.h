// Errors inside the Vulkan plugin. The ABI edge turns OpError into status + last_error message.
#pragma once

#include <stdexcept>
#include <string>

#include <vulkan/vulkan.h>

#include "loom/abi.h"

namespace loom::vk {

struct OpError : std::runtime_error {
  loom_status status;
  OpError(loom_status s, const std::string& message) : std::runtime_error(message), status(s) {}
};
[[noreturn]] inline void invalid(const std::string& message) { throw OpError(LOOM_STATUS_INVALID_ARGUMENT, message); }
[[noreturn]] inline void unsupported(const std::string& message) { throw OpError(LOOM_STATUS_UNSUPPORTED, message); }

const char* vk_result_name(VkResult result);

// Throws OUT_OF_MEMORY or DEVICE_ERROR naming the failed call.
inline void vk_check(VkResult result, const char* what) {
  if (result == VK_SUCCESS) return;
  const bool oom = result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY;
  throw OpError(oom ? LOOM_STATUS_OUT_OF_MEMORY : LOOM_STATUS_DEVICE_ERROR,
                std::string("vulkan backend: ") + what + " failed: " + vk_result_name(result));
}

}  // namespace loom::vk
