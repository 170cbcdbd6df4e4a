#include "vk_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace loom::vk {
namespace {

constexpr uint32_t kSetsPerPool = 128;

// Messages for the shaders' error codes (common.glsl); %v is the detail value.
std::string status_message(uint32_t code, uint32_t value) {
  const std::string v = std::to_string(int32_t(value));
  switch (code) {
    case 1: return "GET_ROWS: row id " + v + " is outside the table";
    case 2: return "STORE_KV: slot " + v + " is outside the cache";
    case 3: return "PAGED_ATTENTION: sequence " + v + ": its query rows are outside the batch";
    case 4: return "PAGED_ATTENTION: sequence " + v + ": context length is shorter than its query rows";
    case 5: return "PAGED_ATTENTION: sequence " + v + ": context length needs more blocks than its table holds";
    case 6: return "PAGED_ATTENTION: block " + v + " is outside the cache";
    case 7: return "SSM_CONV / GATED_DELTA_NET: sequence " + v + ": its rows are outside the batch";
    case 8: return "SSM_CONV / GATED_DELTA_NET: state slot " + v + " is outside the pool";
    case 9: return "SSM_CONV / GATED_DELTA_NET: two sequences share state slot " + v;
    case 10: return "MOE_MATMUL: expert id " + v + " is outside the expert tensor";
    case 11:
      return "PAGED_ATTENTION: a query row sees " + v + " keys, more than this device runs in one shader (lavapipe ends a "
             "shader's loops after 65535 iterations; use a shorter context or another backend)";
    case 12: return "LORA: src3 (slots) holds " + v + ", not -1 or a slot of the adapter stacks";
    default: return "vulkan backend: shader reported error code " + std::to_string(code);
  }
}

}  // namespace

Stream::Stream(Context& ctx) : ctx_(ctx) {
  VkCommandPoolCreateInfo info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  info.queueFamilyIndex = ctx_.queue_family();
  vk_check(vkCreateCommandPool(ctx_.device(), &info, nullptr, &pool_), "vkCreateCommandPool");
  try {
    status_ = ctx_.allocate_host(16);
    if (status_.mapped == nullptr) throw OpError(LOOM_STATUS_DEVICE_ERROR, "vulkan backend: status buffer is not mappable");
    std::memset(status_.mapped, 0, 16);
  } catch (...) {
    ctx_.free(status_);
    vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
    throw;
  }
}

Stream::~Stream() {
  try {
    synchronize();
  } catch (...) {
    // Destruction cannot report; the work's resources are still released below.
  }
  if (current_) release(*current_);
  for (auto& b : in_flight_) release(*b);
  ctx_.free(status_);
  vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
}

