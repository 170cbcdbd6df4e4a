// `loom bench`: prefill (pp) and decode (tg) speed of a model through the engine, decode throughput
// at several batch sizes, each set against a limit measured in the same run: the machine's memory
// read bandwidth for decode, and the backend's reference kernels for prefill.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <unistd.h>

#include "backend/backend.h"
#include "bench_embeddings.h"
#include "bench_image.h"
#include "bench/compute_peak.h"
#include "bench/memory_bandwidth.h"
#include "command.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "host_options.h"
#include "lora/synth_lora.h"
#include "model/default_model.h"
#include "model/session.h"

namespace loom::host {

namespace {

// The middle of a run's rounds (the upper middle for an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct BenchOptions {
  std::string model;
  std::string backend;
  int64_t threads = 0;
  int n_prompt = 512;
  int n_gen = 128;
  int rounds = 5;  // decode rounds, each compared with the bandwidth measured around it
  std::vector<int> batches = {1, 4, 16};
  int reference_tokens = 16;  // prefill tokens for the reference-kernel comparison (0 = skip)
  bool grammar = true;        // the JSON-schema mask cost at batch 1 and the largest batch
  std::string json_path;
  std::string image;  // --image: the vision encoder's figures instead (bench_image.h)
  bool embeddings = false;  // --embeddings: a text encoder's tokens/s instead (bench_embeddings.h)
  int64_t lora_rank = 0;    // --lora-rank R: adapters against the base model instead
  bool deterministic = false;  // --deterministic: [engine] deterministic against the usual kernels instead
};

// Multiply-adds of one token's matmuls: every 2-D weight once, except an embedding table that is
// only looked up (and not reused as the output matrix). Attention over the context comes on top.
// A mixture of experts computes only the chosen experts: a 3-D expert tensor counts n_used / n_expert
// of its elements (and bytes).
double expert_share(const gguf::TensorInfo& t, const ModelInfo& info) {
  return t.dims.size() == 3 && info.is_moe() ? double(info.n_expert_used) / double(info.n_expert) : 1.0;
}

uint64_t matmul_macs_per_token(const gguf::GgufFile& file, const ModelInfo& info) {
  uint64_t macs = 0;
  for (const auto& t : file.tensors()) {
    if (t.dims.size() < 2) continue;
    const bool lookup_table = t.name == "token_embd.weight" ? !info.tied_output : t.name.find("per_layer_token_embd") != std::string::npos;
    if (!lookup_table) macs += uint64_t(double(t.n_elements) * expert_share(t, info));
  }
  return macs;
}

// The backend's mixture-of-experts counters (get_stats), zero when it has none.
struct MoeReads {
  double matmuls = 0, expert_reads = 0, rows = 0;
};
MoeReads moe_reads(const Engine& engine) {
  const auto stats = nlohmann::json::parse(engine.backend_stats_json(), nullptr, false);
  MoeReads r;
  if (!stats.is_object()) return r;
  r.matmuls = stats.value("moe_matmuls", 0.0);
  r.expert_reads = stats.value("moe_expert_reads", 0.0);
  r.rows = stats.value("moe_rows", 0.0);
  return r;
}

std::vector<int32_t> random_prompt(int n, int32_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens;
  // Ordinary ids: skip the first few hundred, where control tokens usually sit.
  for (int i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(300 + rng() % static_cast<uint32_t>(n_vocab - 300)));
  return tokens;
}

struct RunResult {
  double prefill_seconds = 0;  // submit -> first token, summed over requests
  double decode_seconds = 0;   // first token -> last token, wall clock over the whole batch
  uint64_t generated = 0;
  MoeReads decode_moe;         // the backend's MoE counters over the steps after every prompt's first token
};

// Submit `batch` requests together and step the engine until they finish; with `constraint`, each
// request's output is held to it (structured output) and ends when the grammar does.
RunResult run_requests(Engine& engine, int batch, int n_prompt, int n_gen, uint32_t seed,
                       std::shared_ptr<const CompiledConstraint> constraint = nullptr, const std::vector<std::string>& adapters = {}) {
  RunResult result;
  std::vector<Clock::time_point> first(batch), last(batch);
  std::vector<bool> got(batch, false);
  auto t0 = Clock::now();
  for (int i = 0; i < batch; ++i) {
    Request request;
    request.prompt = random_prompt(n_prompt, engine.model_info().n_vocab, seed + static_cast<uint32_t>(i));
    request.max_tokens = static_cast<uint32_t>(n_gen);
    request.ignore_eos = constraint == nullptr;
    request.constraint = constraint;
    if (!adapters.empty()) request.lora = adapters[static_cast<size_t>(i) % adapters.size()];  // "" is the base model
    request.sampling.params = engine.default_sampling();
    request.sampling.params.temperature = 0;
    request.on_event = [&, i](const RequestEvent& e) {
      if (e.tokens.empty()) return;
      auto now = Clock::now();
      if (!got[static_cast<size_t>(i)]) first[static_cast<size_t>(i)] = now;
      got[static_cast<size_t>(i)] = true;
      last[static_cast<size_t>(i)] = now;
      result.generated += e.tokens.size();
    };
    engine.submit(std::move(request));
  }
  // Prompts first; the decode steps' MoE counters start once every request has its first token.
  while (engine.n_unfinished() > 0 && !std::all_of(got.begin(), got.end(), [](bool g) { return g; })) engine.step();
  const MoeReads decode_start = moe_reads(engine);
  while (engine.n_unfinished() > 0) engine.step();
  const MoeReads decode_end = moe_reads(engine);
  result.decode_moe = {decode_end.matmuls - decode_start.matmuls, decode_end.expert_reads - decode_start.expert_reads,
                       decode_end.rows - decode_start.rows};
  auto first_all = *std::min_element(first.begin(), first.end());
  auto last_all = *std::max_element(last.begin(), last.end());
  result.prefill_seconds = std::chrono::duration<double>(*std::max_element(first.begin(), first.end()) - t0).count();
  result.decode_seconds = std::chrono::duration<double>(last_all - first_all).count();
  return result;
}

// --lora-rank R: four synthetic adapters of rank R on every projection, resident together, against the
// base model in the same engine, alternating: batch-1 decode through one adapter (limit 0.9x the base's)
// and batch-16 decode over the four (limit 0.8x the base's batch 16), median of `rounds` each.
int run_lora_bench(Config config, const std::filesystem::path& model_path, int64_t rank, int rounds, int n_gen, int batch,
                   const std::string& json_path) {
  const auto dir = std::filesystem::temp_directory_path() / ("loom-bench-lora-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  config.loras.clear();
  for (int i = 0; i < 4; ++i) {
    SynthLoraSpec spec;
    spec.rank = rank;
    spec.seed = uint64_t(i + 1);
    const auto path = dir / ("adapter" + std::to_string(i) + ".gguf");
    write_synthetic_lora(model_path, spec, path);
    config.loras.push_back({"a" + std::to_string(i), path.string(), 1.0});
  }
  config.scheduler.max_num_seqs = std::max<int64_t>(config.scheduler.max_num_seqs, batch);
  config.kv.prefix_caching = false;
  Engine engine(config, model_path);
  std::filesystem::remove_all(dir);
  const auto tps = [&](int b, const std::vector<std::string>& adapters, uint32_t seed) {
    RunResult r = run_requests(engine, b, 16, n_gen, seed, nullptr, adapters);
    return static_cast<double>(r.generated - static_cast<uint64_t>(b)) / r.decode_seconds;
  };
  run_requests(engine, 1, 8, 2, 1, nullptr, {"a0"});  // warm-up
  std::vector<double> base1, lora1, base_b, lora_b;
  for (int round = 0; round < rounds; ++round) {
    std::cerr << "round " << round + 1 << " of " << rounds << ": batch 1 and " << batch << ", base model and adapters...\n";
    base1.push_back(tps(1, {""}, 10 + uint32_t(round)));
    lora1.push_back(tps(1, {"a0"}, 10 + uint32_t(round)));
    base_b.push_back(tps(batch, {""}, 100 + uint32_t(round)));
    lora_b.push_back(tps(batch, {"a0", "a1", "a2", "a3"}, 100 + uint32_t(round)));
  }
  const double b1 = median(base1), l1 = median(lora1), bb = median(base_b), lb = median(lora_b);
  std::cout << std::fixed << std::setprecision(2);
  std::cout << "model      " << model_path.filename().string() << " on " << engine.info().backend_name << ", four rank-" << rank
            << " adapters on every projection\n";
  std::cout << "batch 1    " << l1 << " tokens/s through one adapter vs " << b1 << " without = " << l1 / b1 << "x (limit 0.90x)\n";
  std::cout << "batch " << std::setw(3) << batch << "  " << lb << " tokens/s over four adapters vs " << bb << " without = " << lb / bb
            << "x (limit 0.80x)\n";
  if (!json_path.empty()) {
    nlohmann::json report = {{"model", model_path.string()}, {"backend", engine.info().backend_name}, {"rank", rank},
                             {"batch1", {{"base_tokens_per_s", b1}, {"lora_tokens_per_s", l1}, {"ratio", l1 / b1}, {"limit", 0.9}}},
                             {"batched", {{"batch", batch}, {"base_tokens_per_s", bb}, {"lora_tokens_per_s", lb}, {"ratio", lb / bb}, {"limit", 0.8}}}};
    std::ofstream(json_path) << report.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}

// --deterministic: what [engine] deterministic costs. The model in two engines, the usual one and one
// in deterministic mode (batch-invariant kernels), measured alternately: prefill of n_prompt tokens,
// batch-1 decode and decode at the largest batch, the median of `rounds` each.
int run_deterministic_bench(Config config, const std::filesystem::path& model_path, int rounds, int n_prompt, int n_gen, int batch,
                            const std::string& json_path) {
  // Every sequence of the batch at once, also where sliding-window layers keep a ring per sequence.
  if (config.kv.window_seqs == 0) config.kv.window_seqs = batch;
  config.engine.deterministic = false;
  Engine usual(config, model_path);
  config.engine.deterministic = true;
  Engine deterministic(config, model_path);
  struct Figures {
    std::vector<double> pp, tg, batched;
  } figures[2];
  Engine* engines[2] = {&usual, &deterministic};
  for (Engine* e : engines) run_requests(*e, 1, 8, 2, 1);  // warm-up
  for (int round = 0; round < rounds; ++round) {
    std::cerr << "round " << round + 1 << " of " << rounds << ": pp" << n_prompt << ", tg" << n_gen << " and batch " << batch
              << ", usual and deterministic...\n";
    for (int m = 0; m < 2; ++m) {
      Engine& engine = *engines[m];
      const RunResult pp = run_requests(engine, 1, n_prompt, 2, 10 + uint32_t(round));
      figures[m].pp.push_back(n_prompt / pp.prefill_seconds);
      const RunResult tg = run_requests(engine, 1, 16, n_gen, 20 + uint32_t(round));
      figures[m].tg.push_back((n_gen - 1) / tg.decode_seconds);
      const RunResult b = run_requests(engine, batch, 16, n_gen, 100 + uint32_t(round));
      figures[m].batched.push_back(static_cast<double>(b.generated - static_cast<uint64_t>(batch)) / b.decode_seconds);
    }
  }
  nlohmann::json report = {{"model", model_path.string()}, {"backend", deterministic.info().backend_name},
                           {"device", deterministic.info().device_name}, {"rounds", rounds}};
  std::cout << std::fixed << std::setprecision(2);
  std::cout << "model      " << model_path.filename().string() << " on " << deterministic.info().device_name
            << ": [engine] deterministic against the usual kernels, alternating, median of " << rounds << " rounds\n";
  const auto line = [&](const std::string& label, const std::string& key, const std::vector<double>& u, const std::vector<double>& d) {
    const double mu = median(u), md = median(d);
    std::cout << std::left << std::setw(11) << label << std::right << md << " tokens/s deterministic vs " << mu << " = " << md / mu
              << "x\n";
    report[key] = {{"usual_tokens_per_s", mu}, {"deterministic_tokens_per_s", md}, {"ratio", md / mu}};
  };
  line("pp" + std::to_string(n_prompt), "pp", figures[0].pp, figures[1].pp);
  line("tg" + std::to_string(n_gen), "tg", figures[0].tg, figures[1].tg);
  line("batch " + std::to_string(batch), "batched_decode", figures[0].batched, figures[1].batched);
  report["batched_decode"]["batch"] = batch;
  if (!json_path.empty()) {
    std::ofstream(json_path) << report.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}

struct DecodeRound {
  double tokens_per_s;
  double bandwidth;  // bytes/s, mean of the probes before and after the round
  double fraction;   // tokens_per_s x bytes per token / bandwidth
};

// Batch-1 decode in rounds, each between two bandwidth probes; the rounds come back sorted by
// fraction, so the middle one is the median.
std::vector<DecodeRound> decode_rounds(Engine& engine, ReadBandwidthProbe& probe, int rounds, int n_gen,
                                       uint64_t bytes_per_token) {
  std::vector<DecodeRound> result;
  double before = probe.measure();
  for (int r = 0; r < rounds; ++r) {
    RunResult tg = run_requests(engine, 1, 16, n_gen, 20 + static_cast<uint32_t>(r));
    const double after = probe.measure();
    const double tps = (n_gen - 1) / tg.decode_seconds, bandwidth = (before + after) / 2;
    result.push_back({tps, bandwidth, tps * static_cast<double>(bytes_per_token) / bandwidth});
    before = after;
  }
  std::sort(result.begin(), result.end(), [](const DecodeRound& a, const DecodeRound& b) { return a.fraction < b.fraction; });
  return result;
}

// Prefill tokens/s of the backend's reference kernels vs its fast kernels, on the same prompt.
std::pair<double, double> reference_comparison(const Config& config, const std::filesystem::path& model_path,
                                               const std::string& backend_name, int n_tokens, int64_t threads) {
  auto plugin = find_backend_plugin(config, backend_name);
  auto time_prefill = [&](const std::string& backend_json) {
    auto backend = Backend::create(plugin, backend_json);
    auto model = Model::load(model_path, *backend);
    Session session(*model, SessionOptions{.n_ctx = n_tokens + 8, .max_batch = n_tokens});
    auto prompt = random_prompt(n_tokens, model->info().n_vocab, 99);
    auto start = Clock::now();
    session.prefill(prompt);
    return n_tokens / std::chrono::duration<double>(Clock::now() - start).count();
  };
  const std::string threads_json = threads > 0 ? ",\"threads\":" + std::to_string(threads) : "";
  double reference = time_prefill("{\"reference\":true" + threads_json + "}");
  double fast = time_prefill("{" + threads_json.substr(threads_json.empty() ? 0 : 1) + "}");
  return {reference, fast};
}

int run_bench(const CommandArgs& args) {
  HostOptions host;
  BenchOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      if (!nothing_after_end_of_options("bench", args, i)) return 2;
      break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << "usage: loom bench [--model F] [--backend NAME] [--threads N] [--pp N] [--tg N]\n"
                   "                  [--rounds N] [--batch 1,4,16] [--reference-tokens N] [--no-grammar] [--json FILE]\n"
                   "                  [--config FILE]\n"
                   "       loom bench --image FILE [--mmproj F] [--model F] [--rounds N] [--json FILE]\n"
                   "       loom bench --embeddings [--model F] [--rounds N] [--json FILE]\n"
                   "       loom bench --lora-rank R [--model F] [--batch 16] [--rounds N] [--tg N] [--json FILE]\n"
                   "       loom bench --deterministic [--model F] [--pp N] [--tg N] [--batch 16] [--rounds N] [--json FILE]\n\n"
                   "Prefill (pp) and decode (tg) tokens/s through the engine, decode throughput per batch size,\n"
                   "the fraction of the measured memory bandwidth decode achieves, and the fast kernels' prefill\n"
                   "speed against the backend's reference kernels (--reference-tokens 0 skips it), and the cost of a\n"
                   "JSON-schema grammar per decode step (--no-grammar skips it).\n\n"
                   "Batched decode is compute-bound: each batch size's matmul multiply-adds per second are printed\n"
                   "against the int8 dot-product and float FMA peaks of the CPU, measured in the same run.\n\n"
                   "Decode runs in --rounds rounds (default 5) of --tg tokens, each between two measurements of the\n"
                   "memory bandwidth, and reports the median round: on a shared machine the bandwidth drifts.\n\n"
                   "With --image, a model with a vision projector: the encoder's time per image (uncached), and the time\n"
                   "to the first token of a prompt holding the image, without and with the encoding (median of --rounds).\n\n"
                   "With --embeddings, a text encoder (bert; without --model a synthetic one of all-MiniLM-L6's shape):\n"
                   "embedded tokens/s over 256 inputs of 16-256 tokens (median of --rounds; scripts/bench_embeddings.py\n"
                   "compares llama-server --embedding through the same client).\n\n"
                   "With --lora-rank R, four synthetic rank-R adapters on every projection of the model, resident together:\n"
                   "decode through one adapter at batch 1 and over the four at the largest --batch, each against the base\n"
                   "model in the same engine, alternating (median of --rounds).\n\n"
                   "With --deterministic, the cost of [engine] deterministic (batch-invariant kernels): prefill, batch-1\n"
                   "decode and decode at the largest --batch in deterministic mode against the usual kernels, in two\n"
                   "engines measured alternately (median of --rounds).\n";
      return 0;
    } else if (a == "--model" || a == "-m") {
      o.model = value();
    } else if (a == "--backend") {
      o.backend = value();
    } else if (a == "--threads" || a == "-t") {
      o.threads = std::stoll(value());
    } else if (a == "--pp") {
      o.n_prompt = std::stoi(value());
    } else if (a == "--tg") {
      o.n_gen = std::stoi(value());
    } else if (a == "--rounds") {
      o.rounds = std::stoi(value());
    } else if (a == "--reference-tokens") {
      o.reference_tokens = std::stoi(value());
    } else if (a == "--no-grammar") {
      o.grammar = false;
    } else if (a == "--json") {
      o.json_path = value();
    } else if (a == "--image") {
      o.image = value();
    } else if (a == "--embeddings") {
      o.embeddings = true;
    } else if (a == "--lora-rank") {
      o.lora_rank = std::stoll(value());
    } else if (a == "--deterministic") {
      o.deterministic = true;
    } else if (a == "--batch") {
      o.batches.clear();
      std::string list = value();
      for (size_t start = 0; start < list.size();) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        o.batches.push_back(std::stoi(list.substr(start, end - start)));
        start = end + 1;
      }
    } else if (!host.parse(args, i)) {
      std::cerr << "loom bench: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  if (o.n_prompt < 1 || o.n_gen < 2 || o.rounds < 1)
    throw std::runtime_error("--pp must be >= 1, --tg >= 2 and --rounds >= 1");

  Config config = host.load_config();
  if (!o.backend.empty()) config.backend.name = o.backend;
  if (o.threads > 0) config.backend.threads = o.threads;
  if (o.embeddings) return run_embedding_bench(config, o.model, o.rounds, o.json_path);
  if (!o.image.empty()) {
    const std::filesystem::path path = !o.model.empty() ? std::filesystem::path(o.model)
                                       : (!config.model.path.empty() ? std::filesystem::path(config.model.path) : default_model_path());
    return run_image_bench(config, path, o.image, o.rounds, o.json_path);
  }
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  if (o.lora_rank > 0) {
    const std::filesystem::path path = !o.model.empty() ? std::filesystem::path(o.model)
                                       : (!config.model.path.empty() ? std::filesystem::path(config.model.path) : default_model_path());
    return run_lora_bench(config, path, o.lora_rank, o.rounds, o.n_gen, max_batch, o.json_path);
  }
  config.scheduler.max_num_seqs = std::max<int64_t>(config.scheduler.max_num_seqs, max_batch);
  config.scheduler.max_batched_tokens = std::max<int64_t>(config.scheduler.max_batched_tokens, o.n_prompt);
  config.kv.prefix_caching = false;  // random prompts never share a prefix; measure the plain path
  const std::filesystem::path model_path =
      !o.model.empty() ? std::filesystem::path(o.model)
                       : (!config.model.path.empty() ? std::filesystem::path(config.model.path) : default_model_path());
  if (o.deterministic) return run_deterministic_bench(config, model_path, o.rounds, o.n_prompt, o.n_gen, max_batch, o.json_path);
  const int threads = static_cast<int>(config.backend.threads > 0 ? config.backend.threads
                                                                   : std::thread::hardware_concurrency());

  ReadBandwidthProbe probe(threads);

  Engine engine(config, model_path);
  const auto& file = engine.gguf();
  // Bytes a decode step reads: every weight once as the backend holds it, except that an untied
  // embedding table is only looked up (one row), not read whole.
  uint64_t weight_bytes = engine.info().weight_bytes;
  if (!engine.model_info().tied_output) {
    if (const auto* embd = file.find_tensor("token_embd.weight")) weight_bytes -= embd->n_bytes;
  }
  // One token reads only its chosen experts.
  for (const auto& t : file.tensors()) weight_bytes -= uint64_t(double(t.n_bytes) * (1.0 - expert_share(t, engine.model_info())));

  std::cerr << "pp" << o.n_prompt << "...\n";
  run_requests(engine, 1, 8, 2, 1);  // warm-up: first-touch of weights and scratch buffers
  RunResult pp = run_requests(engine, 1, o.n_prompt, 2, 10);
  const double pp_tps = o.n_prompt / pp.prefill_seconds;
  std::cerr << "tg" << o.n_gen << " x " << o.rounds << " rounds, each between memory bandwidth probes...\n";
  const std::vector<DecodeRound> rounds = decode_rounds(engine, probe, o.rounds, o.n_gen, weight_bytes);
  const DecodeRound& middle = rounds[rounds.size() / 2];
  const double tg_tps = middle.tokens_per_s, fraction = middle.fraction;
  nlohmann::json round_list = nlohmann::json::array();
  for (const auto& r : rounds)
    round_list.push_back({{"tokens_per_s", r.tokens_per_s}, {"bandwidth_gb_s", r.bandwidth / 1e9}, {"bandwidth_fraction", r.fraction}});

  nlohmann::json batches = nlohmann::json::array();
  const uint64_t macs_per_token = matmul_macs_per_token(file, engine.model_info());
  for (int b : o.batches) {
    std::cerr << "decode at batch " << b << "...\n";
    RunResult r = run_requests(engine, b, 16, o.n_gen, 100 * static_cast<uint32_t>(b));
    const double tps = static_cast<double>(r.generated - static_cast<uint64_t>(b)) / r.decode_seconds;
    batches.push_back({{"batch", b}, {"decode_tokens_per_s", tps}, {"speedup_vs_batch1", tps / tg_tps},
                       {"matmul_macs_per_s", tps * double(macs_per_token)}});
    if (const double ops = r.decode_moe.matmuls; ops > 0) {
      // Per MoE matmul of a decode step (gate, up or down of one layer): expert matrices read, and the
      // (token, expert) rows each read served; without grouping every row would be a read.
      const double reads = r.decode_moe.expert_reads, rows = r.decode_moe.rows;
      batches.back()["moe"] = {{"matmuls", ops}, {"expert_reads_per_matmul", reads / ops},
                               {"rows_per_matmul", rows / ops}, {"rows_per_expert_read", reads > 0 ? rows / reads : 0.0}};
    }
  }

  // Structured output: the share of a decode step that grammar masks take, with a JSON schema whose
  // answer is long (an array of at least 64 strings), at batch 1 and the largest batch asked for.
  nlohmann::json grammar = nullptr;
  // The arithmetic side of batched decode: the CPU's multiply-add peaks, measured now, beside what
  // each batch size reached.
  nlohmann::json compute = nullptr;
  if (engine.info().backend_name == "cpu") {
    std::cerr << "int8 and float multiply-add peaks...\n";
    const ComputePeak peak = measure_compute_peak(threads);
    compute = {{"matmul_macs_per_token", macs_per_token},
               {"int8_peak_macs_per_s", peak.int8_macs_per_s},
               {"int8_instructions", peak.int8_instructions},
               {"f32_peak_macs_per_s", peak.f32_macs_per_s}};
    for (auto& b : batches) {
      b["int8_peak_fraction"] = b["matmul_macs_per_s"].get<double>() / peak.int8_macs_per_s;
      if (peak.f32_macs_per_s > 0) b["f32_peak_fraction"] = b["matmul_macs_per_s"].get<double>() / peak.f32_macs_per_s;
    }
  }

  if (o.grammar && structured_output_available()) {
    const auto schema = engine.compile_constraint(GrammarSpec{GrammarSpec::Kind::json_schema,
        R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"string","maxLength":8},"minItems":64}},"required":["items"]})", {}});
    grammar = nlohmann::json::array();
    for (int b : {1, max_batch}) {
      std::cerr << "decode at batch " << b << " with and without a JSON-schema grammar...\n";
      // The same run (prompt, length, batch) with and without the grammar: wall time per engine step.
      const auto step_time = [&](std::shared_ptr<const CompiledConstraint> constraint, uint64_t* steps_out) {
        const EngineStats before = engine.stats();
        const auto start = Clock::now();
        run_requests(engine, b, 16, o.n_gen, 500 + static_cast<uint32_t>(b), constraint);
        const double wall = std::chrono::duration<double>(Clock::now() - start).count();
        *steps_out = engine.stats().steps - before.steps;
        return *steps_out ? wall / double(*steps_out) : 0.0;
      };
      uint64_t plain_steps = 0, steps = 0;
      const double plain = step_time(nullptr, &plain_steps);
      const EngineStats before = engine.stats();
      const double constrained = step_time(schema, &steps);
      const EngineStats after = engine.stats();
      const uint64_t masked_steps = after.grammar_steps - before.grammar_steps;
      const double mask_ms = masked_steps ? 1e3 * (after.grammar_seconds - before.grammar_seconds) / double(masked_steps) : 0.0;
      grammar.push_back({{"batch", b}, {"steps", steps}, {"mask_ms_per_step", mask_ms}, {"step_ms", 1e3 * constrained},
                         {"step_ms_without", 1e3 * plain}, {"step_ratio", plain > 0 ? constrained / plain : 0.0}});
      if (b == max_batch) break;
    }
  }

