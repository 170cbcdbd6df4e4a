// Conformance cases for the stages of ABI 1.17: top-n-sigma, XTC, DRY and Mirostat. Each is checked
// against an independent reference written here from docs/samplers.md's formulas: out_probs exactly,
// and seeded draws with Pearson's chi-square at alpha = 0.001. XTC at a probability below 1 is a
// mixture (the stage applies to some steps and not others), so its draws are tested against the
// mixture; Mirostat's running target is tested by the surprise it settles at. A host of 1.16 passes
// a shorter struct: the new fields must then read as off.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include "conformance_case.h"
#include "sampler_support.h"

namespace loom::conformance {

using namespace sampler_support;

namespace {

constexpr uint32_t k_vocab = 48;
constexpr uint32_t k_draws = 20000;
constexpr double k_prob_tolerance = 2e-5;

void require_1_17(CaseContext& ctx) {
  if (ctx.plugin->desc().abi_minor < 17) not_supported("top-n-sigma, XTC, DRY and Mirostat are ABI 1.17");
}

std::vector<double> as_double(const std::vector<float>& logits) { return {logits.begin(), logits.end()}; }

// Token ids by descending probability (ties: lower id first).
std::vector<size_t> by_probability(const std::vector<double>& p) {
  std::vector<size_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  return ids;
}

std::vector<double> reference_top_n_sigma(std::vector<double> l, double n) {
  double mean = 0.0, max = -INFINITY;
  for (double x : l) mean += x, max = std::max(max, x);
  mean /= double(l.size());
  double var = 0.0;
  for (double x : l) var += (x - mean) * (x - mean);
  const double threshold = max - n * std::sqrt(var / double(l.size()));
  for (double& x : l)
    if (x < threshold) x = -INFINITY;
  return softmax(l);
}

// XTC when it fires: every token of probability >= threshold but the least likely of them goes.
std::vector<double> reference_xtc_fired(const std::vector<double>& l, double threshold) {
  const std::vector<double> p = softmax(l);
  const std::vector<size_t> ids = by_probability(p);
  size_t above = 0;
  while (above < ids.size() && p[ids[above]] >= threshold) ++above;
  std::vector<double> out = l;
  if (above >= 2)
    for (size_t i = 0; i + 1 < above; ++i) out[ids[i]] = -INFINITY;
  return softmax(out);
}

// DRY by its definition: the token after each earlier occurrence of the history's last token extends a
// repeat as long as the two agree going backwards (no breaker inside).
std::vector<double> reference_dry(std::vector<double> l, const std::vector<int32_t>& h, double multiplier, double base,
                                  int allowed, const std::vector<int32_t>& breakers) {
  const auto breaks = [&](int32_t t) { return std::find(breakers.begin(), breakers.end(), t) != breakers.end(); };
  std::vector<int> longest(l.size(), 0);
  const size_t last = h.size() - 1;
  if (!breaks(h[last])) {
    for (size_t j = 0; j < last; ++j) {
      if (breaks(h[j + 1])) continue;
      size_t n = 0;
      while (n <= j && h[j - n] == h[last - n] && !breaks(h[j - n])) ++n;
      longest[size_t(h[j + 1])] = std::max(longest[size_t(h[j + 1])], int(n));
    }
  }
  for (size_t t = 0; t < l.size(); ++t)
    if (longest[t] > 0 && longest[t] >= allowed) l[t] -= multiplier * std::pow(base, longest[t] - allowed);
  return softmax(l);
}

void check_exact_and_draws(Harness& h, const loom_sampling_params& params, const std::vector<float>& logits,
                           const std::vector<int32_t>& history, const std::vector<double>& expected, const std::string& what,
                           uint64_t seed) {
  require_close(h.final_distribution(params, logits, history), expected, k_prob_tolerance, what);
  require_chi_square_fit(h.draw_counts(params, logits, history, k_draws, seed), expected, what);
}

void top_n_sigma_distribution(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  for (float n : {0.5f, 1.0f, 2.0f}) {
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_N_SIGMA, LOOM_SAMPLER_STAGE_TEMPERATURE});
    params.top_n_sigma = n;
    const std::vector<float> logits = make_logits(k_vocab, 31);
    check_exact_and_draws(h, params, logits, {}, reference_top_n_sigma(as_double(logits), n), "top_n_sigma " + std::to_string(n),
                          0x5160u);
  }
}

