// `loom gguf info FILE` and `loom gguf synth ...`: inspect GGUF files and write synthetic models.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "command.h"
#include "host_options.h"
#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "gguf/synth_mmproj.h"
#include "gguf/synth_model.h"
#include "lora/synth_lora.h"

namespace {

using loom::host::CommandArgs;

constexpr const char* kUsage =
    "usage: loom gguf info FILE [--all]\n"
    "       loom gguf synth [options] -o OUT\n"
    "       loom gguf synth-mmproj [options] -o OUT\n"
    "       loom gguf synth-lora --model BASE [options] -o OUT\n"
    "Run `loom gguf info --help` or `loom gguf synth --help` for details.\n";

constexpr const char* kInfoHelp =
    "usage: loom gguf info FILE [--all]\n\n"
    "Print a GGUF file's version, alignment, metadata (arrays previewed with their length) and tensor table.\n"
    "  --all    list every tensor (default: the first 64 and a summary)\n"
    "  --       end of options: what follows is FILE, even if it starts with '-'\n";

constexpr const char* kSynthHelp =
    "usage: loom gguf synth [options] -o OUT\n\n"
    "Write a synthetic model with seeded random weights in llama.cpp's GGUF layout.\n"
    "  --arch A          bert | nomic-bert | llama | qwen2 | qwen2vl | qwen2moe | qwen3 | qwen3vl | qwen3moe | qwen35 | qwen35moe | gpt-oss | gemma2 | gemma3 | gemma4 | olmo2 | granite | smollm3 | phi3 | mistral3\n"
    "                    (default llama)\n"
    "  --layers N        block count (default 2)\n"
    "  --dim D           embedding length (default 64)\n"
    "  --heads H         attention heads (default 4)\n"
    "  --kv-heads K      key/value heads (default 2)\n"
    "  --head-dim N      per-head size (default dim / heads)\n"
    "  --ff F            feed-forward length (default 128)\n"
    "  --vocab V         vocabulary size, >= 300 (default 512)\n"
    "  --ctx C           context length (default 256)\n"
    "  --type T          matrix type: F32, F16, BF16, Q8_0, Q4_0 (default F32)\n"
    "  --seed S          random seed (default 1)\n"
    "  --sliding-window N  gemma2/gemma3/gemma4: tokens a local layer sees (default 512)\n"
    "  --yarn-original-ctx N  YaRN extending context N to --ctx (mistral3: with temperature tuning)\n"
    "  --longrope-original-ctx N  phi3: LongRoPE factors extending context N to --ctx (Phi-3.5 style)\n"
    "  --llama3-rope     llama: Llama 3.1's rope frequency factors (rope_freqs.weight) and base 500000\n"
    "  --classifier      bert: a cross-encoder reranker (rank pooling, cls and cls.output heads, one label);\n"
    "                    qwen3: Qwen3-Reranker (rank pooling, a yes/no head, its rerank prompt)\n"
    "  --pooling P       a decoder arch: mean | cls | last, an embedding model (<arch>.pooling_type, Qwen3-Embedding: last)\n"
    "  --experts N       the MoE archs: experts per layer (default 8)\n"
    "  --experts-used N  the MoE archs: experts chosen per token (default 2)\n"
    "  --expert-ff N     the MoE archs: each expert's FFN width (default --ff)\n"
    "  --expert-type T   qwen3moe, gpt-oss: the experts' type, --type, F32 or MXFP4 (default --type)\n"
    "  --vocab-from FILE copy the tokenizer.* metadata (and vocabulary size) from this GGUF\n"
    "  --image-markers   end the synthetic vocabulary with <start_of_image> and <end_of_image> (Gemma 3 vision)\n"
    "  --control-tokens A,B  end it with these control tokens (e.g. Pixtral's [IMG_BREAK],[IMG_END])\n"
    "  -o, --out OUT     output path (required)\n";

constexpr const char* kSynthLoraHelp =
    "usage: loom gguf synth-lora --model BASE [options] -o OUT\n\n"
    "Write a synthetic LoRA adapter of a GGUF model (llama.cpp's adapter layout: general.type adapter,\n"
    "adapter.lora.alpha, blk.N.<projection>.weight.lora_a / .lora_b) with seeded random A and B.\n"
    "  --model BASE      the base model's GGUF file (required)\n"
    "  --rank R          rank of every matrix (default 8)\n"
    "  --alpha A         adapter.lora.alpha (default: the rank, a scale of 1)\n"
    "  --targets LIST    projections to adapt: q,k,v,o,gate,up,down (default all)\n"
    "  --type T          F32 or F16 (default F32)\n"
    "  --seed S          random seed (default 1)\n"
    "  -o, --out OUT     output path (required)\n";

constexpr const char* kSynthMmprojHelp =
    "usage: loom gguf synth-mmproj [options] -o OUT\n\n"
    "Write a synthetic vision projector (llama.cpp's mmproj layout) with seeded random weights.\n"
    "  --projector P     gemma3 (default), mlp (CLIP with LLaVA 1.5's projector), pixtral (any image size)\n"
    "                    idefics3 (SmolVLM: tiles, pixel shuffle), gemma4v (Gemma 4: any size, clamped linears)\n"
    "                    qwen25vl (Qwen2.5-VL: any size, window attention, M-RoPE)\n"
    "                    or qwen3vl (Qwen3-VL: any size, resized positions, M-RoPE, deepstack)\n"
    "  --image-size N    the encoder's square input in pixels (default 224)\n"
    "  --patch N         patch size (default 14)\n"
    "  --dim D           the vision transformer's width (default 64)\n"
    "  --heads H         attention heads (default 4)\n"
    "  --layers N        blocks (default 2)\n"
    "  --ff F            feed-forward width (default 128)\n"
    "  --text-dim T      width of the text model the rows feed (default 128)\n"
    "  --merge K         gemma3: average-pooling kernel (default 4); pixtral: the patch merger's (1: none);\n"
    "                    idefics3: the pixel shuffle's; gemma4v: the pooling kernel\n"
    "  --proj-hidden N   mlp: the projector's inner width (default: --text-dim)\n"
    "  --longest-edge N  idefics3: the image's longest side before tiling (default: 2 x --image-size)\n"
    "  --type T          matrix type: F32, F16, Q8_0 (default F16)\n"
    "  --seed S          random seed (default 1)\n"
    "  -o, --out OUT     output path (required)\n";

bool is_help(const std::string& arg) { return arg == "--help" || arg == "-h"; }

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(n) / (1 << 30));
  else if (n >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(n) / (1 << 20));
  else if (n >= 1024) std::snprintf(buf, sizeof buf, "%.2f KiB", static_cast<double>(n) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

int run_info(const CommandArgs& args) {
  std::string path;
  bool show_all = false;
  std::vector<std::string> after_options;
  for (size_t i = 1; i < args.size(); ++i) {
    if (loom::host::end_of_options(args, i, after_options)) break;
    if (is_help(args[i])) {
      std::cout << kInfoHelp;
      return 0;
    }
    if (args[i] == "--all") {
      show_all = true;
    } else if (path.empty() && !args[i].starts_with("-")) {
      path = args[i];
    } else {
      std::cerr << "loom gguf info: unexpected argument '" << args[i] << "'\n" << kInfoHelp;
      return 1;
    }
  }
  for (const std::string& a : after_options) {
    if (!path.empty()) {
      std::cerr << "loom gguf info: unexpected argument '" << a << "'\n" << kInfoHelp;
      return 1;
    }
    path = a;
  }
  if (path.empty()) {
    std::cerr << "loom gguf info: missing FILE\n" << kInfoHelp;
    return 1;
  }
  const auto file = loom::hf::open_model_file(path);
  std::cout << "file:      " << file.label() << " (" << human_bytes(file.file_size()) << ")\n"
            << "version:   " << file.version() << "\n"
            << "alignment: " << file.alignment() << "\n"
            << "data at:   " << file.data_offset() << "\n\n"
            << "metadata (" << file.metadata().size() << "):\n";
  for (const auto& entry : file.metadata()) {
    std::string type(loom::gguf::value_type_name(entry.value.type));
    std::printf("  %-48s %-8s %s\n", entry.key.c_str(), type.c_str(), file.value_to_string(entry.value).c_str());
  }
  std::map<std::string, std::pair<size_t, uint64_t>> per_type;  // type -> (tensors, bytes)
  uint64_t total_bytes = 0, total_elements = 0;
  for (const auto& tensor : file.tensors()) {
    auto& slot = per_type[loom::dtype_name(tensor.type)];
    ++slot.first;
    slot.second += tensor.n_bytes;
    total_bytes += tensor.n_bytes;
    total_elements += static_cast<uint64_t>(tensor.n_elements);
  }
  std::cout << "\ntensors (" << file.tensors().size() << ", " << total_elements << " elements, "
            << human_bytes(total_bytes) << "):\n";
  std::printf("  %5s  %-40s %-8s %-24s %14s %12s\n", "#", "name", "type", "dims", "offset", "bytes");
  const size_t limit = show_all ? file.tensors().size() : 64;
  for (size_t i = 0; i < file.tensors().size() && i < limit; ++i) {
    const auto& tensor = file.tensors()[i];
    std::string dims;
    for (size_t d = 0; d < tensor.dims.size(); ++d) dims += (d ? " x " : "") + std::to_string(tensor.dims[d]);
    std::printf("  %5zu  %-40s %-8s %-24s %14llu %12llu\n", i, tensor.name.c_str(),
                loom::dtype_name(tensor.type).c_str(), dims.c_str(),
                static_cast<unsigned long long>(tensor.offset), static_cast<unsigned long long>(tensor.n_bytes));
  }
  if (file.tensors().size() > limit) {
    std::cout << "  ... " << file.tensors().size() - limit << " more (use --all)\n";
  }
  std::cout << "\ntensor types:\n";
  for (const auto& [type, count] : per_type) {
    std::printf("  %-8s %5zu tensors %12s\n", type.c_str(), count.first, human_bytes(count.second).c_str());
  }
  return 0;
}

int parse_int(const std::string& flag, const std::string& value) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty() || n < 0 || n > 0x7fffffff) {
    throw loom::Error(flag + ": '" + value + "' is not a non-negative integer");
  }
  return static_cast<int>(n);
}

