#include "model/generation.h"

#include <chrono>
#include <random>

#include "common/error.h"
#include "engine/sampler_handle.h"
#include "model/default_model.h"
#include "tokenizer/streaming_decoder.h"

namespace loom {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

LoadedModel load_model(const Config& config) {
  const auto start = Clock::now();
  LoadedModel loaded;
  loaded.path = config.model.path.empty() ? default_model_path() : std::filesystem::path(config.model.path);
  loaded.file = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(loaded.path));
  loaded.tokenizer = Tokenizer::from_gguf(*loaded.file);
  loaded.backend = Backend::create(find_backend_plugin(config, config.backend.name), backend_config_json(config));
  loaded.model = Model::load(*loaded.file, *loaded.backend, ModelOptions{config.model.n_ctx});
  loaded.load_seconds = seconds_since(start);
  return loaded;
}

TokenSampler::TokenSampler(const Config& config, int64_t seed) {
  handle_ = std::make_unique<SamplerHandle>(find_plugin(config, LOOM_PLUGIN_KIND_SAMPLER, config.sampler.plugin),
                                            config.sampler);
  params_ = handle_->defaults();
  const uint64_t s = seed >= 0 ? static_cast<uint64_t>(seed) : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  state_ = handle_->create_state(s);
  rows_.resize(1);
}

TokenSampler::~TokenSampler() {
  if (state_ != nullptr) handle_->destroy_state(state_);
}

void TokenSampler::validate() const { handle_->validate(params_); }

int32_t TokenSampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  loom_sample_row& row = rows_[0];
  row = loom_sample_row{};
  row.struct_size = sizeof(loom_sample_row);
  row.params = &params_;
  row.state = state_;
  row.history = history.data();
  row.n_history = static_cast<uint32_t>(history.size());
  row.logits = logits.data();
  handle_->sample(rows_, static_cast<uint32_t>(logits.size()));
  return rows_[0].token;
}

GenerationStats generate_tokens(Session& session, TokenSampler& sampler, const Tokenizer& tokenizer,
                                std::span<const int32_t> prompt, int64_t max_tokens,
                                const std::function<void(const std::string&)>& on_text,
                                std::vector<int32_t>* generated) {
  GenerationStats stats;
  stats.n_prompt = static_cast<int64_t>(prompt.size());
  StreamingDecoder decoder(tokenizer);
  const auto start = Clock::now();
  const std::vector<float>* logits = &session.prefill(prompt);
  stats.prefill_seconds = seconds_since(start);
  auto first_token = Clock::now();
  for (int64_t i = 0; i < max_tokens; ++i) {
    const int32_t token = sampler.sample(*logits, session.history());
    if (i == 0) {
      first_token = Clock::now();
      stats.ttft_seconds = seconds_since(start);
    }
    ++stats.n_generated;
    if (tokenizer.is_end_of_generation(token)) {
      stats.stopped = true;
      break;
    }
    if (generated != nullptr) generated->push_back(token);
    if (const std::string text = decoder.push(token); !text.empty()) on_text(text);
    if (i + 1 == max_tokens || session.n_past() >= session.n_ctx()) break;
    logits = &session.decode(token);
    ++stats.n_decode;
  }
  stats.decode_seconds = seconds_since(first_token);
  if (const std::string rest = decoder.flush(); !rest.empty()) on_text(rest);
  return stats;
}

}  // namespace loom
