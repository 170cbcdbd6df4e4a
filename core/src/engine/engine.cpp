#include "engine/engine.h"

#include <random>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/drafter_plugin.h"
#include "engine/kv_plan.h"
#include "engine/model_sampling.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "plugin/plugin_registry.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_encoder.h"

namespace loom {
namespace {

// [engine] deterministic holds only where every op gives a token the same bits in any batch: the
// backend says so (ABI 1.18), no drafter, and the model has no recurrent layers, whose chunked
// prefill sums a prompt in an order that depends on where the scheduler cut it.
void check_deterministic_mode(const Config& config, const Backend& backend, const ModelInfo& info) {
  if (!config.engine.deterministic) return;
  if (!backend.caps().batch_invariant)
    throw Error("[engine] deterministic: backend '" + backend.name() + "' (" + backend.caps().device_name +
                ") does not give batch-invariant results (caps.batch_invariant, ABI 1.18); the cpu backend's fast kernels do");
  // The drafts a step verifies are cut to the token budget the batch leaves, and the rejection
  // sampler's draws follow the drafts: the output distribution stays exact, the seeded path does not.
  if (config.drafter.kind != "none")
    throw Error("[engine] deterministic: [drafter] kind = '" + config.drafter.kind +
                "' drafts as many tokens as each step's budget leaves, so a seeded request's draws depend on its batch; "
                "set [drafter] kind = \"none\"");
  if (info.is_hybrid())
    throw Error("[engine] deterministic: '" + info.arch_name +
                "' has recurrent layers, whose prefill chunks sum in an order that depends on the batch; serve it without deterministic mode");
}

}  // namespace

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
    case FinishReason::grammar_dead_end: return "grammar_dead_end";
    case FinishReason::none: return "none";
  }
  return "none";
}