  nlohmann::json reference = nullptr;
  if (o.reference_tokens > 0 && engine.info().backend_name == "cpu") {
    std::cerr << "reference kernels, " << o.reference_tokens << "-token prefill...\n";
    auto [ref_tps, fast_tps] = reference_comparison(config, model_path, config.backend.name, o.reference_tokens, threads);
    reference = {{"tokens", o.reference_tokens}, {"reference_tokens_per_s", ref_tps},
                 {"fast_tokens_per_s", fast_tps}, {"speedup", fast_tps / ref_tps}};
  }

  nlohmann::json report = {
      {"model", model_path.string()},
      {"backend", engine.info().backend_name},
      {"device", engine.info().device_name},
      {"threads", threads},
      {"memory_bandwidth_gb_s", middle.bandwidth / 1e9},
      {"weight_bytes_per_token", weight_bytes},
      {"pp", {{"tokens", o.n_prompt}, {"tokens_per_s", pp_tps}}},
      {"tg", {{"tokens", o.n_gen}, {"tokens_per_s", tg_tps}, {"bandwidth_fraction", fraction}, {"rounds", round_list}}},
      {"batched_decode", batches},
      {"compute_peak", compute},
      {"prefill_vs_reference", reference},
      {"grammar_masks", grammar}};
  auto stats = engine.stats();
  if (stats.draft_tokens_proposed > 0) {
    report["speculative"] = {{"proposed", stats.draft_tokens_proposed}, {"accepted", stats.draft_tokens_accepted}};
  }

