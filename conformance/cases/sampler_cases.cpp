// Conformance cases for the sampler kind: exact distributions. Each stage alone and a few chains are
// checked twice: out_probs against the exact post-chain distribution computed here (independent
// code, docs/samplers.md formulas), and 20,000 seeded draws against it with Pearson's chi-square at
// alpha = 0.001. Error handling, determinism and batching are in sampler_edge_cases.cpp.
#include <algorithm>
#include <cmath>
#include <set>

#include "conformance_case.h"
#include "sampler_support.h"

namespace loom::conformance {

using namespace sampler_support;

namespace {

constexpr uint32_t k_vocab = 48;
constexpr uint32_t k_draws = 20000;
constexpr double k_prob_tolerance = 2e-5;

using Chain = std::vector<loom_sampler_stage>;

struct DistributionCase {
  const char* name;
  Chain chain;
  void (*tune)(loom_sampling_params&);
  uint64_t logits_seed;
};

const std::vector<int32_t>& test_history() {
  // Repeats (counts 1..3) and a token outside the window that penalty_last_n = 12 must ignore.
  static const std::vector<int32_t> history = {40, 1, 2, 3, 3, 5, 5, 5, 7, 0, 9, 11, 2, 30, 31, 1};
  return history;
}

void run_distribution_case(CaseContext& ctx, const DistributionCase& dc) {
  Harness h(ctx);
  loom_sampling_params params = h.neutral(dc.chain);
  dc.tune(params);
  const std::vector<float> logits = make_logits(k_vocab, dc.logits_seed);
  const std::vector<int32_t>& history = test_history();
  const std::vector<double> expected = reference_distribution(params, dc.chain, logits, history);
  require_close(h.final_distribution(params, logits, history), expected, k_prob_tolerance, dc.name);
  require_chi_square_fit(h.draw_counts(params, logits, history, k_draws, 0x5eed0000u + dc.logits_seed), expected,
                         dc.name);
}

const int32_t k_bias_tokens[] = {0, 3, 3, 17, 21};
const float k_bias_values[] = {2.5f, -1.0f, -0.5f, 3.0f, -INFINITY};

std::vector<DistributionCase> distribution_cases() {
  using S = loom_sampler_stage;
  const S pen = LOOM_SAMPLER_STAGE_PENALTIES, bias = LOOM_SAMPLER_STAGE_LOGIT_BIAS, k = LOOM_SAMPLER_STAGE_TOP_K,
          p = LOOM_SAMPLER_STAGE_TOP_P, m = LOOM_SAMPLER_STAGE_MIN_P, typ = LOOM_SAMPLER_STAGE_TYPICAL_P,
          t = LOOM_SAMPLER_STAGE_TEMPERATURE;
  return {
      // n_stages = 0 means "the plugin's default", so "no stage" is spelled as temperature 1.
      {"temperature_one", {t}, [](loom_sampling_params&) {}, 1},
      {"penalties", {pen}, [](loom_sampling_params& q) {
         q.repetition_penalty = 1.6f; q.frequency_penalty = 0.3f; q.presence_penalty = 0.4f; q.penalty_last_n = 12;
       }, 2},
      {"logit_bias", {bias}, [](loom_sampling_params& q) {
         q.n_logit_bias = 5; q.logit_bias_tokens = k_bias_tokens; q.logit_bias_values = k_bias_values;
       }, 3},
      {"top_k", {k}, [](loom_sampling_params& q) { q.top_k = 7; }, 4},
      {"top_p", {p}, [](loom_sampling_params& q) { q.top_p = 0.63f; }, 5},
      {"min_p", {m}, [](loom_sampling_params& q) { q.min_p = 0.12f; }, 6},
      {"typical_p", {typ}, [](loom_sampling_params& q) { q.typical_p = 0.55f; }, 7},
      {"temperature_cold", {t}, [](loom_sampling_params& q) { q.temperature = 0.45f; }, 8},
      {"temperature_hot", {t}, [](loom_sampling_params& q) { q.temperature = 1.8f; }, 9},
      {"chain_default_order", {pen, k, p, m, t}, [](loom_sampling_params& q) {
         q.repetition_penalty = 1.3f; q.penalty_last_n = 64; q.top_k = 12; q.top_p = 0.9f; q.min_p = 0.05f;
         q.temperature = 0.7f;
       }, 10},
      {"chain_temperature_then_top_p", {t, p}, [](loom_sampling_params& q) { q.temperature = 1.5f; q.top_p = 0.7f; }, 11},
      {"chain_bias_min_p_typical_top_k", {bias, m, typ, k}, [](loom_sampling_params& q) {
         q.n_logit_bias = 5; q.logit_bias_tokens = k_bias_tokens; q.logit_bias_values = k_bias_values;
         q.min_p = 0.02f; q.typical_p = 0.8f; q.top_k = 9;
       }, 12},
  };
}

// The support of out_probs (tokens with probability > 0).
std::set<int32_t> support_of(const std::vector<float>& probs) {
  std::set<int32_t> support;
  for (size_t i = 0; i < probs.size(); ++i)
    if (probs[i] > 0.0f) support.insert(static_cast<int32_t>(i));
  return support;
}

// p strictly between consecutive cumulative sums: the smallest set reaching it has exactly n tokens,
// with no float ambiguity. Checked for every n (or every `stride`-th n on a large vocabulary, where a
// plugin may switch to a selection algorithm that never sorts the whole set).
void check_top_p_support(CaseContext& ctx, uint32_t n_vocab, float scale, uint64_t seed, uint32_t stride) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(n_vocab, seed, scale);
  std::vector<double> p = softmax(std::vector<double>(logits.begin(), logits.end()));
  std::vector<size_t> order(n_vocab);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double previous = 0.0;
  for (size_t n = 1; n < n_vocab; ++n) {
    const double cumulative = previous + p[order[n - 1]];
    const double target = (previous + cumulative) / 2;
    previous = cumulative;
    if (n % stride != 0 && n > 3) continue;
    // A float p must sit clearly inside the gap, or the expected set is ambiguous.
    if (cumulative - target < 2e-7 + 4 * target * 0x1.0p-24 || target >= 0.999) continue;
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_P});
    params.top_p = static_cast<float>(target);
    const std::set<int32_t> support = support_of(h.final_distribution(params, logits));
    std::set<int32_t> want;
    for (size_t i = 0; i < n; ++i) want.insert(static_cast<int32_t>(order[i]));
    require(support == want, "top_p = " + std::to_string(target) + " should keep exactly the " + std::to_string(n) +
                                 " most probable tokens; kept " + std::to_string(support.size()));
  }
}

