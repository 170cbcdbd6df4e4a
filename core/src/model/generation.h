// What `loom generate` and `loom chat` share: opening a model with its tokenizer on a backend, a
// sampler for one sequence, and the prefill-then-decode loop with streaming text and timings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "gguf/gguf_file.h"
#include "loom/sampler.h"
#include "model/model.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"

namespace loom {

class SamplerHandle;

struct LoadedModel {
  std::filesystem::path path;
  std::unique_ptr<gguf::GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  double load_seconds = 0.0;
};

// config.model.path (or the default model when empty) on config.backend. loom::Error on failure.
LoadedModel load_model(const Config& config);

// Sampling for one sequence through the sampler plugin named by config.sampler.plugin.
class TokenSampler {
 public:
  // seed < 0: a random seed. The params start from the [sampler] settings.
  TokenSampler(const Config& config, int64_t seed);
  ~TokenSampler();
  TokenSampler(const TokenSampler&) = delete;
  TokenSampler& operator=(const TokenSampler&) = delete;

  loom_sampling_params& params() { return params_; }
  void validate() const;
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  std::unique_ptr<SamplerHandle> handle_;
  loom_sampler_state_t* state_ = nullptr;
  loom_sampling_params params_{};
  std::vector<loom_sample_row> rows_;
};

struct GenerationStats {
  int64_t n_prompt = 0;     // tokens prefilled
  int64_t n_generated = 0;  // tokens sampled (the end-of-generation token included)
  double prefill_seconds = 0.0;
  double ttft_seconds = 0.0;    // from the start of prefill to the first sampled token
  double decode_seconds = 0.0;  // the decode forwards after the first token
  int64_t n_decode = 0;         // decode forwards timed in decode_seconds
  bool stopped = false;         // ended on an end-of-generation token
};

// Prefill `prompt` into the session, then sample up to max_tokens, streaming printable text to
// on_text. The end-of-generation token is not decoded into the session nor printed.
GenerationStats generate_tokens(Session& session, TokenSampler& sampler, const Tokenizer& tokenizer,
                                std::span<const int32_t> prompt, int64_t max_tokens,
                                const std::function<void(const std::string&)>& on_text,
                                std::vector<int32_t>* generated = nullptr);

}  // namespace loom
