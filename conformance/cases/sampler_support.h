// Shared pieces of the sampler conformance cases: an RAII harness around a sampler instance, an
// independent reference implementation of every stage (in double), and Pearson's chi-square test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conformance_case.h"

namespace loom::conformance::sampler_support {

// Creates one instance of the plugin under test; destroys it at scope exit.
class Harness {
 public:
  explicit Harness(CaseContext& ctx, const std::string& config_json = "{}");
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  const loom_sampler_i& table() const { return *table_; }
  loom_sampler_t* sampler() const { return sampler_; }
  std::string last_error() const;

  // Params with every stage neutral, temperature 1, and the given explicit chain.
  loom_sampling_params neutral(const std::vector<loom_sampler_stage>& chain) const;

  loom_sampler_state_t* new_state(uint64_t seed);  // owned by the harness

  // One row: returns the status; fills token/logprob/out_probs.
  loom_status sample_one(const loom_sampling_params& params, loom_sampler_state_t* state,
                         const std::vector<float>& logits, const std::vector<int32_t>& history, int32_t* token,
                         float* logprob, std::vector<float>* out_probs, uint32_t flags = 0);
  // The final distribution the plugin samples from (via a normal draw with out_probs).
  std::vector<float> final_distribution(const loom_sampling_params& params, const std::vector<float>& logits,
                                        const std::vector<int32_t>& history = {});
  // Counts of n_draws tokens drawn from one state seeded with `seed`.
  std::vector<uint64_t> draw_counts(const loom_sampling_params& params, const std::vector<float>& logits,
                                    const std::vector<int32_t>& history, uint32_t n_draws, uint64_t seed);

 private:
  const loom_sampler_i* table_ = nullptr;
  loom_sampler_t* sampler_ = nullptr;
  std::vector<loom_sampler_state_t*> states_;
};

// Deterministic test logits: roughly N(0, scale^2), from a fixed integer generator.
std::vector<float> make_logits(uint32_t n_vocab, uint64_t seed, float scale = 2.0f);

// The exact post-chain distribution by the formulas of docs/samplers.md, in double, with full sorts.
std::vector<double> reference_distribution(const loom_sampling_params& params, const std::vector<loom_sampler_stage>& chain,
                                           const std::vector<float>& logits, const std::vector<int32_t>& history);

// Softmax of raw logits (double).
std::vector<double> softmax(const std::vector<double>& logits);

// Fails unless |got - want| <= tolerance for every token.
void require_close(const std::vector<float>& got, const std::vector<double>& want, double tolerance,
                   const std::string& what);

// Pearson chi-square goodness of fit at alpha = 0.001; fails with the statistic, df and critical value.
// Also fails when a token with expected probability 0 was drawn.
void require_chi_square_fit(const std::vector<uint64_t>& counts, const std::vector<double>& expected_probs,
                            const std::string& what);

// Upper 0.001 quantile of chi-square with `df` degrees of freedom.
double chi_square_critical_0001(int df);

// Cases defined in sampler_edge_cases.cpp and sampler_tuned_cases.cpp (ABI 1.17's stages).
std::vector<Case> sampler_edge_cases();

}  // namespace loom::conformance::sampler_support

namespace loom::conformance {
std::vector<Case> sampler_tuned_cases();
}  // namespace loom::conformance