void xtc_always(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_XTC});
  params.xtc_probability = 1.0f;
  params.xtc_threshold = 0.05f;
  const std::vector<float> logits = make_logits(k_vocab, 32);
  const std::vector<double> expected = reference_xtc_fired(as_double(logits), 0.05);
  require(std::count_if(expected.begin(), expected.end(), [](double p) { return p == 0.0; }) >= 2,
          "case bug: the threshold removes fewer than two tokens");
  check_exact_and_draws(h, params, logits, {}, expected, "xtc_probability 1", 0x87c0u);
  // A threshold above 0.5 switches the stage off whatever the probability.
  params.xtc_threshold = 0.6f;
  require_close(h.final_distribution(params, logits), softmax(as_double(logits)), k_prob_tolerance, "xtc_threshold 0.6");
}

void xtc_mixture(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_XTC});
  params.xtc_probability = 0.4f;
  params.xtc_threshold = 0.05f;
  const std::vector<float> logits = make_logits(k_vocab, 33);
  const std::vector<double> plain = softmax(as_double(logits)), fired = reference_xtc_fired(as_double(logits), 0.05);
  std::vector<double> mixture(plain.size());
  for (size_t t = 0; t < plain.size(); ++t) mixture[t] = 0.6 * plain[t] + 0.4 * fired[t];
  require_chi_square_fit(h.draw_counts(params, logits, {}, k_draws, 0x87c1u), mixture, "xtc_probability 0.4");
}

void dry_distribution(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  // The history ends "5 6 7". "5 6 7" came before, then 8: token 8 extends a repeat of 3. "2 6 7" came
  // before 11, and "3 6 7" before 8 again: repeats of 2 (token 3, a breaker, would end a repeat anyway).
  const std::vector<int32_t> history = {5, 6, 7, 8, 9, 1, 2, 6, 7, 11, 4, 3, 6, 7, 8, 9, 0, 5, 6, 7};
  const std::vector<int32_t> breakers = {3};
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_DRY});
  params.dry_multiplier = 0.8f;
  params.dry_base = 1.75f;
  params.dry_allowed_length = 2;
  params.dry_penalty_last_n = -1;
  params.n_dry_breakers = uint32_t(breakers.size());
  params.dry_breaker_tokens = breakers.data();
  const std::vector<float> logits = make_logits(k_vocab, 34, 1.0f);
  const std::vector<double> expected = reference_dry(as_double(logits), history, 0.8, 1.75, 2, breakers);
  require(std::fabs(expected[8] - softmax(as_double(logits))[8]) > 1e-3, "case bug: DRY changes nothing");
  check_exact_and_draws(h, params, logits, history, expected, "dry", 0xd770u);
  // A window that no longer holds the earlier occurrences penalises nothing.
  params.dry_penalty_last_n = 4;
  require_close(h.final_distribution(params, logits, history), softmax(as_double(logits)), k_prob_tolerance, "dry window 4");
}

// A repeat long enough for base^n to overflow, times a large multiplier, must still leave finite
// logits: a later stage (top-n-sigma's mean) would otherwise turn them into NaN and fail the row.
void dry_huge_penalty_stays_finite(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  std::vector<int32_t> history;
  for (int round = 0; round < 2; ++round)
    for (int32_t t = 0; t < 40; ++t) history.push_back(t);  // the second round repeats the first: 39 + 1 long
  history.push_back(0);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_DRY, LOOM_SAMPLER_STAGE_TOP_N_SIGMA});
  params.dry_multiplier = 1000.0f;
  params.dry_base = 16.0f;
  params.dry_allowed_length = 0;
  params.dry_penalty_last_n = -1;
  params.top_n_sigma = 1.0f;
  const std::vector<float> logits = make_logits(k_vocab, 38);
  std::vector<float> probs;
  int32_t token = -1;
  float logprob = 0.0f;
  require(h.sample_one(params, h.new_state(9), logits, history, &token, &logprob, &probs) == LOOM_STATUS_OK,
          "an overflowing DRY penalty failed the row: " + h.last_error());
  require(probs[1] == 0.0f, "the token that extends the repeat kept probability " + std::to_string(probs[1]));
}

