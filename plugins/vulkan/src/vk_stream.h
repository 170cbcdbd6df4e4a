// An ordered work queue: commands are recorded into a command buffer, submitted at the end of each
// run_ops call (or at synchronize), and tracked by a fence per submission. Host-side work that must
// wait for the device (copying staged results into the caller's memory, freeing staging and
// descriptor pools) runs when a submission is retired. Shaders report data-dependent errors (row
// ids, slots, block tables) through a small host-visible status buffer bound to every dispatch.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "vk_context.h"

namespace loom::vk {

// One storage-buffer binding: a window [offset, offset + range) of a buffer.
struct Binding {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t range = 0;
};

class Stream {
 public:
  explicit Stream(Context& ctx);
  ~Stream();  // waits for outstanding work
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // True when nothing is recorded or in flight (finished submissions are retired on the way).
  bool is_idle();
  // Enqueue copies. Upload bytes are staged immediately; download bytes land in `dst` at retire.
  void upload(const MemoryBlock& dst, uint64_t dst_offset, const void* src, uint64_t size);
  void download(void* dst, const MemoryBlock& src, uint64_t src_offset, uint64_t size);
  void copy(const MemoryBlock& dst, uint64_t dst_offset, const MemoryBlock& src, uint64_t src_offset, uint64_t size);
  // Enqueue one compute dispatch. `bindings` has kBindings entries (buffer NULL = unused); the
  // status binding is filled in here. Group counts are clamped to 65535 (shaders loop past it).
  void dispatch(const std::string& variant, const Binding* bindings, const void* push, uint32_t push_size, uint64_t groups_x,
                uint64_t groups_y);
  // Submit what is recorded (no-op when nothing is).
  void submit();
  // Wait for everything; throws OpError with the first error of that work.
  void synchronize();

 private:
  struct HostRead {
    void* dst;
    const uint8_t* src;
    uint64_t size;
  };
  struct Batch {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> pools;
    uint32_t sets_left = 0;
    std::vector<MemoryBlock> staging;
    std::vector<HostRead> reads;
    uint32_t n_commands = 0;
  };

  Batch& recording();
  void barrier(VkCommandBuffer cmd, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access);
  void retire(Batch& batch);
  void release(Batch& batch);
  void check_status();

  Context& ctx_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> current_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  MemoryBlock status_;
  loom_status error_status_ = LOOM_STATUS_OK;
  std::string error_;
};

}  // namespace loom::vk
