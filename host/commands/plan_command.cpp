// `loom plan [--model FILE] [--ctx N] [--kv-type T] [--memory SIZE]`: will it fit? Reads only the
// GGUF header (no weights loaded) and prints the weight memory, the KV bytes per token of each layer
// group, the pool the engine would lay out (window rings for sliding-window layers, kv_plan.h), and
// how many sequences of 2k / 8k / 32k tokens (and --ctx) run at once in it, beside the number with
// every layer keeping every token ([kv] sliding_layers = "full").
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "hf/hf_checkpoint.h"
#include "command.h"
#include "common/error.h"
#include "engine/kv_plan.h"
#include "gguf/gguf_file.h"
#include "host_options.h"
#include "model/default_model.h"
#include "model/model_info.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom plan [--model FILE] [--ctx N] [--kv-type f16|f32|int8|q8_0|q4_0|fp8_e4m3] [--memory SIZE] [--config FILE]\n\n"
    "Prints what a model needs without loading it: weight memory, KV bytes per token for each layer group\n"
    "(full attention, sliding window, recurrent state), and how many sequences of 2048, 8192 and 32768\n"
    "tokens (and --ctx N) fit in the KV pool.\n"
    "  --model FILE    GGUF model (default: [model] path, $LOOM_MODEL, the installed default model)\n"
    "  --ctx N         also plan sequences of N tokens\n"
    "  --kv-type T     KV cache type: f16, f32, int8, q8_0, q4_0, fp8_e4m3 (default: [kv] dtype)\n"
    "  --memory SIZE   KV pool size such as 512MiB or 4GiB (default: [kv] memory)\n";

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

int run_plan(const CommandArgs& args) {
  HostOptions options;
  std::string model, kv_type, memory;
  std::vector<uint64_t> lengths = {2048, 8192, 32768};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options.parse(args, i)) continue;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--") {
      if (!nothing_after_end_of_options("plan", args, i)) return 2;
      break;
    }
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw Error(a + " needs a value");
      return args[++i];
    };
    if (a == "--model" || a == "-m") {
      model = value();
    } else if (a == "--ctx") {
      const std::string& n = value();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || std::stoull(n) == 0) {
        throw Error("--ctx must be a positive number of tokens, not '" + n + "'");
      }
      lengths.push_back(std::stoull(n));
    } else if (a == "--kv-type") {
      kv_type = value();
    } else if (a == "--memory") {
      memory = value();
    } else {
      std::cerr << "loom plan: unknown argument '" << a << "'\n" << kUsage;
      return 2;
    }
  }
  Config config = options.load_config();
  if (!model.empty()) config.model.path = model;
  if (!kv_type.empty()) {
    if (kv_type != "f16" && kv_type != "f32" && kv_type != "int8" && kv_type != "q8_0" && kv_type != "q4_0" &&
        kv_type != "fp8_e4m3" && kv_type != "fp8") {
      throw Error("--kv-type must be f16, f32, int8, q8_0, q4_0 or fp8_e4m3");
    }
    config.kv.dtype = kv_type;
  }
  const uint64_t pool = memory.empty() ? static_cast<uint64_t>(config.kv.memory_bytes) : static_cast<uint64_t>(parse_byte_size(memory));
  const auto block = static_cast<uint32_t>(config.kv.block_size);
  const auto path = config.model.path.empty() ? default_model_path() : std::filesystem::path(config.model.path);

  const auto file = hf::open_model_file(path);
  const ModelInfo info = read_model_info(file);
  uint64_t weights = 0;
  for (const auto& t : file.tensors()) weights += t.n_bytes;
  const auto groups = kv_layer_groups(info, kv_dtype_from_name(config.kv.dtype));

  std::printf("model      %s (%s, %d layers, trained context %d)\n", path.filename().string().c_str(),
              info.arch_name.c_str(), info.n_layers, info.n_ctx_train);
  std::printf("weights    %s\n", mib(weights).c_str());
  std::printf("KV cache   %s, pool %s in blocks of %u tokens\n", config.kv.dtype.c_str(), mib(pool).c_str(), block);
  std::printf("\n%-16s %7s %9s %16s\n", "layer group", "layers", "window", "per token");
  uint64_t per_token = 0;
  for (const auto& g : groups) {
    per_token += g.bytes_per_token;
    const std::string window = g.window > 0 ? std::to_string(g.window) : "-";
    const std::string need = g.bytes_per_sequence > 0 ? mib(g.bytes_per_sequence) + " per sequence"
                                                      : std::to_string(g.bytes_per_token) + " B";
    std::printf("%-16s %7d %9s %16s\n", g.name.c_str(), g.n_layers, window.c_str(), need.c_str());
  }
  std::printf("%-16s %7s %9s %14llu B\n", "all layers", "", "", static_cast<unsigned long long>(per_token));

  const uint64_t n_ctx = config.model.n_ctx > 0 ? uint64_t(config.model.n_ctx) : uint64_t(std::max(info.n_ctx_train, 1));
  const KvPoolRequest request = kv_pool_request(config, info, n_ctx, pool);
  const KvPoolLayout layout = plan_kv_pool(groups, request);
  KvPoolRequest full_request = request;
  full_request.ring_blocks = 0;
  const KvPoolLayout full = plan_kv_pool(groups, full_request);
  if (layout.ring_blocks > 0) {
    std::printf("\nwindow rings %u of %u tokens (%s each; %u more keep cached prompts' windows), block pool %s\n",
                layout.n_rings, layout.ring_blocks * block, mib(layout.ring_bytes).c_str(), layout.n_ring_checkpoints,
                mib(layout.pool_bytes()).c_str());
  }
  std::printf("\n%-12s %22s %26s\n", "sequence", "run at once", "sliding layers \"full\"");
  for (uint64_t n : lengths) {
    const std::string note = info.n_ctx_train > 0 && n > uint64_t(info.n_ctx_train) ? "  (past the trained context)" : "";
    std::printf("%-12s %22llu %26llu%s\n", (std::to_string(n) + " tokens").c_str(),
                static_cast<unsigned long long>(layout.sequences_of(n)), static_cast<unsigned long long>(full.sequences_of(n)),
                note.c_str());
  }
  if (layout.ring_blocks > 0) {
    std::printf("\nSliding layers keep each running sequence's last window in a ring, so at most %u sequences run at\n"
                "once ([kv] window_seqs); \"full\" keeps every layer's K/V for every token in the pool.\n",
                layout.n_rings);
  }
  std::printf("Recurrent state sits beside the pool, one slot per running sequence.\n");
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("plan", "will it fit: weight and KV memory, sequences that fit per context length", run_plan);

}  // namespace loom::host