// The first draw of a fresh state: v2 keeps the tokens of surprise <= 2 * tau bits.
void mirostat_first_draw(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
  params.mirostat = 2;
  params.mirostat_tau = 2.0f;
  params.mirostat_eta = 0.1f;
  const std::vector<float> logits = make_logits(k_vocab, 35);
  std::vector<double> l = as_double(logits);
  const std::vector<double> p = softmax(l);
  for (size_t t = 0; t < l.size(); ++t)
    if (-std::log2(p[t]) > 4.0) l[t] = -INFINITY;
  require_close(h.final_distribution(params, logits), softmax(l), k_prob_tolerance, "mirostat v2 first draw");
}

// Mirostat's feedback settles the surprise of what it draws near tau.
void mirostat_targets_tau(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  for (int version : {1, 2}) {
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
    params.mirostat = version;
    params.mirostat_tau = 2.5f;
    params.mirostat_eta = 0.1f;
    const std::vector<float> logits = make_logits(k_vocab, 36, 2.5f);
    loom_sampler_state_t* state = h.new_state(0x3170u + uint64_t(version));
    double surprise = 0.0;
    const int warmup = 500, n = 4000;
    for (int i = 0; i < warmup + n; ++i) {
      int32_t token = -1;
      float logprob = 0.0f;
      require(h.sample_one(params, state, logits, {}, &token, &logprob, nullptr) == LOOM_STATUS_OK, "mirostat: " + h.last_error());
      if (i >= warmup) surprise += -double(logprob) / std::log(2.0);
    }
    const double mean = surprise / n;
    require(std::fabs(mean - 2.5) < 0.3, "mirostat v" + std::to_string(version) + ": mean surprise " + std::to_string(mean) +
                                             " bits, target 2.5");
  }
}

// A host of ABI 1.16 passes a struct that ends before the new fields: whatever lies beyond is ignored.
void older_host_struct(CaseContext& ctx) {
  require_1_17(ctx);
  Harness h(ctx);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
  params.top_n_sigma = 0.1f;
  params.xtc_probability = 1.0f;
  params.xtc_threshold = 0.01f;
  params.dry_multiplier = 5.0f;
  params.mirostat = 2;
  params.struct_size = uint32_t(offsetof(loom_sampling_params, top_n_sigma));
  const std::vector<float> logits = make_logits(k_vocab, 37);
  require_close(h.final_distribution(params, logits, {1, 2, 1, 2}), softmax(as_double(logits)), k_prob_tolerance,
                "a 1.16-sized struct");
}

}  // namespace

std::vector<Case> sampler_tuned_cases() {
  return {
      {"sampler.tuned.top_n_sigma", LOOM_PLUGIN_KIND_SAMPLER, top_n_sigma_distribution},
      {"sampler.tuned.xtc_always", LOOM_PLUGIN_KIND_SAMPLER, xtc_always},
      {"sampler.tuned.xtc_mixture", LOOM_PLUGIN_KIND_SAMPLER, xtc_mixture},
      {"sampler.tuned.dry", LOOM_PLUGIN_KIND_SAMPLER, dry_distribution},
      {"sampler.tuned.dry_huge_penalty_stays_finite", LOOM_PLUGIN_KIND_SAMPLER, dry_huge_penalty_stays_finite},
      {"sampler.tuned.mirostat_first_draw", LOOM_PLUGIN_KIND_SAMPLER, mirostat_first_draw},
      {"sampler.tuned.mirostat_targets_tau", LOOM_PLUGIN_KIND_SAMPLER, mirostat_targets_tau},
      {"sampler.tuned.older_host_struct", LOOM_PLUGIN_KIND_SAMPLER, older_host_struct},
  };
}

}  // namespace loom::conformance