int run_synth(const CommandArgs& args) {
  loom::gguf::SynthSpec spec;
  std::string out;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (is_help(flag)) {
      std::cout << kSynthHelp;
      return 0;
    }
    if (flag == "--") {
      if (!loom::host::nothing_after_end_of_options("gguf synth", args, i)) return 1;
      break;
    }
    if (flag == "--llama3-rope" || flag == "--image-markers" || flag == "--classifier") {  // the options without a value
      (flag == "--llama3-rope" ? spec.llama3_rope : flag == "--classifier" ? spec.classifier : spec.image_markers) = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "loom gguf synth: " << (flag.starts_with("-") ? flag + " needs a value" : "unexpected '" + flag + "'")
                << "\n" << kSynthHelp;
      return 1;
    }
    const std::string& value = args[++i];
    if (flag == "--pooling") {
      const std::vector<std::string> names = {"none", "mean", "cls", "last"};
      const auto it = std::find(names.begin(), names.end(), value);
      if (it == names.end() || it == names.begin()) {
        std::cerr << "loom gguf synth: --pooling takes mean, cls or last, not '" << value << "'\n";
        return 1;
      }
      spec.pooling = int(it - names.begin());
      continue;
    }
    if (flag == "--arch") spec.arch = value;
    else if (flag == "--control-tokens") {
      for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        if (comma > at) spec.control_tokens.push_back(value.substr(at, comma - at));
        at = comma + 1;
      }
    }
    else if (flag == "--layers") spec.n_layers = parse_int(flag, value);
    else if (flag == "--dim") spec.dim = parse_int(flag, value);
    else if (flag == "--heads") spec.n_heads = parse_int(flag, value);
    else if (flag == "--kv-heads") spec.n_kv_heads = parse_int(flag, value);
    else if (flag == "--head-dim") spec.head_dim = parse_int(flag, value);
    else if (flag == "--ff") spec.ff_dim = parse_int(flag, value);
    else if (flag == "--vocab") spec.n_vocab = parse_int(flag, value);
    else if (flag == "--ctx") spec.n_ctx = parse_int(flag, value);
    else if (flag == "--seed") spec.seed = static_cast<uint64_t>(parse_int(flag, value));
    else if (flag == "--sliding-window") spec.sliding_window = parse_int(flag, value);
    else if (flag == "--yarn-original-ctx") spec.yarn_original_ctx = parse_int(flag, value);
    else if (flag == "--longrope-original-ctx") spec.longrope_original_ctx = parse_int(flag, value);
    else if (flag == "--experts") spec.n_expert = parse_int(flag, value);
    else if (flag == "--experts-used") spec.n_expert_used = parse_int(flag, value);
    else if (flag == "--expert-ff") spec.expert_ff_dim = parse_int(flag, value);
    else if (flag == "--expert-type") {
      auto type = loom::dtype_from_name(value);
      if (!type) throw loom::Error("--expert-type: unknown type '" + value + "' (the --type, F32 or MXFP4)");
      spec.expert_type = *type;
    }
    else if (flag == "--vocab-from") spec.vocab_from = value;
    else if (flag == "-o" || flag == "--out") out = value;
    else if (flag == "--type") {
      auto type = loom::dtype_from_name(value);
      if (!type) throw loom::Error("--type: unknown type '" + value + "' (F32, F16, BF16, Q8_0, Q4_0)");
      spec.weight_type = *type;
    } else {
      std::cerr << "loom gguf synth: unknown option '" << flag << "'\n" << kSynthHelp;
      return 1;
    }
  }
  if (out.empty()) {
    std::cerr << "loom gguf synth: missing -o OUT\n" << kSynthHelp;
    return 1;
  }
  loom::gguf::write_synthetic_model(spec, out);
  const auto file = loom::gguf::GgufFile::open(out);  // read back: the file we promise is valid
  std::cout << "wrote " << out << ": " << spec.arch << ", " << file.tensors().size() << " tensors, "
            << human_bytes(file.file_size()) << "\n";
  return 0;
}