Engine::Engine(const Config& config, const std::filesystem::path& model_path, LoadProgress on_load_progress)
    : config_(config) {
  gguf_ = std::make_unique<gguf::GgufFile>(hf::open_model_file(model_path));
  tokenizer_ = Tokenizer::from_gguf(*gguf_);
  auto remember = [this](std::shared_ptr<LoadedPlugin> plugin) {
    const loom_plugin_desc& d = plugin->desc();
    info_.plugins.push_back({plugin_kind_name(d.kind), plugin->name(), d.version ? d.version : ""});
    return plugin;
  };
  backend_ = Backend::create(remember(find_backend_plugin(config, config.backend.name)), backend_config_json(config));
  model_ = Model::load(*gguf_, *backend_, ModelOptions{config.model.n_ctx, std::move(on_load_progress)});
  check_deterministic_mode(config, *backend_, model_->info());
  // The backend holds its own copy of every weight now: the file's pages need not stay resident.
  gguf_->release_tensor_pages();
  load_loras(config);  // engine_lora.cpp

  const loom_dtype kv_dtype = kv_dtype_from_name(config.kv.dtype);
  const uint64_t per_token = kv_bytes_per_token(model_->info(), kv_dtype);
  uint64_t budget = static_cast<uint64_t>(config.kv.memory_bytes);
  if (config.kv.memory_fraction > 0 && backend_->caps().memory_free > 0) {
    budget = static_cast<uint64_t>(config.kv.memory_fraction * static_cast<double>(backend_->caps().memory_free));
  }
  const auto block_size = static_cast<uint32_t>(config.kv.block_size);
  // Sliding-window layers keep each running sequence's window in a ring (kv_cache.h), sized so one
  // sequence runs [kv] window_chunk_tokens rows per step: prompt chunks of that many less the drafts.
  // An image's rows go in one chunk, so a projector's largest image widens the rings where it needs to.
  Config sized = config;
  const int64_t image_rows = largest_image_rows(config, model_path);
  const int64_t image_chunk = image_rows + (config.drafter.kind != "none" ? config.drafter.k : 0);
  if (image_rows > 0 && image_chunk > sized.kv.window_chunk_tokens) sized.kv.window_chunk_tokens = image_chunk;
  const KvPoolRequest request = kv_pool_request(sized, model_->info(), static_cast<uint64_t>(model_->n_ctx()), budget);
  const KvPoolLayout layout = plan_kv_pool(kv_layer_groups(model_->info(), kv_dtype), request);
  const uint64_t n_blocks = layout.n_blocks;
  fit_context_to_pool(config, n_blocks * block_size, budget);
  // A hybrid model's recurrent layers keep one state per running sequence, beside the KV blocks, and
  // checkpoints of the state at the end of cached prompts, which prefix reuse resumes from. Window
  // rings are the same kind of per-sequence state.
  const bool is_hybrid = model_->info().is_hybrid();
  uint32_t n_state_slots = 0, n_checkpoints = 0;
  if (is_hybrid) {
    n_state_slots = static_cast<uint32_t>(config.scheduler.max_num_seqs);
    n_checkpoints = config.kv.prefix_caching ? static_cast<uint32_t>(config.kv.state_checkpoints) : 0u;
  } else if (layout.ring_blocks > 0) {
    n_state_slots = layout.n_rings;
    n_checkpoints = layout.n_ring_checkpoints;
  }
  kv_ = std::make_unique<KvManager>(remember(find_plugin(config, LOOM_PLUGIN_KIND_KV, config.kv.allocator)),
                                    static_cast<uint32_t>(n_blocks), block_size, config.kv.prefix_caching, n_state_slots,
                                    n_checkpoints);
  // Refused here rather than at a request's admission (KvManager::create refuses it there too): an adapter's
  // sequences must not reuse the base model's cached blocks.
  if (model_->lora_slots() > 0 && config.kv.prefix_caching && !kv_->keyed_prefix_cache())
    throw Error("KV allocator '" + config.kv.allocator + "' cannot key its prefix cache by adapter (ABI 1.16): turn kv.prefix_caching off to serve LoRA adapters with it");
  window_rows_ = layout.ring_blocks > 0 ? std::min<uint32_t>(static_cast<uint32_t>(sized.kv.window_chunk_tokens),
                                                              layout.ring_blocks * block_size + 1 - model_->info().sliding_window)
                                        : 0;
  kv_cache_ = model_->create_kv_cache(static_cast<uint32_t>(n_blocks), block_size, kv_dtype,
                                      std::max(n_state_slots + kv_->n_state_checkpoints(), 1u), layout.ring_blocks);
  sampler_ = std::make_unique<SamplerHandle>(remember(find_plugin(config, LOOM_PLUGIN_KIND_SAMPLER, config.sampler.plugin)),
                                             with_model_sampling(config.sampler, config.given, *gguf_));
  scheduler_ = std::make_unique<Scheduler>(config.scheduler, *kv_);

  info_.model_path = model_path.string();
  info_.model_name = model_->info().name.empty() ? model_path.stem().string() : model_->info().name;
  info_.backend_name = backend_->name();
  info_.device_name = backend_->caps().device_name;
  info_.kv_blocks = static_cast<uint32_t>(n_blocks);
  info_.kv_block_size = block_size;
  info_.kv_bytes_per_token = per_token;
  info_.kv_dtype = config.kv.dtype;
  info_.kv_groups = kv_layer_groups(model_->info(), kv_dtype);
  info_.kv_bytes = kv_cache_.bytes();
  info_.kv_layout = layout;
  info_.kv_window_rings = layout.n_rings;
  info_.kv_window_ring_tokens = layout.ring_blocks * block_size;
  info_.kv_capacity_tokens = n_blocks * block_size;
  info_.max_num_seqs = static_cast<uint32_t>(config.scheduler.max_num_seqs);
  info_.n_ctx = model_->n_ctx();
  info_.weight_bytes = model_->load_report().weight_bytes;
  stats_.kv_blocks_total = info_.kv_blocks;
  stats_.kv_blocks_free = info_.kv_blocks;
  stats_.kv_block_size = block_size;

  // Drafter models get a pool as large as the target's (a sequence never holds more tokens there)
  // plus room for every sequence's drafts.
  DrafterModelOptions draft_options;
  draft_options.n_ctx = info_.n_ctx;
  draft_options.capacity_tokens =
      info_.kv_capacity_tokens + uint64_t(config.scheduler.max_num_seqs) * (uint64_t(config.drafter.k) + block_size);
  draft_options.block_size = block_size;
  draft_options.kv_dtype = kv_dtype;
  host_models_ = std::make_unique<DrafterHostModels>(*backend_, draft_options);
  if (config.drafter.kind != "none" && model_->info().is_hybrid()) {
    // Verification rolls rejected draft tokens back, which a recurrent state cannot undo.
    throw Error("drafter '" + config.drafter.kind + "': speculative decoding is not available for " + model_->info().arch_name +
                ", whose recurrent layers cannot roll back rejected draft tokens (set drafter.kind = \"none\")");
  }
  if (config.drafter.kind != "none") {
    drafter_ = std::make_unique<PluginDrafter>(remember(find_plugin(config, LOOM_PLUGIN_KIND_DRAFTER, config.drafter.kind)),
                                               host_models_->services(), drafter_config_json(config));
    draft_k_ = static_cast<uint32_t>(config.drafter.k);
  }
  limit_rows_for_rings();
  open_disk_tier(config, model_path);
  open_vision(config, model_path);
}

