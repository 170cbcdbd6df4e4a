#include "lora/synth_lora.h"

#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "gguf/block_quantize.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "lora/lora_adapter.h"

namespace loom {

namespace {

constexpr const char* kShortNames[kLoraTargets] = {"q", "k", "v", "o", "gate", "up", "down"};

std::vector<bool> chosen_targets(const std::string& list) {
  std::vector<bool> chosen(kLoraTargets, false);
  std::stringstream s(list);
  for (std::string item; std::getline(s, item, ',');) {
    bool known = false;
    for (int t = 0; t < kLoraTargets; t++) {
      if (item == kShortNames[t] || item == lora_target_name(LoraTarget(t))) chosen[size_t(t)] = known = true;
    }
    if (!known) throw Error("--targets: unknown projection '" + item + "' (q, k, v, o, gate, up, down)");
  }
  return chosen;
}

}  // namespace

int write_synthetic_lora(const std::filesystem::path& base, const SynthLoraSpec& spec, const std::filesystem::path& out) {
  if (spec.rank < 1) throw Error("--rank must be at least 1");
  if (spec.type != LOOM_DTYPE_F32 && spec.type != LOOM_DTYPE_F16) throw Error("--type: synthetic adapters are F32 or F16");
  const gguf::GgufFile model = gguf::GgufFile::open(base);
  const std::string arch = model.get_string("general.architecture").value_or("");
  const std::vector<bool> chosen = chosen_targets(spec.targets);
  gguf::GgufWriter writer;
  writer.set_string("general.architecture", arch);
  writer.set_string("general.type", "adapter");
  writer.set_string("general.name", "synthetic LoRA rank " + std::to_string(spec.rank));
  writer.set_string("adapter.type", "lora");
  writer.set_float32("adapter.lora.alpha", spec.alpha > 0.0f ? spec.alpha : float(spec.rank));
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int n = 0;
  for (const gguf::TensorInfo& t : model.tensors()) {
    // blk.N.<target>.weight of two dimensions: the projections an adapter can target.
    if (!t.name.starts_with("blk.") || !t.name.ends_with(".weight") || t.dims.size() != 2) continue;
    const std::string stem = t.name.substr(0, t.name.size() - 7);
    int target = -1;
    for (int i = 0; i < kLoraTargets; i++)
      if (chosen[size_t(i)] && stem.ends_with(std::string(".") + lora_target_name(LoraTarget(i)))) target = i;
    if (target < 0) continue;
    const int64_t n_in = t.dims[0], n_out = t.dims[1], r = spec.rank;
    // A ~ N(0, 1/n_in) keeps A x near unit size; B ~ N(0, 0.5/r) then moves each output by about half
    // the base projection's size at a scale of alpha / rank = 1: a delta every test can see.
    std::vector<float> a(size_t(n_in * r)), b(size_t(r * n_out));
    for (float& v : a) v = normal(rng) / std::sqrt(float(n_in));
    for (float& v : b) v = normal(rng) * 0.5f / std::sqrt(float(r));
    writer.add_tensor(t.name + ".lora_a", spec.type, {n_in, r}, quantize_rows(spec.type, a, n_in));
    writer.add_tensor(t.name + ".lora_b", spec.type, {r, n_out}, quantize_rows(spec.type, b, r));
    n++;
  }
  if (n == 0) throw Error(base.string() + ": no attention or FFN projection of the chosen targets to adapt");
  writer.write(out);
  return n;
}

}  // namespace loom
