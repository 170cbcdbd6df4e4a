// Activations, matching the CPU reference formulas (activation_value in plugins/cpu).
const uint ACT_SILU = 1u;
const uint ACT_GELU_TANH = 2u;
const uint ACT_GELU_ERF = 3u;
const uint ACT_RELU = 4u;
const uint ACT_SIGMOID = 6u;   // ABI 1.5
const uint ACT_SOFTPLUS = 7u;  // ABI 1.6, ggml's cut-off at 20
const uint ACT_GELU_QUICK = 8u;  // ABI 1.10, CLIP's x * sigmoid(1.702 x)

// erf by Abramowitz & Stegun 7.1.26 refined: |error| < 1.2e-7 (Numerical Recipes erfc, Chebyshev).
float erf_approx(float x) {
  float z = abs(x);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? 1.0 - r : r - 1.0;
}

float activation(uint act, float x) {
  if (act == ACT_SILU) return x / (1.0 + exp(-x));
  if (act == ACT_GELU_TANH) return 0.5 * x * (1.0 + safe_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if (act == ACT_GELU_ERF) return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));
  if (act == ACT_RELU) return x > 0.0 ? x : 0.0;
  if (act == ACT_SIGMOID) return 1.0 / (1.0 + exp(-x));
  if (act == ACT_SOFTPLUS) return x > 20.0 ? x : log(1.0 + exp(x));
  if (act == ACT_GELU_QUICK) return x / (1.0 + exp(-1.702 * x));
  return x;
}

// One element of a gated unit: act(g) * u, or gpt-oss's clamped form for SWIGLU_OAI (5, ABI 1.5).
const uint ACT_SWIGLU_OAI = 5u;
float glu_value(uint act, float g, float u) {
  if (act != ACT_SWIGLU_OAI) return activation(act, g) * u;
  float x = min(g, 7.0), y = clamp(u, -7.0, 7.0);
  return x / (1.0 + exp(-1.702 * x)) * (y + 1.0);
}
