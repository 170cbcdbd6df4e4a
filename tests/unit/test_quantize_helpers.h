// Shared by the [quantize] and [perplexity] tests: the real quantizer and CPU backend plugins from the
// build, a synthetic model whose rows fit every block size, and perplexity over tests/data text.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "backend/backend.h"
#include "config/config.h"
#include "eval/perplexity.h"
#include "gguf/gguf_file.h"
#include "gguf/synth_model.h"
#include "model/model.h"
#include "quantize/quantizer.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace loom::test {

inline Config plugin_config() {
  Config config;
  config.plugins.search_path = {plugin_build_dir().string()};
  return config;
}

inline std::unique_ptr<Quantizer> make_quantizer() {
  return Quantizer::create(find_plugin(plugin_config(), LOOM_PLUGIN_KIND_QUANTIZER, "quant"));
}

inline std::unique_ptr<Backend> make_cpu_backend() {
  return Backend::create(find_backend_plugin(plugin_config(), "cpu"), "{\"threads\": 2}");
}

// 2 llama layers with every row length a multiple of 256 (dim 256, ff 512), so Q4_K/Q6_K apply to
// every matrix and nothing falls back.
inline gguf::SynthSpec quant_test_spec() {
  gguf::SynthSpec spec;
  spec.arch = "llama";
  spec.n_layers = 2;
  spec.dim = 256;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ff_dim = 512;
  spec.n_vocab = 512;
  spec.n_ctx = 256;
  spec.seed = 7;
  return spec;
}

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::filesystem::path english_text_path() { return source_dir() / "tests" / "data" / "perplexity_english.txt"; }

// Perplexity of the model file over the first n_chars of the English test text, llama.cpp windows of n_ctx.
inline PerplexityResult model_perplexity(const std::filesystem::path& model_path, Backend& backend, int64_t n_ctx,
                                         size_t n_chars = 2000, loom_dtype kv = LOOM_DTYPE_F32) {
  const auto file = gguf::GgufFile::open(model_path);
  const auto tokenizer = Tokenizer::from_gguf(file);
  auto model = Model::load(file, backend);
  const std::string text = read_text_file(english_text_path()).substr(0, n_chars);
  const auto tokens = tokenizer->encode(text, true, false);
  PerplexityOptions options;
  options.n_ctx = n_ctx;
  options.kv_dtype = kv;
  if (tokenizer->add_bos()) options.bos_id = tokenizer->bos_id();
  return compute_perplexity(*model, tokens, options);
}

}  // namespace loom::test