// Every admitted request fits the context, so a pool that holds one full context can always finish a
// lone sequence: nothing ever ends for want of KV blocks when it runs alone.
void Engine::fit_context_to_pool(const Config& config, uint64_t capacity_tokens, uint64_t budget_bytes) {
  info_.n_ctx_requested = model_->n_ctx();
  if (static_cast<uint64_t>(model_->n_ctx()) <= capacity_tokens) return;
  if (config.model.n_ctx > 0) {
    const char* budget_key = config.kv.memory_fraction > 0 ? "[kv] memory_fraction" : "[kv] memory";
    throw Error("[model] n_ctx = " + std::to_string(config.model.n_ctx) + " does not fit the KV cache: " + budget_key +
                " (" + std::to_string(budget_bytes) + " bytes) holds " +
                std::to_string(capacity_tokens) + " tokens of this model; lower [model] n_ctx to at most " +
                std::to_string(capacity_tokens) + " or raise " + budget_key);
  }
  model_->limit_context(static_cast<int64_t>(capacity_tokens));
}

void Engine::set_drafter(std::unique_ptr<Drafter> drafter, uint32_t k) {
  std::lock_guard step_lock(step_mutex_);
  drafter_ = std::move(drafter);
  draft_k_ = drafter_ ? k : 0;
  drafter_failed_logged_ = false;
  limit_rows_for_rings();
}

// A decode step with drafts runs k + 1 rows of a sequence, so prompt chunks leave room for them and
// no step writes more than a ring holds beyond the window (Model::validate checks it).
// Drafts beyond half of those rows are not proposed.
void Engine::limit_rows_for_rings() {
  if (window_rows_ == 0) return;
  draft_k_ = std::min(draft_k_, window_rows_ / 2);
  scheduler_->limit_rows_per_sequence(window_rows_ - draft_k_);
}

Engine::~Engine() {
  stop(false);
  std::lock_guard step_lock(step_mutex_);
  drain_inbox();
  for (auto& [id, seq] : sequences_) {
    if (seq->status != SequenceStatus::finished) finish(*seq, FinishReason::cancelled);
  }
  sequences_.clear();
}

