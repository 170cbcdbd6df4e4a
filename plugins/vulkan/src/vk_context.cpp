#include "vk_context.h"

#include <algorithm>
#include <cstring>

#include "spirv_registry.h"

namespace loom::vk {

const char* vk_result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver / ICD found)";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult error";
  }
}

namespace {

VkResult create_instance(VkInstance* out) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "loom";
  app.pEngineName = "loom";
  app.apiVersion = VK_API_VERSION_1_1;  // subgroup properties and vkGetPhysicalDeviceProperties2 are core
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  return vkCreateInstance(&info, nullptr, out);
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkPhysicalDevice> out(n);
  if (vkEnumeratePhysicalDevices(instance, &n, out.data()) != VK_SUCCESS) return {};
  out.resize(n);
  return out;
}

// A queue family with compute; prefer one without graphics (a dedicated compute queue).
int64_t compute_queue_family(VkPhysicalDevice device) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &n, families.data());
  int64_t best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
  }
  return best;
}

}  // namespace

std::vector<std::string> list_devices(std::string* reason) {
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = create_instance(&instance);
  if (r != VK_SUCCESS) {
    if (reason) *reason = std::string("vkCreateInstance failed: ") + vk_result_name(r);
    return {};
  }
  std::vector<std::string> names;
  for (VkPhysicalDevice d : physical_devices(instance)) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d, &p);
    names.emplace_back(p.deviceName);
  }
  vkDestroyInstance(instance, nullptr);
  if (names.empty() && reason) *reason = "the Vulkan loader found no physical device";
  return names;
}

Context::Context(const ContextOptions& options) {
  try {
    vk_check(create_instance(&instance_), "vkCreateInstance");
    const auto devices = physical_devices(instance_);
    if (devices.empty()) throw OpError(LOOM_STATUS_NOT_FOUND, "vulkan backend: no Vulkan physical device");
    int64_t chosen = -1;
    for (size_t i = 0; i < devices.size(); i++) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devices[i], &p);
      if (options.device_index >= 0 && int64_t(i) != options.device_index) continue;
      if (!options.device_name.empty() && std::string(p.deviceName).find(options.device_name) == std::string::npos) continue;
      chosen = int64_t(i);
      break;
    }
    if (chosen < 0)
      throw OpError(LOOM_STATUS_NOT_FOUND, "vulkan backend: no device matches config (device " + std::to_string(options.device_index) +
                                               ", device_name \"" + options.device_name + "\"); " + std::to_string(devices.size()) +
                                               " device(s) present");
    physical_ = devices[size_t(chosen)];
    vkGetPhysicalDeviceProperties(physical_, &properties_);
    vkGetPhysicalDeviceMemoryProperties(physical_, &memory_properties_);
    name_ = properties_.deviceName;
    const int64_t family = compute_queue_family(physical_);
    if (family < 0) unsupported("vulkan backend: device " + name_ + " has no compute queue");
    queue_family_ = uint32_t(family);

    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props2.pNext = &subgroup;
    vkGetPhysicalDeviceProperties2(physical_, &props2);
    const VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    use_subgroups_ = options.allow_subgroups && (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                     (subgroup.supportedOperations & needed) == needed;
    subgroup_size_ = std::max<uint32_t>(1, subgroup.subgroupSize);
    matvec_ = options.matvec;
    if (matvec_ == MatvecLayout::automatic) {
      // On a CPU device a subgroup is one SIMD register and a lane-varying load costs a scalar load
      // per lane, so rows per invocation (uniform x reads) beat rows per subgroup there.
      if (properties_.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) matvec_ = MatvecLayout::invocation;
      else matvec_ = use_subgroups_ ? MatvecLayout::subgroup : MatvecLayout::workgroup;
    }
    if (matvec_ == MatvecLayout::subgroup && !use_subgroups_) matvec_ = MatvecLayout::workgroup;
    VkPhysicalDeviceFeatures features{};
    vkGetPhysicalDeviceFeatures(physical_, &features);
    has_float64_ = features.shaderFloat64 == VK_TRUE;

    for (uint32_t i = 0; i < memory_properties_.memoryHeapCount; i++)
      if (memory_properties_.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) memory_total_ += memory_properties_.memoryHeaps[i].size;
    const VkMemoryPropertyFlags fast = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < memory_properties_.memoryTypeCount; i++)
      if ((memory_properties_.memoryTypes[i].propertyFlags & fast) == fast) device_host_visible_ = options.allow_host_visible;

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue_info.queueFamilyIndex = queue_family_;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;
    VkPhysicalDeviceFeatures enabled{};
    enabled.shaderFloat64 = features.shaderFloat64;
    VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    device_info.queueCreateInfoCount = 1;
    device_info.pQueueCreateInfos = &queue_info;
    device_info.pEnabledFeatures = &enabled;
    vk_check(vkCreateDevice(physical_, &device_info, nullptr, &device_), "vkCreateDevice");
    vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

    VkDescriptorSetLayoutBinding bindings[kBindings];
    for (uint32_t i = 0; i < kBindings; i++) {
      bindings[i] = {};
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    set_info.bindingCount = kBindings;
    set_info.pBindings = bindings;
    vk_check(vkCreateDescriptorSetLayout(device_, &set_info, nullptr, &set_layout_), "vkCreateDescriptorSetLayout");
    VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
    VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout_;
    layout_info.pushConstantRangeCount = 1;
    layout_info.pPushConstantRanges = &push;
    vk_check(vkCreatePipelineLayout(device_, &layout_info, nullptr, &pipeline_layout_), "vkCreatePipelineLayout");
  } catch (...) {
    destroy_all();
    throw;
  }
}

