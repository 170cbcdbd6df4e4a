// `loom quantize IN.gguf OUT.gguf --type TYPE`: re-encode a model through the quantizer plugin, with a
// progress bar on stderr and a per-tensor error report on stdout. The logic is in core/src/quantize/.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "backend/backend.h"
#include "command.h"
#include "gguf/dtype_traits.h"
#include "host_options.h"
#include "plugin/plugin_registry.h"
#include "quantize/quantize_model.h"
#include "quantize/quantizer.h"
#include "progress_bar.h"

namespace loom::host {

namespace {

const char* kUsage =
    "usage: loom quantize IN.gguf OUT.gguf --type TYPE [options]\n"
    "\n"
    "Re-encodes every tensor of IN through the quantizer plugin: matrices become TYPE, 1-D tensors\n"
    "(norms, biases) F32, token_embd/output the embedding type; all metadata is copied and\n"
    "general.file_type set. A row length TYPE's block does not divide falls back as llama.cpp's does\n"
    "(Q2_K/Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, IQ4_XS to IQ4_NL, others to Q8_0; then F16).\n"
    "Re-quantizing an already quantized model adds the new format's error to the old one.\n"
    "IN may also be a Hugging Face folder Loom reads (config.json, safetensors, tokenizer.json: bert so\n"
    "far): the GGUF llama.cpp's converter would write, without Python or torch (--type F32 keeps the\n"
    "checkpoint's values).\n"
    "\n"
    "options:\n"
    "  --type TYPE             Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS\n"
    "                          (byte for byte as ggml writes them), F16, BF16, F32 (decodes a\n"
    "                          quantized file), I4_G128 (Loom-only),\n"
    "                          I8_ROW (Loom-only); or one of llama.cpp's mixes Q3_K_S, Q3_K_M, Q3_K_L,\n"
    "                          Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M: the tensor types and bytes llama-quantize\n"
    "                          chooses (more bits for attn_v, ffn_down and the output matrix)\n"
    "  --keep-embeddings K     token_embd/output type: F16, Q8_0 or same (= TYPE). Default: Q8_0 for\n"
    "                          the 4-bit types and I8_ROW, TYPE otherwise\n"
    "  --calibration FILE      text whose token statistics weight the I4_G128 fit of attn_q/k/v and\n"
    "                          ffn_gate/up. EXPERIMENTAL: an embedding-based approximation of AWQ's\n"
    "                          statistics that measured worse than none on Gemma 3 270M\n"
    "                          (see core/src/quantize/calibration.h)\n"
    "  --as-converter          loom convert's rules: tensors already in a block type (a GPTQ / AWQ /\n"
    "                          compressed-tensors folder's layers, gpt-oss's MXFP4 experts) copied as they\n"
    "                          are, biases and routers F32 (as llama.cpp's converter writes them)\n"
    "  --simulate              store I4_G128/I8_ROW tensors as F32 holding their decoded values, so a\n"
    "                          backend without their kernels can measure their quality (loom perplexity)\n"
    "  --force                 replace OUT if it exists (the input is never overwritten)\n"
    "  --threads N             worker threads (default: all cores)\n"
    "  --quantizer NAME        quantizer plugin (default: [quant] plugin, \"quant\")\n"
    "  --quiet                 no per-tensor report\n"
    "  --config FILE           loom.toml to read\n"
    "  --                      end of options: what follows is IN/OUT, even if it starts with '-'\n";

int64_t parse_count(const std::string& option, const std::string& value) {
  try {
    size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used == value.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error("option " + option + " needs a positive integer, got '" + value + "'");
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

void print_report(const QuantizeReport& report, bool per_tensor) {
  if (per_tensor) {
    std::printf("%-34s %-16s %-7s -> %-8s %10s %10s  %s\n", "tensor", "dims", "from", "to", "rel.RMS", "rel.max",
                "note");
    for (const auto& t : report.tensors) {
      const bool copied = t.plan.action == TensorAction::copy;
      std::printf("%-34s %-16s %-7s -> %-8s %10.3e %10.3e  %s%s%s\n", t.plan.name.c_str(), dims_text(t.plan.dims).c_str(),
                  dtype_name(t.plan.from).c_str(), dtype_name(t.plan.to).c_str(), t.rel_rms_error, t.rel_max_error,
                  copied ? "copied unchanged" : "", copied && !t.plan.note.empty() ? "; " : "",
                  (t.plan.note + (t.used_importance ? (t.plan.note.empty() ? "" : "; ") + std::string("importance")
                                                    : std::string()))
                      .c_str());
    }
  }
  // Error summary over the converted matrices, weighted by element count.
  double weighted = 0.0, n = 0.0, worst = 0.0;
  size_t n_fallback = 0;
  for (const auto& t : report.tensors) {
    if (t.plan.is_fallback) ++n_fallback;
    if (t.plan.action == TensorAction::copy || t.plan.n_rows == 1) continue;
    const double elems = double(t.plan.n_rows) * double(t.plan.n_cols);
    weighted += t.rel_rms_error * t.rel_rms_error * elems;
    n += elems;
    worst = std::max(worst, t.rel_rms_error);
  }
  const double mib = 1024.0 * 1024.0;
  std::printf("\n%zu tensors, %lld weights: %.2f MiB -> %.2f MiB (%.2f bits/weight), general.file_type = %u\n",
              report.tensors.size(), static_cast<long long>(report.n_weights), double(report.bytes_in) / mib,
              double(report.bytes_out) / mib,
              report.n_weights ? 8.0 * double(report.bytes_out) / double(report.n_weights) : 0.0, report.file_type);
  if (n > 0) {
    std::printf("re-encoded matrices: rel. RMS error %.3e overall (sqrt of the element-weighted mean square), worst "
                "tensor %.3e\n",
                std::sqrt(weighted / n), worst);
  }
  if (n_fallback) std::printf("%zu tensors fell back to a higher-precision type (see the notes)\n", n_fallback);
  if (report.n_calibration_tokens) {
    std::printf("importance from %lld calibration tokens\n", static_cast<long long>(report.n_calibration_tokens));
  }
  std::printf("done in %.1f s\n", report.seconds);
}

int run_quantize(const CommandArgs& args) {
  HostOptions host_options;
  QuantizeOptions options;
  std::string type_name, quantizer_name;
  bool keep_embeddings_given = false;
  bool quiet = false;
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw std::runtime_error("option " + a + " needs a value");
      return args[++i];
    };
    if (end_of_options(args, i, positional)) break;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (host_options.parse(args, i)) {
    } else if (a == "--type") {
      type_name = value();
    } else if (a == "--keep-embeddings") {
      options.embeddings = parse_embedding_policy(value());
      keep_embeddings_given = true;
    } else if (a == "--calibration") {
      options.calibration = value();
    } else if (a == "--as-converter") {
      options.as_converter = true;
    } else if (a == "--simulate") {
      options.simulate = true;
    } else if (a == "--force" || a == "-f") {
      options.force = true;
    } else if (a == "--threads" || a == "-t") {
      threads = parse_count(a, value());
    } else if (a == "--quantizer") {
      quantizer_name = value();
    } else if (a == "--quiet" || a == "-q") {
      quiet = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "loom quantize: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2 || type_name.empty()) {
    std::cerr << "loom quantize: need IN.gguf, OUT.gguf and --type\n" << kUsage;
    return 2;
  }
  options.input = positional[0];
  options.output = positional[1];
  options.mix = find_quant_mix(type_name);
  if (options.mix && keep_embeddings_given) {
    std::cerr << "loom quantize: --keep-embeddings does not apply to the mix " << options.mix->name
              << ", whose rules choose the output and embedding types\n";
    return 2;
  }
  options.target = options.mix ? options.mix->base : parse_quantize_target(type_name);
  options.n_threads = static_cast<int>(std::min<int64_t>(threads, 256));
  // Fail on the paths before loading plugins: the cheapest error first.
  check_output_path(options.input, options.output, options.force);

  const Config config = host_options.load_config();
  const auto quantizer = Quantizer::create(
      find_plugin(config, LOOM_PLUGIN_KIND_QUANTIZER, quantizer_name.empty() ? config.quant.plugin : quantizer_name));
  if (is_loom_only_type(options.target)) {
    std::fprintf(stderr, "note: %s is a Loom-only format; llama.cpp cannot read the output\n",
                 dtype_name(options.target).c_str());
  }
  ProgressBar bar("quantize", "tensors");
  const QuantizeReport report = quantize_model(options, *quantizer, [&bar](size_t done, size_t total, const std::string& tensor) {
    bar.update(done, total, tensor);
  });
  bar.finish();
  print_report(report, !quiet);
  std::printf("wrote %s\n", options.output.string().c_str());
  return 0;
}

const char* kConvertUsage =
    "usage: loom convert DIR OUT.gguf [--type TYPE] [loom quantize's options]\n"
    "\n"
    "Writes a Hugging Face model folder (config.json, safetensors, tokenizer.json; the families Loom reads,\n"
    "docs/models.md) as the GGUF llama.cpp's converter writes, without Python or torch: llama.cpp and\n"
    "Loom load it. TYPE is F16 unless given (llama.cpp's converter's default), every matrix including the\n"
    "embeddings; F32 keeps the checkpoint's values, any `loom quantize` type quantizes on the way.\n"
    "Without --type, the layers of a quantized checkpoint (GPTQ, AWQ, compressed-tensors), which Loom\n"
    "repacks exactly into Q4_0, Q5_0 or Q8_0 blocks, are written as those blocks, and gpt-oss's MXFP4\n"
    "experts as MXFP4; biases and routers are F32 whatever the type (--as-converter).\n";

// loom quantize with a converter's defaults: F16 throughout unless the caller names a type.
int run_convert(const CommandArgs& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kConvertUsage;
      return 0;
    }
  CommandArgs forwarded = args;
  // Options first: a "--" in the caller's arguments ends them.
  if (std::find(args.begin(), args.end(), "--type") == args.end()) forwarded.insert(forwarded.begin(), {"--type", "F16", "--keep-embeddings", "same"});
  forwarded.insert(forwarded.begin(), "--as-converter");
  return run_quantize(forwarded);
}

}  // namespace

LOOM_REGISTER_COMMAND("convert", "write a Hugging Face folder (bert so far) as a GGUF llama.cpp loads (F16 unless --type)", run_convert);
LOOM_REGISTER_COMMAND("quantize", "re-quantize a GGUF model (GGML's Q*_0/1, K-quants, IQ4; F16, BF16; I4_G128, I8_ROW)",
                      run_quantize);

}  // namespace loom::host
