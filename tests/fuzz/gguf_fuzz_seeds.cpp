// Writes the seed corpus of gguf_fuzz: small valid files from the GGUF writer and the synthesizer.
#include <cstdio>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    std::filesystem::create_directories(dir);
    loom::gguf::GgufWriter small;
    small.set_string("general.architecture", "llama");
    small.set_uint32("llama.block_count", 1);
    small.set_float32("llama.rope.freq_base", 10000.0f);
    small.set_bool("flag", true);
    small.set_string_array("tokenizer.ggml.tokens", {"a", "b", "<0x00>"});
    small.set_int32_array("tokenizer.ggml.token_type", {1, 1, 6});
    small.add_tensor("a", LOOM_DTYPE_F32, {4, 2}, std::vector<uint8_t>(32, 1));
    small.add_tensor("b", LOOM_DTYPE_Q8_0, {32}, std::vector<uint8_t>(34, 2));
    small.write(dir / "small.gguf");

    loom::gguf::GgufWriter aligned(64);
    aligned.set_uint64("x", 1);
    aligned.add_tensor("t", LOOM_DTYPE_F16, {3}, std::vector<uint8_t>(6, 3));
    aligned.write(dir / "aligned64.gguf");

    for (const char* arch : {"llama", "qwen2", "gemma3"}) {
      loom::gguf::SynthSpec spec;
      spec.arch = arch;
      spec.n_layers = 1;
      spec.dim = 32;
      spec.n_heads = 2;
      spec.n_kv_heads = 1;
      spec.ff_dim = 32;
      spec.n_vocab = 300;
      spec.weight_type = LOOM_DTYPE_Q4_0;
      loom::gguf::write_synthetic_model(spec, dir / (std::string(arch) + ".gguf"));
    }
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "gguf_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
