#include <algorithm>
#include <cmath>

#include "stages.h"

namespace loom::samplers {

namespace {

// Probabilities of the sorted set (softmax in double).
void sorted_probs(CandidateSet& set, std::vector<double>& probs) {
  if (!set.is_sorted) {
    std::sort(set.data, set.data + set.n, ranks_before);
    set.is_sorted = true;
  }
  const float max = set.data[0].logit;
  const double total = set.sum_exp(max);
  probs.resize(set.n);
  for (uint32_t i = 0; i < set.n; ++i) probs[i] = std::exp(static_cast<double>(set.data[i].logit - max)) / total;
}

}  // namespace

void mirostat_truncate(CandidateSet& set, const SamplerExtras& x, float mu, uint32_t n_vocab, Scratch& scratch) {
  std::vector<double>& p = scratch.probs;
  sorted_probs(set, p);
  uint32_t keep = set.n;
  if (x.mirostat == 2) {
    // v2: drop the tokens more surprising than mu bits (the most likely one always stays).
    keep = 1;
    while (keep < set.n && -std::log2(p[keep]) <= mu) ++keep;
  } else {
    // v1: estimate the Zipf exponent s from the top m = 100 probabilities, then keep the k tokens
    // whose tail would give a surprise of mu: k = (eps * 2^mu / (1 - N^-eps))^(1/s), eps = s - 1.
    const uint32_t m = std::min<uint32_t>(100, set.n);
    double num = 0.0, den = 0.0;
    for (uint32_t i = 0; i + 1 < m; ++i) {
      const double t = std::log(double(i + 2) / double(i + 1));
      const double b = std::log(p[i] / p[i + 1]);
      num += t * b;
      den += t * t;
    }
    const double s_hat = den > 0.0 ? num / den : 1.0;
    const double eps = s_hat - 1.0;
    const double k = std::pow((eps * std::pow(2.0, mu)) / (1.0 - std::pow(double(n_vocab), -eps)), 1.0 / s_hat);
    keep = std::isfinite(k) ? static_cast<uint32_t>(std::clamp(k, 1.0, double(set.n))) : set.n;
  }
  if (keep < set.n) set.is_identity = false;
  set.n = keep;
}

float mirostat_update(float mu, const SamplerExtras& x, float logprob) {
  const double surprise = -static_cast<double>(logprob) / std::log(2.0);  // bits
  return static_cast<float>(mu - x.mirostat_eta * (surprise - x.mirostat_tau));
}

}  // namespace loom::samplers
