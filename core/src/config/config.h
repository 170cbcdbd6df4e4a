// loom.toml: typed settings, validated against a schema. Unknown keys, wrong types and out-of-range
// values are errors that name the file, the line, the key and what is allowed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace loom {

struct ModelSettings {
  std::string path;           // GGUF file; empty = the installed default model
  int64_t n_ctx = 0;          // 0 = the model's own context length
  std::string chat_template;  // empty = the model's template
  std::string mmproj;         // vision projector GGUF; empty = the one mmproj*.gguf beside the model, if any
  // mean | cls | last: serve a generative model as an embedding model (loom serve's /v1/embeddings);
  // empty = as the file says (<arch>.pooling_type, which Qwen3-Embedding's converter writes).
  std::string pooling;
  // Run-time LoRA adapters ([[lora]]): how many are resident at once and their largest rank, which
  // size the adapters' memory; 0 = as many as [[lora]] names, and the largest rank among them.
  int64_t max_loras = 0;
  int64_t max_lora_rank = 0;
};

// One [[lora]] entry: an adapter a request names as its model (vLLM's convention), applied at run time.
struct LoraSettings {
  std::string name;   // what a request's "model" names
  std::string path;   // llama.cpp's GGUF adapter file
  double scale = 1.0;
};

// One [[models]] entry: a model the server loads when a request names it (several models behind one
// endpoint). Keys it leaves out take the [model], [kv] and [backend] values.
struct ModelEntrySettings {
  std::string name;                  // what a request's "model" names
  std::string path;                  // GGUF file or Hugging Face folder
  std::vector<std::string> aliases;  // further names for it
  int64_t n_ctx = -1;                // -1 = [model] n_ctx
  int64_t kv_memory_bytes = 0;       // 0 = [kv] memory
  std::string backend;               // empty = [backend] name
  int64_t threads = -1;              // -1 = [backend] threads
  std::string chat_template;         // empty = [model] chat_template
  bool preload = false;              // load at start-up rather than at the first request
};

// One [backend.options] value. Loom does not know these keys: the plugin named by [backend] name reads and
// validates them (e.g. the CPU plugin's "simd", the Vulkan plugin's "matvec"), so only scalar TOML types pass.
using BackendOptionValue = std::variant<std::string, int64_t, double, bool>;

struct BackendSettings {
  std::string name = "cpu";  // plugin name: cpu, vulkan, cuda, ...
  int64_t device = 0;
  int64_t threads = 0;  // 0 = all cores
  std::map<std::string, BackendOptionValue> options;  // [backend.options], merged into the plugin's config_json
};

struct KvSettings {
  std::string allocator = "paged";
  int64_t block_size = 16;
  int64_t memory_bytes = 512ll << 20;  // from `memory = "512MiB"`
  double memory_fraction = 0.0;        // of device memory; 0 = use memory_bytes
  std::string dtype = "f16";           // f32 | f16 | int8 | q8_0 | q4_0 | fp8_e4m3 (or fp8)
  bool prefix_caching = true;
  // Hybrid models (recurrent layers): how many cached prompts keep the recurrent state at their last
  // full block, so a prompt repeating one resumes there (each costs one sequence's state memory).
  int64_t state_checkpoints = 16;
  // Sliding-window layers (Gemma 2/3/4, gpt-oss): "window" keeps each running sequence's last window
  // in a ring of its own (window + window_chunk_tokens), "full" keeps every token like the other
  // layers, "auto" takes rings where one is under half the context (else they would save nothing)
  // and the budget holds them.
  std::string sliding_layers = "auto";
  // With rings: rows of one sequence per step (its prompt runs in chunks of at most this many, less
  // the drafts). 512 is llama.cpp's default micro-batch, so a ring is the size of llama-server's
  // sliding-window cache per sequence; smaller rings hold more users, at more prefill steps.
  int64_t window_chunk_tokens = 512;
  // With rings: rings, so sequences that run at once (0 = balanced against the block pool for
  // sequences of a quarter of the context). Prefix reuse keeps up to state_checkpoints more rings
  // (at most a quarter of these).
  int64_t window_seqs = 0;
  // The prefix cache's disk tier (engine/prefix_disk_tier.h): a folder where computed blocks are kept
  // beyond the memory pool and across restarts ("" = off), and the most it may hold.
  std::string disk_cache_path;
  int64_t disk_cache_bytes = 4ll << 30;
};

struct SchedulerSettings {
  int64_t max_num_seqs = 64;
  int64_t max_batched_tokens = 2048;
  bool chunked_prefill = true;
  // Prompt tokens a step computes while other sequences decode in it: a long prompt arrives in
  // chunks this size, so running streams wait one chunk per token, not the whole prompt. 0 = no cap
  // beyond max_batched_tokens. Default model, 2 CPU threads, a 4000-token prompt arriving beside 4
  // streams (scripts/bench_vs_llama_cpp.sh): 256 -> its TTFT 22.7 s, streams wait 1.87 s per token
  // meanwhile; 128 -> 23.9 s and 1.05 s; 64 -> 25.9 s and 0.55 s.
  int64_t prefill_tokens_while_decoding = 128;
  std::string policy = "fcfs";  // fcfs | priority
};

