// The objects behind the opaque ABI handles.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "candidates.h"
#include "loom/sampler.h"
#include "rng.h"
#include "sampler_params.h"

struct loom_sampler {
  const loom_host_services* host = nullptr;
  loom::samplers::SamplerConfig config;

  // Scratch buffers handed to sample() calls; a call takes one (or makes one the first time) and
  // puts it back, so concurrent calls never share and steady state allocates nothing.
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<loom::samplers::Scratch>> pool;

  std::mutex error_mutex;
  std::string last_error;  // valid until the next failing call on this instance
};

struct loom_sampler_state {
  explicit loom_sampler_state(uint64_t seed) : rng(seed) {}
  loom::samplers::Rng rng;
  // Mirostat's running target surprise (bits), 2 * tau until the first draw.
  bool mirostat_started = false;
  float mirostat_mu = 0.0f;
};

namespace loom::samplers {

// Samples every row with one scratch from the instance's pool. Throws SamplerError.
void sample_rows(loom_sampler& sampler, loom_sample_row* rows, uint32_t n_rows, uint32_t n_vocab);

}  // namespace loom::samplers
