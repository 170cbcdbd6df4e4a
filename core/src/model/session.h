// Session — the simplest driver of a Model: one sequence whose K/V sits in contiguous blocks
// 0..n of its own cache. For `loom generate`, `loom chat` and tests; the engine (scheduler + KV
// allocator) drives Model::forward directly for many sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace loom {

struct SessionOptions {
  int64_t n_ctx = 0;          // tokens the session can hold; 0 = min(model n_ctx, 4096)
  uint32_t block_size = 16;
  loom_dtype kv_dtype = LOOM_DTYPE_F16;
  int64_t max_batch = 512;    // prompt tokens per forward (longer prompts are prefilled in chunks)
};

class Session {
 public:
  explicit Session(Model& model, SessionOptions options = {});

  // Append tokens and return the logits of the last one [n_vocab] (valid until the next call).
  // loom::Error "context overflow" when the session would exceed n_ctx; nothing is appended then.
  const std::vector<float>& prefill(std::span<const int32_t> tokens);
  const std::vector<float>& decode(int32_t token);

  int64_t n_past() const { return static_cast<int64_t>(history_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& history() const { return history_; }
  // Forget everything after the first n_keep tokens (their K/V is simply overwritten later; a hybrid
  // model's recurrent state is recomputed from the kept tokens).
  void truncate(int64_t n_keep);
  void reset() { truncate(0); }
  Model& model() const { return model_; }

 private:
  Model& model_;
  int64_t n_ctx_ = 0;
  int64_t max_batch_ = 512;
  KvCache kv_;
  ForwardBatch batch_;
  std::vector<float> logits_;
  std::vector<int32_t> history_;
};

}  // namespace loom
