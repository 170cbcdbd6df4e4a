// The acceptance rule of speculative decoding on its own (engine/speculative.h): greedy targets give
// exactly the argmax sequence, and for random targets the emitted tokens follow p exactly, whatever
// q is (chi-square goodness of fit with fixed seeds).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>

#include "engine/speculative.h"

namespace {

std::vector<float> one_hot(uint32_t n_vocab, int32_t token) {
  std::vector<float> row(n_vocab, 0.0f);
  row[static_cast<size_t>(token)] = 1.0f;
  return row;
}

// Upper critical value of chi-square with `df` degrees of freedom at significance 0.001
// (Wilson-Hilferty; z = 3.0902).
double chi_square_critical_001(double df) {
  const double z = 3.0902;
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

double chi_square(const std::vector<double>& expected_probs, const std::vector<uint64_t>& counts, uint64_t n,
                  int* df_out) {
  // Cells with an expected count under 5 are pooled so the statistic's distribution holds.
  double stat = 0.0, pooled_expected = 0.0, pooled_observed = 0.0;
  int cells = 0;
  for (size_t i = 0; i < expected_probs.size(); ++i) {
    const double e = expected_probs[i] * double(n);
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += double(counts[i]);
      continue;
    }
    stat += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
    ++cells;
  }
  if (pooled_expected > 0.0) {
    stat += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / std::max(pooled_expected, 1e-9);
    ++cells;
  }
  *df_out = cells - 1;
  return stat;
}

}  // namespace

TEST_CASE("greedy verification keeps exactly the argmax prefix and corrects the first miss", "[speculative]") {
  const uint32_t v = 6;
  // Target argmaxes per row: 2, 4, 1, 5.
  std::vector<float> p;
  for (int32_t t : {2, 4, 1, 5}) {
    auto row = one_hot(v, t);
    p.insert(p.end(), row.begin(), row.end());
  }
  std::mt19937_64 rng(1);
  SECTION("all accepted gives the bonus token") {
    const std::vector<int32_t> draft = {2, 4, 1};
    auto out = loom::verify_draft(p, draft, {}, v, rng);
    CHECK(out.n_accepted == 3);
    CHECK(out.tokens == std::vector<int32_t>{2, 4, 1, 5});
  }
  SECTION("a miss stops at the target's own token") {
    const std::vector<int32_t> draft = {2, 3, 1};
    auto out = loom::verify_draft(p, draft, {}, v, rng);
    CHECK(out.n_accepted == 1);
    CHECK(out.tokens == std::vector<int32_t>{2, 4});
  }
  SECTION("with a drafter distribution q the result is the same") {
    const std::vector<int32_t> draft = {2, 0, 1};
    std::vector<float> q(3 * v, 1.0f / v);
    auto out = loom::verify_draft(p, draft, q, v, rng);
    CHECK(out.n_accepted == 1);
    CHECK(out.tokens == std::vector<int32_t>{2, 4});
  }
}

TEST_CASE("speculative sampling emits tokens distributed exactly as the target's p", "[speculative]") {
  // Two positions over a 5-token vocabulary; p at row 1 does not depend on the first token here,
  // so the joint of the first two emitted tokens must be p0 x p1.
  const uint32_t v = 5;
  const std::vector<float> p0 = {0.50f, 0.20f, 0.15f, 0.10f, 0.05f};
  const std::vector<float> p1 = {0.05f, 0.05f, 0.30f, 0.30f, 0.30f};
  const std::vector<float> p2 = {0.20f, 0.20f, 0.20f, 0.20f, 0.20f};
  std::vector<float> p = p0;
  p.insert(p.end(), p1.begin(), p1.end());
  p.insert(p.end(), p2.begin(), p2.end());
  const std::vector<float> q0 = {0.10f, 0.10f, 0.10f, 0.10f, 0.60f};  // badly wrong on purpose
  const std::vector<float> q1 = {0.40f, 0.10f, 0.10f, 0.30f, 0.10f};
  std::vector<float> q = q0;
  q.insert(q.end(), q1.begin(), q1.end());

  std::vector<double> expected(v * v);
  for (uint32_t a = 0; a < v; ++a)
    for (uint32_t b = 0; b < v; ++b) expected[a * v + b] = double(p0[a]) * p1[b];

  for (bool has_q : {true, false}) {
    INFO((has_q ? "drafter with q" : "deterministic drafter (one-hot q)"));
    std::mt19937_64 rng(2024), draft_rng(99);
    std::vector<uint64_t> counts(v * v, 0);
    const uint64_t n = 200000;
    for (uint64_t trial = 0; trial < n; ++trial) {
      // Draft from q (or an arbitrary fixed rule when deterministic).
      std::vector<int32_t> draft(2);
      if (has_q) {
        draft[0] = loom::draw_from(q0, loom::uniform_unit(draft_rng));
        draft[1] = loom::draw_from(q1, loom::uniform_unit(draft_rng));
      } else {
        draft = {static_cast<int32_t>(trial % v), static_cast<int32_t>((trial / v) % v)};
      }
      auto out = loom::verify_draft(p, draft, has_q ? std::span<const float>(q) : std::span<const float>(), v, rng);
      REQUIRE(out.tokens.size() >= 1);
      int32_t second = 0;
      if (out.tokens.size() >= 2) {
        second = out.tokens[1];
      } else {
        // Rejected at the first position: the next step samples position 1 from p1 afresh.
        second = loom::draw_from(p1, loom::uniform_unit(rng));
      }
      ++counts[size_t(out.tokens[0]) * v + size_t(second)];
    }
    int df = 0;
    const double stat = chi_square(expected, counts, n, &df);
    INFO("chi-square " << stat << " with " << df << " degrees of freedom");
    CHECK(stat < chi_square_critical_001(df));
  }
}