int run_synth_mmproj(const CommandArgs& args) {
  loom::gguf::SynthMmprojSpec spec;
  std::string out;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (is_help(flag)) {
      std::cout << kSynthMmprojHelp;
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "loom gguf synth-mmproj: " << (flag.starts_with("-") ? flag + " needs a value" : "unexpected '" + flag + "'")
                << "\n" << kSynthMmprojHelp;
      return 1;
    }
    const std::string& value = args[++i];
    if (flag == "--projector") spec.projector = value;
    else if (flag == "--image-size") spec.image_size = parse_int(flag, value);
    else if (flag == "--patch") spec.patch_size = parse_int(flag, value);
    else if (flag == "--dim") spec.dim = parse_int(flag, value);
    else if (flag == "--heads") spec.n_heads = parse_int(flag, value);
    else if (flag == "--layers") spec.n_layers = parse_int(flag, value);
    else if (flag == "--ff") spec.ff_dim = parse_int(flag, value);
    else if (flag == "--text-dim") spec.n_embd_text = parse_int(flag, value);
    else if (flag == "--merge") spec.merge = parse_int(flag, value);
    else if (flag == "--proj-hidden") spec.proj_hidden = parse_int(flag, value);
    else if (flag == "--longest-edge") spec.longest_edge = parse_int(flag, value);
    else if (flag == "--seed") spec.seed = static_cast<uint64_t>(parse_int(flag, value));
    else if (flag == "-o" || flag == "--out") out = value;
    else if (flag == "--type") {
      auto type = loom::dtype_from_name(value);
      if (!type) throw loom::Error("--type: unknown type '" + value + "' (F32, F16, Q8_0)");
      spec.weight_type = *type;
    } else {
      std::cerr << "loom gguf synth-mmproj: unknown option '" << flag << "'\n" << kSynthMmprojHelp;
      return 1;
    }
  }
  if (out.empty()) {
    std::cerr << "loom gguf synth-mmproj: missing -o OUT\n" << kSynthMmprojHelp;
    return 1;
  }
  loom::gguf::write_synthetic_mmproj(spec, out);
  const auto file = loom::gguf::GgufFile::open(out);
  std::cout << "wrote " << out << ": " << spec.projector << " mmproj, " << file.tensors().size() << " tensors, "
            << human_bytes(file.file_size()) << "\n";
  return 0;
}

