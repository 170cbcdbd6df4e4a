// Row-wise GLU activations with a vectorised fast path.
#pragma once

#include <cstdint>

#include "loom/backend.h"

namespace loom::cpu {

// out[i] = act(g[i]) * u[i] (u == nullptr: act(g[i])) with AVX2/FMA when the activation has a
// vector form (SiLU, tanh-GELU); returns false, writing nothing, when it has not.
bool activation_row_avx2(loom_activation act, const float* g, const float* u, float* out, int64_t n);

// Softmax's exponentials in place: x[i] = e^(x[i] - shift), -inf giving exactly 0; returns their sum.
// n a multiple of 8.
float exp_shifted_avx2(float* x, int64_t n, float shift);

}  // namespace loom::cpu