  std::cout << std::fixed << std::setprecision(2);
  std::cout << "model      " << model_path.filename().string() << " on " << engine.info().backend_name << " ("
            << engine.info().device_name << "), " << threads << " threads\n";
  const auto [slowest, fastest] = std::minmax_element(
      rounds.begin(), rounds.end(), [](const DecodeRound& a, const DecodeRound& b) { return a.bandwidth < b.bandwidth; });
  std::cout << "bandwidth  " << middle.bandwidth / 1e9 << " GB/s measured around the median round (read, " << threads
            << " threads; " << slowest->bandwidth / 1e9 << "-" << fastest->bandwidth / 1e9 << " over the rounds)\n";
  std::cout << "pp" << o.n_prompt << "      " << pp_tps << " tokens/s\n";
  std::cout << "tg" << o.n_gen << "      " << tg_tps << " tokens/s  = " << weight_bytes / 1e6 << " MB/token x "
            << tg_tps << " = " << 100.0 * fraction << "% of measured bandwidth (median of " << rounds.size()
            << " rounds: " << 100.0 * rounds.front().fraction << "-" << 100.0 * rounds.back().fraction << "%)\n";
  for (const auto& b : batches) {
    std::cout << "batch " << std::setw(3) << b["batch"].get<int>() << "  " << b["decode_tokens_per_s"].get<double>()
              << " tokens/s (" << b["speedup_vs_batch1"].get<double>() << "x batch 1)";
    if (b.contains("moe")) {
      const auto& m = b["moe"];
      std::cout << "; experts read per MoE matmul " << m["expert_reads_per_matmul"].get<double>() << " of "
                << engine.model_info().n_expert << " for " << m["rows_per_matmul"].get<double>() << " token-expert rows ("
                << m["rows_per_expert_read"].get<double>() << " rows per read)";
    }
    if (b.contains("int8_peak_fraction")) {
      std::cout << ": matmuls " << b["matmul_macs_per_s"].get<double>() / 1e9 << " G multiply-adds/s = "
                << 100.0 * b["int8_peak_fraction"].get<double>() << "% of the int8 peak";
      if (b.contains("f32_peak_fraction")) std::cout << ", " << 100.0 * b["f32_peak_fraction"].get<double>() << "% of the f32 FMA peak";
    }
    std::cout << "\n";
  }
  if (compute.is_object()) {
    std::cout << "peaks      int8 " << compute["int8_peak_macs_per_s"].get<double>() / 1e9 << " G multiply-adds/s ("
              << compute["int8_instructions"].get<std::string>() << "), f32 FMA " << compute["f32_peak_macs_per_s"].get<double>() / 1e9
              << ", measured on " << threads << " threads; " << compute["matmul_macs_per_token"].get<uint64_t>() / 1e6
              << " M matmul multiply-adds per token\n";
  }
  if (grammar.is_array()) {
    for (const auto& g : grammar) {
      std::cout << "grammar    batch " << g["batch"].get<int>() << ": step " << g["step_ms"].get<double>() << " ms with a JSON schema vs "
                << g["step_ms_without"].get<double>() << " ms without = " << g["step_ratio"].get<double>()
                << "x (limit 1.10x); masks and matcher " << g["mask_ms_per_step"].get<double>() << " ms of it\n";
    }
  }
  if (!reference.is_null()) {
    std::cout << "prefill    fast " << reference["fast_tokens_per_s"].get<double>() << " vs reference "
              << reference["reference_tokens_per_s"].get<double>() << " tokens/s = "
              << reference["speedup"].get<double>() << "x (" << o.reference_tokens << " tokens)\n";
  }
  if (!o.json_path.empty()) {
    std::ofstream(o.json_path) << report.dump(2) << "\n";
    std::cout << "wrote " << o.json_path << "\n";
  }
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("bench", "prefill/decode speed vs measured memory bandwidth and reference kernels", run_bench);

}  // namespace loom::host