Stream::Batch& Stream::recording() {
  if (current_) return *current_;
  auto batch = std::make_unique<Batch>();
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  vk_check(vkAllocateCommandBuffers(ctx_.device(), &alloc, &batch->cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  const VkResult r = vkBeginCommandBuffer(batch->cmd, &begin);
  if (r != VK_SUCCESS) {
    vkFreeCommandBuffers(ctx_.device(), pool_, 1, &batch->cmd);
    vk_check(r, "vkBeginCommandBuffer");
  }
  // Orders this submission after everything submitted earlier on the queue.
  barrier(batch->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  current_ = std::move(batch);
  return *current_;
}

void Stream::barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0, 1, &b, 0,
                       nullptr, 0, nullptr);
}

bool Stream::is_idle() {
  while (!in_flight_.empty() && vkGetFenceStatus(ctx_.device(), in_flight_.front()->fence) == VK_SUCCESS) {
    retire(*in_flight_.front());
    in_flight_.pop_front();
  }
  return (!current_ || current_->n_commands == 0) && in_flight_.empty();
}

void Stream::upload(const MemoryBlock& dst, uint64_t dst_offset, const void* src, uint64_t size) {
  if (size == 0) return;
  Batch& b = recording();
  b.staging.push_back(ctx_.allocate_host(size));
  std::memcpy(b.staging.back().mapped, src, size);
  const VkBufferCopy region{0, dst_offset, size};
  vkCmdCopyBuffer(b.cmd, b.staging.back().buffer, dst.buffer, 1, &region);
  barrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  b.n_commands++;
}

void Stream::download(void* dst, const MemoryBlock& src, uint64_t src_offset, uint64_t size) {
  if (size == 0) return;
  Batch& b = recording();
  b.staging.push_back(ctx_.allocate_host(size));
  const VkBufferCopy region{src_offset, 0, size};
  vkCmdCopyBuffer(b.cmd, src.buffer, b.staging.back().buffer, 1, &region);
  barrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  b.reads.push_back({dst, b.staging.back().mapped, size});
  b.n_commands++;
}

void Stream::copy(const MemoryBlock& dst, uint64_t dst_offset, const MemoryBlock& src, uint64_t src_offset, uint64_t size) {
  if (size == 0) return;
  Batch& b = recording();
  const auto full = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const auto stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  const bool overlap = dst.buffer == src.buffer && dst_offset < src_offset + size && src_offset < dst_offset + size;
  if (overlap) {
    // vkCmdCopyBuffer forbids overlapping regions: go through a temporary buffer.
    b.staging.push_back(ctx_.allocate_host(size));
    const VkBufferCopy in{src_offset, 0, size}, out{0, dst_offset, size};
    vkCmdCopyBuffer(b.cmd, src.buffer, b.staging.back().buffer, 1, &in);
    barrier(b.cmd, stages, full);
    vkCmdCopyBuffer(b.cmd, b.staging.back().buffer, dst.buffer, 1, &out);
  } else {
    const VkBufferCopy region{src_offset, dst_offset, size};
    vkCmdCopyBuffer(b.cmd, src.buffer, dst.buffer, 1, &region);
  }
  barrier(b.cmd, stages, full);
  b.n_commands++;
}

void Stream::dispatch(const std::string& variant, const Binding* bindings, const void* push, uint32_t push_size,
                      uint64_t groups_x, uint64_t groups_y) {
  if (groups_x == 0 || groups_y == 0) return;
  const VkPipeline pipeline = ctx_.pipeline(variant);
  Batch& b = recording();
  if (b.sets_left == 0) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kBindings};
    VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    info.maxSets = kSetsPerPool;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    vk_check(vkCreateDescriptorPool(ctx_.device(), &info, nullptr, &pool), "vkCreateDescriptorPool");
    b.pools.push_back(pool);
    b.sets_left = kSetsPerPool;
  }
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorPool = b.pools.back();
  alloc.descriptorSetCount = 1;
  const VkDescriptorSetLayout layout = ctx_.set_layout();
  alloc.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  vk_check(vkAllocateDescriptorSets(ctx_.device(), &alloc, &set), "vkAllocateDescriptorSets");
  b.sets_left--;

  VkDescriptorBufferInfo infos[kBindings];
  VkWriteDescriptorSet writes[kBindings];
  uint32_t n_writes = 0;
  for (uint32_t i = 0; i < kBindings; i++) {
    Binding bind = bindings[i];
    if (i == kStatusBinding) bind = {status_.buffer, 0, VK_WHOLE_SIZE};
    if (bind.buffer == VK_NULL_HANDLE) continue;
    infos[n_writes] = {bind.buffer, bind.offset, bind.range};
    writes[n_writes] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[n_writes].dstSet = set;
    writes[n_writes].dstBinding = i;
    writes[n_writes].descriptorCount = 1;
    writes[n_writes].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[n_writes].pBufferInfo = &infos[n_writes];
    n_writes++;
  }
  vkUpdateDescriptorSets(ctx_.device(), n_writes, writes, 0, nullptr);
  vkCmdBindPipeline(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdBindDescriptorSets(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ctx_.pipeline_layout(), 0, 1, &set, 0, nullptr);
  if (push_size > 0) vkCmdPushConstants(b.cmd, ctx_.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  vkCmdDispatch(b.cmd, uint32_t(std::min<uint64_t>(groups_x, 65535)), uint32_t(std::min<uint64_t>(groups_y, 65535)), 1);
  barrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  b.n_commands++;
}

void Stream::submit() {
  if (!current_) return;
  if (current_->n_commands == 0) {
    release(*current_);
    current_.reset();
    return;
  }
  Batch& b = *current_;
  // Results become visible to the host once the fence signals.
  barrier(b.cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  vk_check(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk_check(vkCreateFence(ctx_.device(), &fence_info, nullptr, &b.fence), "vkCreateFence");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &b.cmd;
  VkResult r;
  {
    std::lock_guard<std::mutex> lock(ctx_.queue_mutex());
    r = vkQueueSubmit(ctx_.queue(), 1, &submit, b.fence);
  }
  if (r != VK_SUCCESS) {
    release(b);
    current_.reset();
    vk_check(r, "vkQueueSubmit");
  }
  in_flight_.push_back(std::move(current_));
}

void Stream::synchronize() {
  submit();
  while (!in_flight_.empty()) {
    Batch& b = *in_flight_.front();
    const VkResult r = vkWaitForFences(ctx_.device(), 1, &b.fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) {
      error_status_ = LOOM_STATUS_DEVICE_ERROR;
      error_ = std::string("vulkan backend: vkWaitForFences failed: ") + vk_result_name(r);
      release(b);
    } else {
      retire(b);
    }
    in_flight_.pop_front();
  }
  if (error_status_ != LOOM_STATUS_OK) {
    const loom_status st = error_status_;
    error_status_ = LOOM_STATUS_OK;
    throw OpError(st, std::exchange(error_, std::string()));
  }
}

void Stream::retire(Batch& batch) {
  for (const HostRead& read : batch.reads) std::memcpy(read.dst, read.src, read.size);
  check_status();
  release(batch);
}

void Stream::check_status() {
  auto* words = reinterpret_cast<volatile uint32_t*>(status_.mapped);
  if (words[0] == 0) return;
  if (error_status_ == LOOM_STATUS_OK) {
    error_status_ = LOOM_STATUS_INVALID_ARGUMENT;
    error_ = status_message(words[0], words[1]);
  }
  words[1] = 0;
  words[0] = 0;
}

void Stream::release(Batch& batch) {
  for (MemoryBlock& block : batch.staging) ctx_.free(block);
  batch.staging.clear();
  for (VkDescriptorPool pool : batch.pools) vkDestroyDescriptorPool(ctx_.device(), pool, nullptr);
  batch.pools.clear();
  if (batch.fence) vkDestroyFence(ctx_.device(), batch.fence, nullptr);
  batch.fence = VK_NULL_HANDLE;
  if (batch.cmd) vkFreeCommandBuffers(ctx_.device(), pool_, 1, &batch.cmd);
  batch.cmd = VK_NULL_HANDLE;
}

}  // namespace loom::vk
