#include <algorithm>
#include <cstring>
#include <cmath>

#include "stages.h"

namespace loom::samplers {

void apply_temperature(CandidateSet& set, float temperature) {
  if (set.n == 0) return;
  if (temperature <= 0.0f) {
    // Greedy: the argmax, ties to the lowest token id.
    Candidate best = set.data[0];
    for (uint32_t i = 1; i < set.n; ++i)
      if (ranks_before(set.data[i], best)) best = set.data[i];
    set.data[0] = best;
    set.n = 1;
    set.is_sorted = true;
    set.is_identity = false;
    return;
  }
  if (temperature == 1.0f) return;
  // Shift by the maximum before dividing: softmax is unchanged, and a tiny temperature cannot push
  // the best logit to +inf (only far-behind tokens underflow to -inf, i.e. probability 0).
  const double max = set.max_logit();
  const double inverse = 1.0 / static_cast<double>(temperature);
  for (uint32_t i = 0; i < set.n; ++i)
    set.data[i].logit = static_cast<float>((static_cast<double>(set.data[i].logit) - max) * inverse);
  set.drop_masked();
}

namespace {
// Four floats in a GCC/Clang vector type: SSE on x86-64, NEON on arm64, and no intrinsics (GCC does
// not vectorise a float max reduction by itself without -ffast-math).
using Floats = float __attribute__((vector_size(16)));
using Ints = int32_t __attribute__((vector_size(16)));
constexpr uint32_t kLanes = 4, kVectors = 4, kStep = kVectors * kLanes;  // 4 chains hide compare latency
constexpr uint32_t kChunk = 64 * kStep;

Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Largest of logits[begin, end) (end - begin a multiple of kStep); ORs "not below +inf" (NaN or
// +inf) into nan_or_inf.
float chunk_max(const float* logits, uint32_t begin, uint32_t end, Ints& nan_or_inf) {
  const Floats infinity = {INFINITY, INFINITY, INFINITY, INFINITY};
  Floats lane_max[kVectors] = {-infinity, -infinity, -infinity, -infinity};
  for (uint32_t i = begin; i < end; i += kStep) {
    for (uint32_t v = 0; v < kVectors; ++v) {
      const Floats x = load(logits + i + v * kLanes);
      lane_max[v] = x > lane_max[v] ? x : lane_max[v];
      nan_or_inf |= ~(x < infinity);
    }
  }
  float best = -INFINITY;
  for (const Floats& m : lane_max)
    for (uint32_t l = 0; l < kLanes; ++l) best = std::max(best, m[l]);
  return best;
}
}  // namespace

int32_t argmax_logits(const float* logits, uint32_t n_vocab) {
  // The maximum chunk by chunk, remembering the first chunk that reached it; then a scalar search of
  // that chunk alone for the first index (ties go to the lowest id). A per-lane index in the vector
  // loop instead doubled its cost.
  Ints nan_or_inf = {};
  float best = -INFINITY;
  uint32_t best_chunk = 0;
  const uint32_t vector_end = n_vocab / kStep * kStep;
  for (uint32_t begin = 0; begin < vector_end; begin += kChunk) {
    const float m = chunk_max(logits, begin, std::min(begin + kChunk, vector_end), nan_or_inf);
    if (m > best) best = m, best_chunk = begin;
  }
  bool bad = (nan_or_inf[0] | nan_or_inf[1] | nan_or_inf[2] | nan_or_inf[3]) != 0;
  int32_t best_index = -1;
  for (uint32_t i = vector_end; i < n_vocab; ++i) {
    bad |= !(logits[i] < INFINITY);
    if (logits[i] > best) best = logits[i], best_index = static_cast<int32_t>(i);
  }
  if (bad || best == -INFINITY) return -1;
  if (best_index >= 0) return best_index;  // only the scalar tail reached it
  for (uint32_t i = best_chunk;; ++i)
    if (logits[i] == best) return static_cast<int32_t>(i);
}

}  // namespace loom::samplers
