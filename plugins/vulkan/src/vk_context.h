// One Vulkan device: instance, physical device choice, logical device and queue, memory, and the
// lazily built compute pipelines (one per embedded shader variant, sharing one pipeline layout).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <vulkan/vulkan.h>

#include "vk_error.h"

namespace loom::vk {

// Storage-buffer bindings per dispatch: 0..5 operands, 7 the stream's status buffer.
inline constexpr uint32_t kBindings = 8;
inline constexpr uint32_t kStatusBinding = 7;
inline constexpr uint32_t kPushBytes = 128;

// Names of the physical devices, in vkEnumeratePhysicalDevices order. On failure (no loader, no
// driver, no device) returns an empty list and writes why into `reason`.
std::vector<std::string> list_devices(std::string* reason);

// A VkBuffer with its own memory. `mapped` is non-null when the memory is host-visible.
struct MemoryBlock {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;
  uint64_t size = 0;  // bytes of the VkBuffer (the requested size rounded up)
};

// How MATMUL computes few-token products (see matvec.comp).
enum class MatvecLayout {
  automatic,     // invocation on CPU devices, subgroup where subgroup arithmetic is reported, else workgroup
  invocation,    // one output row per invocation (matvec.comp)
  subgroup,      // one output row per subgroup, subgroupAdd reduction (matvec.comp, ROW_PER_SUBGROUP);
                 // workgroup where subgroup arithmetic is not available
  workgroup,     // one output row per workgroup, shared-memory reduction (matmul.comp)
};

struct ContextOptions {
  int64_t device_index = -1;  // -1: first device (or the first matching device_name)
  std::string device_name;    // substring match, case-sensitive
  bool allow_subgroups = true;
  bool allow_host_visible = true;  // direct mapped access to HOST_VISIBLE|DEVICE_LOCAL memory
  MatvecLayout matvec = MatvecLayout::automatic;
};

class Context {
 public:
  explicit Context(const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Device memory for loom buffers: host-visible when the device offers DEVICE_LOCAL|HOST_VISIBLE.
  MemoryBlock allocate_device(uint64_t size);
  // Host-visible, coherent memory for staging and small constant tables.
  MemoryBlock allocate_host(uint64_t size);
  void free(MemoryBlock& block);

  // The compute pipeline of an embedded variant, built on first use. Thread-safe.
  VkPipeline pipeline(const std::string& variant);
  // A persistent host-visible table (e.g. RoPE inverse frequencies), built once per key. Thread-safe.
  const MemoryBlock& constant_table(const std::string& key, const std::vector<uint8_t>& bytes);

  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  std::mutex& queue_mutex() { return queue_mutex_; }
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  const std::string& name() const { return name_; }
  bool use_subgroups() const { return use_subgroups_; }
  // Invocations per subgroup as reported by the device (lavapipe: 8, NVIDIA: 32, AMD: 64).
  uint32_t subgroup_size() const { return subgroup_size_; }
  bool has_float64() const { return has_float64_; }
  // The few-token MATMUL layout in effect (never `automatic`).
  MatvecLayout matvec_layout() const { return matvec_; }
  uint64_t memory_total() const { return memory_total_; }
  uint64_t max_binding_range() const { return properties_.limits.maxStorageBufferRange; }
  // Mesa's CPU device (lavapipe), whose shader loops stop after 65535 iterations in all.
  bool is_llvmpipe() const { return std::string_view(properties_.deviceName).find("llvmpipe") != std::string_view::npos; }
  uint64_t binding_alignment() const { return properties_.limits.minStorageBufferOffsetAlignment; }

 private:
  MemoryBlock allocate(uint64_t size, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred);
  void destroy_all();

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceProperties properties_{};
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  std::string name_;
  bool use_subgroups_ = false;
  uint32_t subgroup_size_ = 1;
  MatvecLayout matvec_ = MatvecLayout::workgroup;
  bool has_float64_ = false;
  bool device_host_visible_ = false;
  uint64_t memory_total_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  std::mutex queue_mutex_;
  std::mutex pipeline_mutex_;
  std::map<std::string, std::pair<VkShaderModule, VkPipeline>> pipelines_;
  std::map<std::string, MemoryBlock> tables_;
};

}  // namespace loom::vk