RequestId Engine::submit(Request request) {
  const auto n_prompt = static_cast<int64_t>(request.prompt.size());
  const int64_t n_vocab = model_->info().n_vocab;
  auto reject = [&](const std::string& why) {
    std::lock_guard lock(mutex_);
    ++stats_.requests_rejected;
    throw Error(why);
  };
  if (n_prompt == 0) reject("the prompt is empty");
  for (int32_t token : request.prompt) {
    if (token < 0 || token >= n_vocab) {
      reject("prompt token id " + std::to_string(token) + " is outside the vocabulary (0.." +
             std::to_string(n_vocab - 1) + ")");
    }
  }
  if (n_prompt >= info_.n_ctx) {
    reject("the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
           std::to_string(info_.n_ctx) + " (one more is needed to generate)");
  }
  if (request.max_tokens == 0) reject("max_tokens must be at least 1");
  request.max_tokens = static_cast<uint32_t>(std::min<int64_t>(request.max_tokens, info_.n_ctx - n_prompt));
  const uint64_t blocks = (static_cast<uint64_t>(n_prompt) + 1 + info_.kv_block_size - 1) / info_.kv_block_size;
  if (blocks > info_.kv_blocks) {
    reject("the prompt has " + std::to_string(n_prompt) + " tokens, which need " + std::to_string(blocks) +
           " KV blocks, but the whole pool has " + std::to_string(info_.kv_blocks) + " (raise kv.memory)");
  }
  uint32_t image_end = 0;
  for (size_t i = 0; i < request.images.size(); ++i) {
    const PromptImage& image = request.images[i];
    const std::string which = "image " + std::to_string(i) + ": ";
    if (!vision_) reject("the request holds images, but this model takes none (no vision encoder is loaded)");
    if (image.n_rows == 0 || image.first < image_end || uint64_t(image.first) + image.n_rows > uint64_t(n_prompt))
      reject(which + "its rows are empty, overlap another image's or lie outside the prompt");
    const int64_t width = model_->info().embd_row_width();
    if (!image.rows || image.rows->size() != size_t(image.n_rows) * size_t(width))
      reject(which + "its rows do not hold " + std::to_string(image.n_rows) + " x " + std::to_string(width) + " values");
    if (image.n_rows > uint64_t(config_.scheduler.max_batched_tokens))
      reject(which + std::to_string(image.n_rows) + " rows do not fit [scheduler] max_batched_tokens");
    if (window_rows_ > 0 && image.n_rows + draft_k_ > window_rows_)
      reject(which + std::to_string(image.n_rows) + " rows are more than a sliding-window ring lets one sequence run per step");
    if (image.non_causal && !model_->supports_non_causal()) reject(which + "backend '" + backend_->name() + "' cannot decode it non-causally");
    image_end = image.first + image.n_rows;
  }
  std::optional<LoraSlot> lora;
  if (!request.lora.empty()) {
    lora = find_lora(request.lora);
    if (!lora) {
      const std::string names = lora_names();
      reject("unknown adapter '" + request.lora + "' (" + (names.empty() ? std::string("this engine serves none") : "adapters: " + names) + ")");
    }
  }
  if (request.sampling.logit_bias_tokens.size() != request.sampling.logit_bias_values.size())
    reject("logit bias: " + std::to_string(request.sampling.logit_bias_tokens.size()) + " tokens but " +
           std::to_string(request.sampling.logit_bias_values.size()) + " values");
  request.sampling.bind();
  if (!request.sampling.speculation_exact()) request.speculative = false;
  try {
    sampler_->validate(request.sampling.params);
  } catch (const Error& e) {
    reject(std::string("invalid sampling parameters: ") + e.what());
  }

  auto seq = std::make_unique<Sequence>();
  if (request.constraint) seq->constraint = std::make_unique<ConstraintMatcher>(request.constraint);
  seq->tokens = request.prompt;
  seq->n_prompt = static_cast<uint32_t>(n_prompt);
  seq->arrival = Clock::now();
  seq->decoder = std::make_unique<StreamingDecoder>(*tokenizer_);
  seq->stop = std::make_unique<StopMatcher>(request.stop, request.min_indent);
  seq->request = std::move(request);
  seq->request.sampling.bind();
  if (lora) {
    // Counted until the request finishes: unloading the adapter waits for it. The adapter may have
    // been unloaded since the lookup: refuse rather than run on an emptied slot.
    std::lock_guard lora_lock(lora_mutex_);
    const bool still_loaded = std::any_of(loras_.begin(), loras_.end(), [&](const LoraSlot& l) { return l.cache_key == lora->cache_key; });
    if (!still_loaded) reject("adapter '" + lora->name + "' was unloaded");
    seq->lora_slot = lora->slot;
    seq->lora_cache_key = lora->cache_key;
    ++lora_users_[size_t(lora->slot)];
  }

  std::lock_guard lock(mutex_);
  seq->id = next_id_++;
  const RequestId id = seq->id;
  inbox_.push_back(std::move(seq));
  ++n_unfinished_;
  ++stats_.requests_submitted;
  stats_.prompt_tokens += static_cast<uint64_t>(n_prompt);
  wake_.notify_all();
  return id;
}

std::shared_ptr<const CompiledConstraint> Engine::compile_constraint(const GrammarSpec& spec) const {
  std::call_once(constraints_once_, [&] { constraints_ = std::make_unique<ConstraintCompiler>(*tokenizer_, model_->info().n_vocab); });
  return constraints_->compile(spec);
}

void Engine::cancel(RequestId id) {
  std::lock_guard lock(mutex_);
  cancellations_.push_back(id);
  wake_.notify_all();
}

size_t Engine::n_unfinished() const {
  std::lock_guard lock(mutex_);
  return n_unfinished_;
}

bool Engine::set_kv_event_listener(KvEventListener listener) {
  std::lock_guard step_lock(step_mutex_);  // no step runs while the allocator's sink changes
  if (listener && !loras_.empty()) {
    // An adapter's blocks carry its id and name, as vLLM's BlockStored does.
    listener = [this, inner = std::move(listener)](const KvEvent& event) {
      if (event.cache_key == 0) return inner(event);
      KvEvent named = event;
      for (size_t i = 0; i < loras_.size(); ++i) {
        if (loras_[i].cache_key != event.cache_key) continue;
        named.lora_id = int64_t(i) + 1;
        named.lora_name = loras_[i].name;
      }
      inner(named);
    };
  }
  return kv_->set_event_listener(std::move(listener));
}

