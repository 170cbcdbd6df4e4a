// Pieces shared by the synthetic-model writers: a portable random stream per tensor and a builder
// that writes seeded matrices and norm vectors in llama.cpp's layout.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/block_quantize.h"
#include "gguf/gguf_writer.h"
#include "gguf/synth_model.h"

namespace loom::gguf {

// SplitMix64 + Box-Muller: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  float normal() {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    return static_cast<float>(r * std::cos(2.0 * std::numbers::pi * uniform()));
  }

 private:
  uint64_t state_;
};

// Each tensor has its own stream (seed x name), so adding a tensor never changes the others.
inline uint64_t tensor_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

inline uint32_t llama_file_type(loom_dtype type) {
  switch (type) {
    case LOOM_DTYPE_F16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case LOOM_DTYPE_Q4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case LOOM_DTYPE_Q8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case LOOM_DTYPE_BF16: return 32; // LLAMA_FTYPE_MOSTLY_BF16
    default: return 0;               // LLAMA_FTYPE_ALL_F32
  }
}

class ModelBuilder {
 public:
  ModelBuilder(const SynthSpec& spec, GgufWriter& writer) : spec_(spec), writer_(writer) {}

  // A matrix of n_out rows of n_in (GGUF dims {n_in, n_out}), scaled so x·w keeps x's magnitude.
  void matrix(const std::string& name, int64_t n_in, int64_t n_out, float scale) {
    Rng rng(tensor_seed(spec_.seed, name));
    std::vector<float> values(static_cast<size_t>(n_in * n_out));
    for (float& v : values) v = rng.normal() * scale;
    writer_.add_tensor(name, spec_.weight_type, {n_in, n_out}, quantize_rows(spec_.weight_type, values, n_in));
  }
  // A tensor of any shape (GGUF dims, rows of dims[0]) and type, scaled as `matrix`.
  void matrix_of(loom_dtype type, const std::string& name, std::vector<int64_t> dims, float scale) {
    Rng rng(tensor_seed(spec_.seed, name));
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = rng.normal() * scale;
    writer_.add_tensor(name, type, dims, quantize_rows(type, values, dims[0]));
  }
  // A norm weight near 1 (gemma's converter already stores 1 + w) or a small bias, always F32.
  void vector(const std::string& name, int64_t n, float center, float spread) {
    Rng rng(tensor_seed(spec_.seed, name));
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = center + spread * rng.normal();
    writer_.add_tensor(name, LOOM_DTYPE_F32, {n}, quantize_rows(LOOM_DTYPE_F32, values, n));
  }

 private:
  const SynthSpec& spec_;
  GgufWriter& writer_;
};

}  // namespace loom::gguf
