// DrafterHostModels — the host services' model_* slots (loom/abi.h): drafters open GGUF models that
// the core runs on the engine's backend. Each opened model gets one paged K/V pool shared by its
// sequences (blocks handed out from a free list as sequences grow), so memory follows the tokens
// actually held instead of n_ctx per sequence.
//
// Used from the engine thread only (drafters run inside a step); the slots are still guarded by a
// mutex so a drafter that calls them from its own threads is safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "loom/abi.h"
#include "loom/dtype.h"

namespace loom {

class Backend;

struct DrafterModelOptions {
  int64_t n_ctx = 4096;               // positions per sequence (capped by each model's own context)
  uint64_t capacity_tokens = 65536;   // K/V pool size per opened model, in tokens
  uint32_t block_size = 16;
  loom_dtype kv_dtype = LOOM_DTYPE_F16;
  int64_t max_batch = 512;            // tokens per forward when appending a long prefix
};

class DrafterHostModels {
 public:
  DrafterHostModels(Backend& backend, DrafterModelOptions options);
  ~DrafterHostModels();
  DrafterHostModels(const DrafterHostModels&) = delete;
  DrafterHostModels& operator=(const DrafterHostModels&) = delete;

  // The default host services plus model_* bound to this object. Valid as long as it lives.
  const loom_host_services* services() const { return &services_; }
  size_t n_open_models() const;

 private:
  friend struct HostModelSlots;
  Backend& backend_;
  DrafterModelOptions options_;
  loom_host_services services_{};
  mutable std::mutex mutex_;
  std::vector<loom_host_model_t*> models_;  // owned
};

}  // namespace loom