std::string Engine::backend_stats_json() const { return backend_->stats_json(); }

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = stats_;
  if (disk_tier_) s.disk = disk_tier_->stats();
  return s;
}

void Engine::drain_inbox() {
  std::vector<std::unique_ptr<Sequence>> arrivals;
  std::vector<RequestId> cancels;
  {
    std::lock_guard lock(mutex_);
    arrivals.swap(inbox_);
    cancels.swap(cancellations_);
  }
  for (auto& seq : arrivals) {
    // States are made here, on the engine thread, so the sampler is only ever used from one thread.
    uint64_t seed = seq->request.sampling.seed ? *seq->request.sampling.seed : std::random_device{}();
    seq->sampler_state = sampler_->create_state(seed);
    // A stream of its own, so speculation never shifts the sampler's draws.
    seq->spec_rng.seed(seed ^ 0x5DEECE66DA3B1F27ull);
    scheduler_->add(seq.get());
    sequences_[seq->id] = std::move(seq);
  }
  for (RequestId id : cancels) {
    auto it = sequences_.find(id);
    if (it != sequences_.end() && it->second->status != SequenceStatus::finished) finish(*it->second, FinishReason::cancelled);
  }
}

void Engine::emit(Sequence& seq, std::vector<int32_t> tokens, std::string text, std::vector<TokenLogprob> logprobs,
                  FinishReason reason, const std::string& error) {
  if (!seq.request.on_event) return;
  RequestEvent event;
  event.id = seq.id;
  event.tokens = std::move(tokens);
  event.text = std::move(text);
  event.logprobs = std::move(logprobs);
  event.finish = reason;
  event.error = error;
  if (reason != FinishReason::none) {
    event.n_prompt_tokens = seq.n_prompt;
    event.n_completion_tokens = seq.n_generated();
    event.n_cached_tokens = seq.n_cached;
    if (seq.got_first_token) event.ttft_seconds = std::chrono::duration<double>(seq.first_token - seq.arrival).count();
    event.queue_seconds = std::chrono::duration<double>(seq.first_scheduled - seq.arrival).count();
  }
  seq.request.on_event(event);
}

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  std::string tail;
  if (reason == FinishReason::stop || reason == FinishReason::length || reason == FinishReason::grammar_dead_end) tail = seq.stop->push(seq.decoder->flush()) + seq.stop->flush();
  scheduler_->remove(&seq);
  if (drafter_) drafter_->release(seq.id);
  sampler_->destroy_state(seq.sampler_state);
  seq.sampler_state = nullptr;
  seq.status = SequenceStatus::finished;
  if (seq.first_scheduled == Clock::time_point{}) seq.first_scheduled = Clock::now();
  emit(seq, {}, std::move(tail), {}, reason, error);
  if (seq.lora_slot >= 0) {
    std::lock_guard lora_lock(lora_mutex_);
    --lora_users_[size_t(seq.lora_slot)];
    lora_released_.notify_all();
  }
  std::lock_guard lock(mutex_);
  --n_unfinished_;
  if (reason == FinishReason::cancelled) ++stats_.requests_cancelled;
  else if (reason == FinishReason::error) ++stats_.requests_failed;
  else ++stats_.requests_finished;
  stats_.cached_prompt_tokens += seq.n_cached;
}

void Engine::start() {
  std::lock_guard lock(mutex_);
  if (running_) return;
  running_ = true;
  stop_requested_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop(bool drain) {
  {
    std::lock_guard lock(mutex_);
    if (!running_) return;
    stop_requested_ = true;
    drain_on_stop_ = drain;
    wake_.notify_all();
  }
  thread_.join();
  std::lock_guard lock(mutex_);
  running_ = false;
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stop_requested_ || !inbox_.empty() || !cancellations_.empty() || scheduler_->has_work();
      });
      if (stop_requested_ && (!drain_on_stop_ || n_unfinished_ == 0)) break;
    }
    try {
      step();
    } catch (const std::exception& e) {
      // A failed step must not take the server down: fail the requests in flight, keep serving.
      std::lock_guard step_lock(step_mutex_);
      for (auto& [id, seq] : sequences_) {
        if (seq->status == SequenceStatus::running) finish(*seq, FinishReason::error, e.what());
      }
    }
  }
  std::lock_guard step_lock(step_mutex_);
  drain_inbox();
  for (auto& [id, seq] : sequences_) {
    if (seq->status != SequenceStatus::finished) finish(*seq, FinishReason::cancelled);
  }
}

}  // namespace loom