void top_p_exact_support(CaseContext& ctx) { check_top_p_support(ctx, k_vocab, 2.0f, 21, 1); }
// 6000 tokens at low contrast: top-p keeps thousands, beyond any fixed "sort the best few" window.
void top_p_exact_support_large(CaseContext& ctx) { check_top_p_support(ctx, 6000, 0.4f, 23, 97); }

// Top-k on a vocabulary large enough for a plugin's small-k fast path: exactly the k best survive,
// with the probabilities renormalised.
void top_k_large_vocab(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(8192, 24);
  for (int32_t k : {1, 10, 40, 127, 3000}) {
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K});
    params.top_k = k;
    require_close(h.final_distribution(params, logits),
                  reference_distribution(params, {LOOM_SAMPLER_STAGE_TOP_K}, logits, {}), k_prob_tolerance,
                  "top_k = " + std::to_string(k) + " over 8192 tokens");
  }
}

// Ties at the boundary: logits {3, 1, 1, 1, 0 x 4}. The smallest set reaching p needs the top token
// and some of the three tied tokens; any of them may be chosen, but exactly as many as needed.
void top_p_ties_at_boundary(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = {3.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<double> p = softmax(std::vector<double>(logits.begin(), logits.end()));
  for (int n_tied = 1; n_tied <= 3; ++n_tied) {
    const double target = p[0] + (n_tied - 0.5) * p[1];
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_P});
    params.top_p = static_cast<float>(target);
    const std::set<int32_t> support = support_of(h.final_distribution(params, logits));
    const std::string what = "top_p = " + std::to_string(target) + " with a three-way tie";
    require(support.size() == size_t(1 + n_tied), what + ": kept " + std::to_string(support.size()) +
                                                      " tokens, the smallest set has " + std::to_string(1 + n_tied));
    require(support.count(0) == 1, what + ": the most probable token was removed");
    for (int32_t token : support) require(token <= 3, what + ": kept token " + std::to_string(token) + " below the tie");
  }
}

// min_p between consecutive probability ratios: exactly the tokens with p >= min_p * p_max survive.
void min_p_exact_support(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 22);
  const std::vector<double> p = softmax(std::vector<double>(logits.begin(), logits.end()));
  const double p_max = *std::max_element(p.begin(), p.end());
  std::vector<double> ratios;
  for (double x : p) ratios.push_back(x / p_max);
  std::sort(ratios.rbegin(), ratios.rend());
  for (size_t i = 1; i < ratios.size(); i += 3) {
    const double min_p = (ratios[i - 1] + ratios[i]) / 2;
    if (ratios[i - 1] - ratios[i] < 1e-5) continue;
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_MIN_P});
    params.min_p = static_cast<float>(min_p);
    const std::set<int32_t> support = support_of(h.final_distribution(params, logits));
    std::set<int32_t> want;
    for (size_t t = 0; t < p.size(); ++t)
      if (p[t] >= min_p * p_max) want.insert(static_cast<int32_t>(t));
    require(support == want, "min_p = " + std::to_string(min_p) + " should keep " + std::to_string(want.size()) +
                                 " tokens; kept " + std::to_string(support.size()));
  }
  // min_p = 1 keeps exactly the argmax.
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_MIN_P});
  params.min_p = 1.0f;
  require(support_of(h.final_distribution(params, logits)).size() == 1, "min_p = 1 should keep only the argmax");
}

}  // namespace

std::vector<Case> sampler_cases() {
  std::vector<Case> cases;
  for (const DistributionCase& dc : distribution_cases())
    cases.push_back({std::string("sampler.distribution.") + dc.name, LOOM_PLUGIN_KIND_SAMPLER,
                     [dc](CaseContext& ctx) { run_distribution_case(ctx, dc); }});
  cases.push_back({"sampler.top_p.exact_support", LOOM_PLUGIN_KIND_SAMPLER, top_p_exact_support});
  cases.push_back({"sampler.top_p.exact_support_large_vocab", LOOM_PLUGIN_KIND_SAMPLER, top_p_exact_support_large});
  cases.push_back({"sampler.top_k.large_vocab", LOOM_PLUGIN_KIND_SAMPLER, top_k_large_vocab});
  cases.push_back({"sampler.top_p.ties_at_boundary", LOOM_PLUGIN_KIND_SAMPLER, top_p_ties_at_boundary});
  cases.push_back({"sampler.min_p.exact_support", LOOM_PLUGIN_KIND_SAMPLER, min_p_exact_support});
  for (Case& c : sampler_edge_cases()) cases.push_back(std::move(c));
  for (Case& c : sampler_tuned_cases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace loom::conformance