int run_synth_lora(const CommandArgs& args) {
  loom::SynthLoraSpec spec;
  std::string out, base;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (is_help(flag)) {
      std::cout << kSynthLoraHelp;
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "loom gguf synth-lora: " << (flag.starts_with("-") ? flag + " needs a value" : "unexpected '" + flag + "'") << "\n"
                << kSynthLoraHelp;
      return 1;
    }
    const std::string& value = args[++i];
    if (flag == "--model") base = value;
    else if (flag == "--rank") spec.rank = parse_int(flag, value);
    else if (flag == "--alpha") spec.alpha = float(parse_int(flag, value));
    else if (flag == "--targets") spec.targets = value;
    else if (flag == "--seed") spec.seed = static_cast<uint64_t>(parse_int(flag, value));
    else if (flag == "-o" || flag == "--out") out = value;
    else if (flag == "--type") {
      auto type = loom::dtype_from_name(value);
      if (!type) throw loom::Error("--type: unknown type '" + value + "' (F32, F16)");
      spec.type = *type;
    } else {
      std::cerr << "loom gguf synth-lora: unknown option '" << flag << "'\n" << kSynthLoraHelp;
      return 1;
    }
  }
  if (out.empty() || base.empty()) {
    std::cerr << "loom gguf synth-lora: " << (base.empty() ? "missing --model BASE" : "missing -o OUT") << "\n" << kSynthLoraHelp;
    return 1;
  }
  const int n = loom::write_synthetic_lora(base, spec, out);
  std::cout << "wrote " << out << ": rank " << spec.rank << " LoRA adapter of " << n << " matrices\n";
  return 0;
}

int run_gguf(const CommandArgs& args) {
  if (args.empty() || is_help(args[0])) {
    (args.empty() ? std::cerr : std::cout) << kUsage;
    return args.empty() ? 1 : 0;
  }
  try {
    if (args[0] == "info") return run_info(args);
    if (args[0] == "synth") return run_synth(args);
    if (args[0] == "synth-mmproj") return run_synth_mmproj(args);
    if (args[0] == "synth-lora") return run_synth_lora(args);
  } catch (const loom::Error& e) {
    std::cerr << "loom gguf " << args[0] << ": error: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "loom gguf: unknown subcommand '" << args[0] << "'\n" << kUsage;
  return 1;
}

}  // namespace

LOOM_REGISTER_COMMAND("gguf", "inspect GGUF files (info) and write synthetic models (synth)", run_gguf);