Context::~Context() { destroy_all(); }

void Context::destroy_all() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    for (auto& [name, entry] : pipelines_) {
      vkDestroyPipeline(device_, entry.second, nullptr);
      vkDestroyShaderModule(device_, entry.first, nullptr);
    }
    pipelines_.clear();
    for (auto& [key, block] : tables_) free(block);
    tables_.clear();
    if (pipeline_layout_) vkDestroyPipelineLayout(device_, pipeline_layout_, nullptr);
    if (set_layout_) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

MemoryBlock Context::allocate(uint64_t size, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) {
  MemoryBlock block;
  // Rounded up so that a binding's range, rounded up to whole words, never passes the buffer's end.
  block.size = (std::max<uint64_t>(size, 1) + 255) & ~uint64_t(255);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = block.size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vkCreateBuffer(device_, &info, nullptr, &block.buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, block.buffer, &req);
  int64_t type = -1;
  for (const VkMemoryPropertyFlags want : {VkMemoryPropertyFlags(required | preferred), required}) {
    for (uint32_t i = 0; i < memory_properties_.memoryTypeCount && type < 0; i++)
      if ((req.memoryTypeBits & (1u << i)) && (memory_properties_.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type >= 0) break;
  }
  if (type < 0) {
    vkDestroyBuffer(device_, block.buffer, nullptr);
    unsupported("vulkan backend: no memory type with the required properties");
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = uint32_t(type);
  const VkResult r = vkAllocateMemory(device_, &alloc, nullptr, &block.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, block.buffer, nullptr);
    vk_check(r, "vkAllocateMemory");
  }
  vkBindBufferMemory(device_, block.buffer, block.memory, 0);
  const VkMemoryPropertyFlags flags = memory_properties_.memoryTypes[type].propertyFlags;
  const VkMemoryPropertyFlags mappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if ((flags & mappable) == mappable && (required & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT || device_host_visible_)) {
    void* p = nullptr;
    if (vkMapMemory(device_, block.memory, 0, VK_WHOLE_SIZE, 0, &p) == VK_SUCCESS) block.mapped = static_cast<uint8_t*>(p);
  }
  return block;
}

MemoryBlock Context::allocate_device(uint64_t size) {
  const VkMemoryPropertyFlags host = device_host_visible_ ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT : 0;
  return allocate(size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host);
}

MemoryBlock Context::allocate_host(uint64_t size) {
  return allocate(size, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
}

void Context::free(MemoryBlock& block) {
  if (block.mapped) vkUnmapMemory(device_, block.memory);
  if (block.buffer) vkDestroyBuffer(device_, block.buffer, nullptr);
  if (block.memory) vkFreeMemory(device_, block.memory, nullptr);
  block = MemoryBlock{};
}

VkPipeline Context::pipeline(const std::string& variant) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (auto it = pipelines_.find(variant); it != pipelines_.end()) return it->second.second;
  const SpirvBlob* blob = nullptr;
  for (size_t i = 0; i < kSpirvBlobCount; i++)
    if (variant == kSpirvBlobs[i].name) blob = &kSpirvBlobs[i];
  if (blob == nullptr) throw OpError(LOOM_STATUS_INTERNAL, "vulkan backend: no embedded shader " + variant);
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = blob->n_words * 4;
  module_info.pCode = blob->words;
  VkShaderModule module = VK_NULL_HANDLE;
  vk_check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.layout = pipeline_layout_;
  VkPipeline pipeline = VK_NULL_HANDLE;
  const VkResult r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &pipeline);
  if (r != VK_SUCCESS) {
    vkDestroyShaderModule(device_, module, nullptr);
    vk_check(r, ("vkCreateComputePipelines(" + variant + ")").c_str());
  }
  pipelines_[variant] = {module, pipeline};
  return pipeline;
}

const MemoryBlock& Context::constant_table(const std::string& key, const std::vector<uint8_t>& bytes) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  MemoryBlock block = allocate_host(bytes.size());
  if (block.mapped == nullptr) {
    free(block);
    throw OpError(LOOM_STATUS_DEVICE_ERROR, "vulkan backend: could not map a host-visible table");
  }
  std::memcpy(block.mapped, bytes.data(), bytes.size());
  return tables_[key] = block;
}

}  // namespace loom::vk