struct EngineSettings {
  // Batch-invariant serving (docs/deterministic.md): a request's tokens depend only on its prompt,
  // its sampling settings and its seed, never on the other requests it is batched with. Needs a
  // backend that reports batch-invariant results (caps.batch_invariant, ABI 1.18); costs batched
  // speed (`loom bench --deterministic` measures it).
  bool deterministic = false;
};

struct SamplerSettings {
  std::string plugin = "samplers";
  std::vector<std::string> chain;  // empty = plugin default
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 0.95;
  double min_p = 0.05;
  double typical_p = 1.0;
  double repetition_penalty = 1.0;
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;
  int64_t penalty_last_n = 64;
  int64_t seed = -1;  // -1 = random per request
};

struct DrafterSettings {
  std::string kind = "none";  // none | ngram | draft_model
  int64_t k = 4;
  std::string model;
  int64_t ngram_max = 3;
};

struct QuantSettings {
  std::string plugin = "quant";
};

// [server.kv_events]: publish the prefix cache's block events in vLLM's wire format (msgpack
// batches on a ZMQ PUB socket, a ROUTER socket for replay), for KV-aware routers.
struct KvEventsSettings {
  bool enabled = false;
  std::string endpoint = "tcp://*:5557";  // the PUB socket's address
  std::string mode = "auto";              // bind | connect | auto (vLLM's rule: bind when it has a wildcard)
  std::string replay_endpoint;            // ROUTER for missed batches; empty = no replay
  std::string topic;                      // first frame of every message
  int64_t buffer_steps = 10000;           // batches kept for replay
};

struct ServerSettings {
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  std::string api_key;
  int64_t max_queue = 256;
  int64_t max_body_bytes = 1 << 20;
  std::string model_name;  // name in /v1/models; empty = file stem
  bool enable_lora_loading = false;  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's)
  std::vector<std::string> model_aliases;  // further names requests may use for the model
  // Images in chat requests (models with a vision encoder): how many per request, the largest encoded
  // image and decoded size, and the one folder file:// URLs may read from (empty: none; Loom never
  // fetches over the network). The body limit rises to hold max_images_per_request such images.
  // Embedding models: inputs one /v1/embeddings request may send.
  int64_t max_embedding_inputs = 2048;
  int64_t max_images_per_request = 8;
  int64_t max_image_bytes = 20ll << 20;
  int64_t max_image_pixels = 4096ll * 4096ll;
  std::string allowed_local_media_path;
  // Connection limits (docs/server.md, "Connections"): what idle and slow clients can hold.
  int64_t max_connections = 1024;      // open sockets; a new one past this gets 503
  double keep_alive_timeout = 5.0;     // seconds an idle keep-alive connection is kept
  int64_t keep_alive_max_requests = 100;
  double request_read_timeout = 10.0;  // seconds for a request's headers and body to arrive
  KvEventsSettings kv_events;
  // Several models ([[models]]): the most their weights and KV pools may take together (0 = no
  // limit; the least recently used idle model is unloaded to make room), how long a model may sit
  // idle before it is unloaded (seconds, 0 = never), and how long a request waits for busy models to
  // finish before it gets 503 with Retry-After.
  int64_t memory_budget = 0;
  double idle_unload = 0.0;
  double model_swap_wait = 10.0;
};

struct PluginSettings {
  std::vector<std::string> search_path;
};

struct Config {
  std::filesystem::path source;  // the file it came from; empty for defaults
  ModelSettings model;
  BackendSettings backend;
  KvSettings kv;
  SchedulerSettings scheduler;
  EngineSettings engine;
  SamplerSettings sampler;
  DrafterSettings drafter;
  QuantSettings quant;
  ServerSettings server;
  PluginSettings plugins;
  std::vector<LoraSettings> loras;  // [[lora]], in file order
  std::vector<ModelEntrySettings> models;  // [[models]], in file order
  // "section.key" of every key the file sets: a model's recommended sampling (general.sampling.*)
  // applies where loom.toml leaves the key to its default.
  std::set<std::string> given;
};

// Parse and validate; throws loom::Error "FILE:LINE: key 'section.key': problem (allowed: ...)".
Config load_config(const std::filesystem::path& path);
Config parse_config(const std::string& toml_text, const std::filesystem::path& label);

// The resolved configuration as TOML, every key with its value (defaults included).
std::string config_to_toml(const Config& config);

// True for the config_json members that [backend] itself sets (device, threads); [backend.options] may not
// name them, so one setting never has two places that disagree.
bool is_backend_key_option(const std::string& option);

// "512MiB", "2GB", "1048576" -> bytes; throws loom::Error on a bad size.
int64_t parse_byte_size(const std::string& text);

}  // namespace loom
