// The device side of Model's run-time adapters: for each layer and projection an adapter may target,
// every slot's A [n_in, max_rank, n_slots] and B transposed [n_out, max_rank, n_slots] stacked in one buffer (F32:
// the values of F32, F16 and BF16 adapters exactly, as llama.cpp applies them; F16 stacks measured
// 5e-3 apart from llama.cpp's log-probabilities on an F32 adapter, F32 ones 1e-3), and the slots' scales
// (F32 [n_slots]). A slot holds zeros past its adapter's rank and in the projections it leaves alone.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lora/lora_adapter.h"

namespace loom {

struct LoraWeights {
  struct Stack {
    loom_tensor a{}, b{};  // a.buffer == nullptr: the model has no such (unfused) projection there
    int64_t n_in = 0, n_out = 0;
  };
  uint32_t n_slots = 0, max_rank = 0;
  Buffer buffer;
  std::vector<std::array<Stack, kLoraTargets>> layers;
  loom_tensor scales{};
  std::vector<float> scale_values;
  std::vector<std::string> names;  // the adapter in each slot, "" when empty
};

}  // namespace loom
