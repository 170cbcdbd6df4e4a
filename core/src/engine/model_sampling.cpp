#include "engine/model_sampling.h"

namespace loom {

SamplerSettings with_model_sampling(const SamplerSettings& settings, const std::set<std::string>& given, const gguf::GgufFile& file) {
  SamplerSettings s = settings;
  // general.sampling key, loom.toml key, where it goes, and loom.toml's range for it.
  struct Entry {
    const char* gguf;
    const char* toml;
    double lo, hi;
    void (*store)(SamplerSettings&, double);
  };
  static const Entry entries[] = {
      {"general.sampling.temp", "temperature", 0.0, 100.0, [](SamplerSettings& t, double v) { t.temperature = v; }},
      {"general.sampling.top_k", "top_k", 0.0, double(1 << 24), [](SamplerSettings& t, double v) { t.top_k = int64_t(v); }},
      {"general.sampling.top_p", "top_p", 1e-6, 1.0, [](SamplerSettings& t, double v) { t.top_p = v; }},
      {"general.sampling.min_p", "min_p", 0.0, 1.0, [](SamplerSettings& t, double v) { t.min_p = v; }},
      {"general.sampling.penalty_repeat", "repetition_penalty", 1e-3, 100.0, [](SamplerSettings& t, double v) { t.repetition_penalty = v; }},
      {"general.sampling.penalty_last_n", "penalty_last_n", 0.0, double(1 << 20), [](SamplerSettings& t, double v) { t.penalty_last_n = int64_t(v); }},
  };
  for (const Entry& e : entries) {
    if (given.count(std::string("sampler.") + e.toml) != 0) continue;
    const std::optional<double> v = file.get_float(e.gguf);
    if (v && *v >= e.lo && *v <= e.hi) e.store(s, *v);
  }
  return s;
}

}  // namespace loom
