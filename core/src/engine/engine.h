// Engine — the one API that `generate`, `chat`, the server and the benchmarks use: submit a request,
// receive its tokens as events, cancel it, read statistics.
//
// It owns the model on its backend, the KV pool (memory on the backend, bookkeeping in the KV
// allocator plugin), the scheduler and the sampler. Each step() runs one forward pass over a mixed
// batch of prefill chunks and decode tokens chosen by the scheduler (continuous batching), then
// samples the sequences that reached their end. Either call step() yourself (single-threaded use) or
// start() a background loop; submit() and cancel() are thread-safe in both cases.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "config/config.h"
#include "engine/drafter_host_models.h"
#include "engine/image_prompt.h"
#include "engine/kv_plan.h"
#include "engine/drafter_interface.h"
#include "engine/kv_manager.h"
#include "engine/metrics.h"
#include "engine/prefix_disk_tier.h"
#include "engine/request.h"
#include "engine/sampler_handle.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace loom {

class Tokenizer;
class Backend;
class LoadedPlugin;

struct PluginSummary {
  std::string kind, name, version;
};

struct EngineInfo {
  std::vector<PluginSummary> plugins;  // backend, KV allocator, sampler (and drafter) in use
  std::string model_path;
  std::string model_name;
  std::string backend_name;
  std::string device_name;
  uint32_t kv_blocks = 0;
  uint32_t kv_block_size = 0;
  uint64_t kv_bytes = 0;
  uint64_t kv_bytes_per_token = 0;
  uint64_t kv_capacity_tokens = 0;  // blocks * block size
  std::string kv_dtype;              // [kv] dtype: f16, f32, int8
  std::vector<KvLayerGroup> kv_groups;  // what each group of layers keeps (kv_plan.h)
  KvPoolLayout kv_layout;               // the pool and window rings as planned (kv_plan.h)
  uint32_t kv_window_rings = 0;         // sliding layers' rings: sequences that can run at once (0 = no rings)
  uint64_t kv_window_ring_tokens = 0;   // tokens one ring holds
  uint32_t max_num_seqs = 0;
  int64_t n_ctx = 0;            // positions per sequence: at most what the KV pool holds for one sequence
  int64_t n_ctx_requested = 0;  // [model] n_ctx, else the model's own context, before it was fitted to the pool
  uint64_t weight_bytes = 0;  // as held by the backend (after any load-time repacking)
  std::string mmproj_path;    // the vision projector in use; empty: the model takes no images
  uint32_t image_rows = 0;    // prompt rows one image becomes (a large square one where the size varies)
  std::string projector;      // the projector's type: gemma3, mlp, pixtral, idefics3
};

namespace vision {
class VisionEncoder;
struct RgbImage;
}

