// Lossless speculative verification (Leviathan et al. 2023, Chen et al. 2023): given the target's
// final distributions p at the verified rows and the drafter's proposals x_i with their q, keep the
// target's output distribution exactly.
//
//   for i = 0..n_draft-1:  accept x_i with probability min(1, p_i(x_i) / q_i(x_i))
//                          (q one-hot for deterministic drafters: accept iff u < p_i(x_i))
//                          on rejection draw from normalize(max(0, p_i - q_i)) and stop
//   all accepted:          draw one bonus token from p_{n_draft}
//
// With a greedy target p is one-hot, so the result is exactly the non-speculative argmax sequence.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace loom {

struct VerifyOutcome {
  std::vector<int32_t> tokens;  // the accepted drafts followed by one correction or bonus token
  uint32_t n_accepted = 0;      // drafts kept (tokens.size() - 1)
};

// Uniform in [0, 1) from the top 53 bits of one draw: reproducible across standard libraries.
double uniform_unit(std::mt19937_64& rng);

// Inverse-CDF draw from non-negative weights (need not be normalised). Returns -1 when every
// weight is zero or not finite.
int32_t draw_from(std::span<const float> weights, double u);

// p: [draft.size() + 1, n_vocab]; q: [draft.size(), n_vocab] or empty for one-hot proposals.
VerifyOutcome verify_draft(std::span<const float> p, std::span<const int32_t> draft, std::span<const float> q,
                           uint32_t n_vocab, std::mt19937_64& rng);

}  // namespace loom