class Engine {
 public:
  // Loads the backend, sampler and KV plugins the config names and the model at `model_path`.
  // loom::Error naming what is missing or invalid.
  // `on_load_progress` sees the weight bytes uploaded (a progress bar while a large model loads).
  Engine(const Config& config, const std::filesystem::path& model_path, LoadProgress on_load_progress = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineInfo& info() const { return info_; }
  const ModelInfo& model_info() const { return model_->info(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // Structured output: the grammar compiled against this model's vocabulary, for Request::constraint.
  // Thread-safe (the server compiles on its handler threads); loom::Error naming what does not compile.
  std::shared_ptr<const CompiledConstraint> compile_constraint(const GrammarSpec& spec) const;
  const gguf::GgufFile& gguf() const { return *gguf_; }
  const loom_sampling_params& default_sampling() const { return sampler_->defaults(); }

  // Check and queue a request. loom::Error (nothing queued) when it can never run: empty prompt,
  // prompt longer than the context, more KV than the whole pool, invalid sampling parameters.
  RequestId submit(Request request);
  // Finish the request with FinishReason::cancelled at the next step; its blocks are freed.
  void cancel(RequestId id);

  // One scheduler step (single-threaded use). Returns false when there was nothing to do.
  bool step();
  // Run steps on a background thread until stop().
  void start();
  // Stop the loop. With `drain`, first finish every request already submitted; otherwise cancel them.
  void stop(bool drain);
  // Requests not yet finished (queued, waiting or running).
  size_t n_unfinished() const;

  EngineStats stats() const;
  // The backend plugin's own counters (loom_backend_i.get_stats), a JSON object; "{}" without them.
  std::string backend_stats_json() const;

  // Prefix-cache events of the KV allocator (KV-aware routing), delivered on the engine's thread
  // as blocks are registered and evicted. Call before start(). False when the allocator plugin
  // publishes no events.
  bool set_kv_event_listener(KvEventListener listener);

  // Speculative decoding. The configured drafter ([drafter] kind) is made at construction;
  // set_drafter replaces it (tests, benchmarks; nullptr turns speculation off) and proposes at most
  // k tokens per sequence-step. Call only while no request is in flight.
  void set_drafter(std::unique_ptr<Drafter> drafter, uint32_t k);
  const Drafter* drafter() const { return drafter_.get(); }
  // Vision ([model] mmproj, engine_vision.cpp): whether requests may hold images, the encoder, how an
  // image sits in a prompt, and an image's rows (from the encoder or its cache; thread-safe, one encode
  // at a time). loom::Error when no encoder is loaded.
  bool takes_images() const { return vision_ != nullptr; }
  const vision::VisionEncoder* vision_encoder() const { return vision_.get(); }
  const ImagePromptFormat& image_format() const { return image_format_; }
  // use_cache false encodes even an image the cache holds (benchmarks).
  EncodedImage encode_image(const vision::RgbImage& image, bool use_cache = true);
  // Run-time LoRA adapters ([[lora]], engine_lora.cpp): each resident in a model slot, named by
  // Request::lora. Thread-safe. loras() in load order (configured first); lora_names() joined by ", ".
  struct LoraSlot {
    std::string name, path;
    float scale = 1.0f;
    int32_t slot = -1;
    uint64_t cache_key = 0;  // the prefix cache of its sequences (its identity: name, file, scale, load)
    int64_t rank = 0;
    int64_t id = 0;          // vLLM's lora_int_id: 1, 2, ... in load order, never reused
  };
  std::vector<LoraSlot> loras() const;
  std::optional<LoraSlot> find_lora(const std::string& name) const;
  std::string lora_names() const;
  // Load an adapter into a free slot while the engine runs (vLLM's /v1/load_lora_adapter): loom::Error
  // naming the problem when the name is taken, no slot is free (model.max_loras), its rank exceeds
  // model.max_lora_rank, or the file is not an adapter of this model. Waits for the current step.
  LoraSlot load_lora(const std::string& name, const std::string& path, float scale = 1.0f);
  // Unload it: new requests naming it are refused at once, the ones running finish through it, then its
  // slot empties. loom::Error for an unknown name.
  void unload_lora(const std::string& name);
  // Host services whose model_* slots run models on this engine's backend (for drafter plugins).
  const loom_host_services* drafter_host_services() const { return host_models_->services(); }

 private:
  void fit_context_to_pool(const Config& config, uint64_t capacity_tokens, uint64_t budget_bytes);
  void load_loras(const Config& config);
  mutable std::mutex lora_mutex_;  // loras_, lora_users_, next_lora_id_
  std::vector<LoraSlot> loras_;
  std::vector<uint32_t> lora_users_;  // per model slot: unfinished requests through it
  std::vector<bool> lora_clearing_;   // per model slot: an unload is emptying it
  int64_t next_lora_id_ = 1;
  std::condition_variable lora_released_;
  void drain_inbox();
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "");
  void emit(Sequence& seq, std::vector<int32_t> tokens, std::string text, std::vector<TokenLogprob> logprobs,
            FinishReason finish, const std::string& error = "");
  void build_batch(const SchedulerDecision& decision);
  void split_at_images(const Sequence& seq, ForwardBatch::Seq& entry);
  std::vector<std::array<int32_t, 4>> mrope_rows_;  // build_batch's M-RoPE positions, row by row
  void run_pending_copies();
  void checkpoint_states(const SchedulerDecision& decision);
  void limit_rows_for_rings();
  // The prefix cache's disk tier (engine_disk_tier.cpp).
  void open_disk_tier(const Config& config, const std::filesystem::path& model_path);
  static int64_t largest_image_rows(const Config& config, const std::filesystem::path& model_path);
  void open_vision(const Config& config, const std::filesystem::path& model_path);
  void load_vision(const Config& config, const std::filesystem::path& mmproj);
  uint32_t load_prefix_from_disk(Sequence& seq);
  void save_blocks_to_disk(const SchedulerDecision& decision);
  void save_state_to_disk(Sequence& seq, uint32_t n_tokens);
  const std::vector<DiskBlockKey>& disk_keys(Sequence& seq, uint32_t n_blocks) const;
  void sample_and_advance(const SchedulerDecision& decision);
  void accept_token(Sequence& seq, int32_t token, TokenLogprob logprob);
  void propose_drafts(const SchedulerDecision& decision);
  void verify_drafts(Sequence& seq, size_t first_logit_row);
  void loop();
  void update_stats(bool stepped);

  Config config_;
  EngineInfo info_;
  std::unique_ptr<gguf::GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  mutable std::once_flag constraints_once_;  // the compiler indexes the vocabulary on first use
  mutable std::unique_ptr<ConstraintCompiler> constraints_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  KvCache kv_cache_;
  std::unique_ptr<KvManager> kv_;
  std::unique_ptr<SamplerHandle> sampler_;
  std::unique_ptr<Scheduler> scheduler_;
  // Declared after backend_ and model_: drafter models live on the backend; the drafter closes its
  // models through host_models_, so it goes first.
  std::unique_ptr<DrafterHostModels> host_models_;
  std::unique_ptr<Drafter> drafter_;
  uint32_t draft_k_ = 0;
  uint32_t window_rows_ = 0;  // rows of one sequence per step the window rings allow (0: no rings)
  std::unique_ptr<PrefixDiskTier> disk_tier_;
  DiskBlockKey disk_fingerprint_;    // the first block's parent key
  std::vector<uint8_t> disk_block_;  // one block's bytes on their way to or from the disk
  uint64_t disk_state_bytes_ = 0;    // a hybrid model's recurrent state per sequence (0: none)
  bool drafter_failed_logged_ = false;
  // Vision: the encoder on its own backend instance, and its rows by image hash, most recent first.
  std::unique_ptr<Backend> vision_backend_;
  std::unique_ptr<vision::VisionEncoder> vision_;
  ImagePromptFormat image_format_;
  std::mutex vision_mutex_;
  std::list<EncodedImage> image_cache_;
  uint64_t projector_hash_ = 0;  // mixed into every image's hash (engine_vision.cpp)
  uint64_t image_cache_bytes_ = 0;

  // Engine-thread state.
  std::map<RequestId, std::unique_ptr<Sequence>> sequences_;
  ForwardBatch batch_;
  std::vector<float> logits_;
  double matcher_seconds_ = 0;  // this step's grammar matcher advances (EngineStats::grammar_seconds)
  std::vector<loom_sample_row> rows_;
  std::vector<float> top_logprobs_;
  std::vector<int32_t> top_tokens_;
  std::vector<int32_t> spec_history_;  // tokens + drafts of the sequence being verified
  std::vector<float> spec_probs_;      // [n_draft + 1, n_vocab] target distributions

  // Shared with submitters.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::vector<RequestId> cancellations_;
  RequestId next_id_ = 1;
  size_t n_unfinished_ = 0;
  EngineStats stats_;
  std::thread thread_;
  bool running_ = false;
  bool stop_requested_ = false;
  bool drain_on_stop_ = false;
  std::mutex step_mutex_;  // step() from a caller and the loop never overlap
};

}  // namespace loom
