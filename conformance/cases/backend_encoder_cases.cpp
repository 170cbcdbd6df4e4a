// Conformance cases for the encoder ops (ABI 1.9): LAYER_NORM, ATTENTION over plain tensors, PATCHES
// and POOL_2D, and CLAMP (ABI 1.11), each against its definition in backend.h written out here in double precision. Shapes
// are a vision encoder's in miniature: head size 72 (SigLIP's), grouped heads, several sequences in one
// batch, a grid that is not square. A backend without the ops answers UNSUPPORTED and the cases report
// not-supported.
#include <algorithm>
#include <cmath>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

namespace {

using namespace backend;

void run_or_fail(Device& dut, loom_op_type type, std::vector<HostTensor*> srcs, HostTensor* dst, const void* params,
                 const std::string& what) {
  const loom_status st = dut.run(type, std::move(srcs), dst, params);
  require(st == LOOM_STATUS_OK, what + " failed (" + std::to_string(st) + "): " + dut.last_error());
}

// Rows far from zero mean (offset 100) catch a variance taken as E[x²] - E[x]² in single precision.
void case_layer_norm(CaseContext& ctx, bool affine, int64_t n) {
  std::mt19937 rng(81);
  const int64_t rows = 5;
  std::vector<float> xs = random_floats(rng, size_t(n * rows));
  for (size_t i = 0; i < xs.size(); i++) xs[i] += (i / size_t(n)) % 2 == 0 ? 100.0f : 0.0f;
  const std::vector<float> w = random_floats(rng, size_t(n)), b = random_floats(rng, size_t(n));
  HostTensor x = f32_tensor(xs, n, rows), weight = f32_tensor(w, n), bias = f32_tensor(b, n);
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, n, rows);
  const loom_norm_params params{sizeof(loom_norm_params), 1e-6f};
  auto dut = device_under_test(ctx);
  std::vector<HostTensor*> srcs = {&x};
  if (affine) srcs = {&x, &weight, &bias};
  run_or_fail(*dut, LOOM_OP_LAYER_NORM, srcs, &dst, &params, "LAYER_NORM");
  std::vector<float> want(xs.size());
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < n; i++) mean += xs[size_t(r * n + i)];
    mean /= double(n);
    for (int64_t i = 0; i < n; i++) var += std::pow(xs[size_t(r * n + i)] - mean, 2);
    const double inv = 1.0 / std::sqrt(var / double(n) + 1e-6);
    for (int64_t i = 0; i < n; i++) {
      const double v = (xs[size_t(r * n + i)] - mean) * inv;
      want[size_t(r * n + i)] = float(affine ? v * w[size_t(i)] + b[size_t(i)] : v);
    }
  }
  // Rows at 100 lose 7 bits to x - mean in single precision (the reference sums in double): 1e-4 of
  // the output. A variance taken as E[x²] - E[x]² in floats is off by 3e-3 on these rows.
  require_close(dst.floats(), want, 1e-4, "LAYER_NORM");
}

struct AttentionShape {
  int64_t head_dim = 72, n_heads = 4, n_kv_heads = 2;
  std::vector<int32_t> seqs;  // {first, rows} per sequence; empty = src3 absent (one sequence)
  int64_t tokens = 20;
  bool causal = false;
  float scale = 0.0f;
  uint32_t window = 0;   // (ABI 1.14) symmetric: keys j with |i - j| <= window / 2
  float alibi = 0.0f;    // (ABI 1.14) ALiBi's max bias
};

// ALiBi's slope of head h (backend.h, loom_encoder_attention_params.alibi_max_bias).
double alibi_slope(int64_t h, int64_t n_heads, double max_bias) {
  int64_t n = 1;
  while (n * 2 <= n_heads) n *= 2;
  const double m0 = std::pow(2.0, -max_bias / double(n)), m1 = std::pow(2.0, -max_bias / 2.0 / double(n));
  return h < n ? std::pow(m0, double(h + 1)) : std::pow(m1, double(2 * (h - n) + 1));
}

void case_attention(CaseContext& ctx, const AttentionShape& sh, uint32_t seed) {
  if ((sh.window != 0 || sh.alibi != 0.0f) && ctx.plugin->desc().abi_minor < 14)
    not_supported("ATTENTION's window and ALiBi are ABI 1.14; the plugin speaks 1." + std::to_string(ctx.plugin->desc().abi_minor));
  std::mt19937 rng(seed);
  const int64_t d = sh.head_dim, h = sh.n_heads, hk = sh.n_kv_heads, n = sh.tokens;
  const std::vector<float> q0 = random_floats(rng, size_t(d * h * n), -2.0f, 2.0f);
  const std::vector<float> k0 = random_floats(rng, size_t(d * hk * n), -2.0f, 2.0f), v0 = random_floats(rng, size_t(d * hk * n));
  HostTensor q = f32_tensor(q0, d, h, n), k = f32_tensor(k0, d, hk, n), v = f32_tensor(v0, d, hk, n);
  std::vector<float> sentinel(size_t(d * h * n), 7.0f);  // rows outside every sequence stay as they are
  HostTensor dst = f32_tensor(sentinel, d, h, n);
  std::vector<int32_t> seqs = sh.seqs.empty() ? std::vector<int32_t>{0, int32_t(n)} : sh.seqs;
  HostTensor seq_table = i32_tensor(seqs, 2, int64_t(seqs.size() / 2));
  const loom_encoder_attention_params params{sizeof(loom_encoder_attention_params), sh.scale, sh.causal ? 1u : 0u, 0, sh.window, sh.alibi};
  auto dut = device_under_test(ctx);
  std::vector<HostTensor*> srcs = {&q, &k, &v};
  if (!sh.seqs.empty()) srcs.push_back(&seq_table);
  run_or_fail(*dut, LOOM_OP_ATTENTION, srcs, &dst, &params, "ATTENTION");

  std::vector<float> want = sentinel;
  const double scale = sh.scale == 0.0f ? 1.0 / std::sqrt(double(d)) : double(sh.scale);
  for (size_t s = 0; s < seqs.size() / 2; s++) {
    const int64_t first = seqs[2 * s], rows = seqs[2 * s + 1];
    for (int64_t i = 0; i < rows; i++)
      for (int64_t head = 0; head < h; head++) {
        const int64_t kv = head / (h / hk), n_keys = sh.causal ? i + 1 : rows;
        const double slope = sh.alibi > 0.0f ? alibi_slope(head, h, sh.alibi) : 0.0;
        std::vector<double> w(static_cast<size_t>(n_keys));
        double max = -1e300, sum = 0.0;
        for (int64_t j = 0; j < n_keys; j++) {
          if (sh.window != 0 && std::abs(i - j) > int64_t(sh.window / 2)) {
            w[size_t(j)] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int64_t e = 0; e < d; e++)
            dot += double(q0[size_t(((first + i) * h + head) * d + e)]) * k0[size_t(((first + j) * hk + kv) * d + e)];
          w[size_t(j)] = dot * scale - slope * double(std::abs(i - j));
          max = std::max(max, w[size_t(j)]);
        }
        for (double& x : w) sum += x = std::exp(x - max);
        for (int64_t e = 0; e < d; e++) {
          double o = 0.0;
          for (int64_t j = 0; j < n_keys; j++) o += w[size_t(j)] / sum * v0[size_t(((first + j) * hk + kv) * d + e)];
          want[size_t(((first + i) * h + head) * d + e)] = float(o);
        }
      }
  }
  require_close(dst.floats(), want, 1e-5, "ATTENTION");
}

void case_patches(CaseContext& ctx, int64_t width, int64_t height, int64_t channels, uint32_t p) {
  std::mt19937 rng(83);
  const std::vector<float> pixels = random_floats(rng, size_t(width * height * channels));
  HostTensor image = f32_tensor(pixels, width, height, channels);
  const int64_t gw = width / p, gh = height / p, row = int64_t(p) * p * channels;
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, row, gw * gh);
  const loom_patch_params params{sizeof(loom_patch_params), p};
  auto dut = device_under_test(ctx);
  run_or_fail(*dut, LOOM_OP_PATCHES, {&image}, &dst, &params, "PATCHES");
  std::vector<float> want(size_t(row * gw * gh));
  for (int64_t py = 0; py < gh; py++)
    for (int64_t px = 0; px < gw; px++)
      for (int64_t c = 0; c < channels; c++)
        for (int64_t ky = 0; ky < p; ky++)
          for (int64_t kx = 0; kx < p; kx++)
            want[size_t((px + py * gw) * row + kx + p * (ky + p * c))] =
                pixels[size_t((c * height + py * p + ky) * width + px * p + kx)];
  require_close(dst.floats(), want, 0.0, "PATCHES (a copy: exact)");
}

void case_pool_2d(CaseContext& ctx, int64_t channels, int64_t width, int64_t height, uint32_t k) {
  std::mt19937 rng(84);
  const std::vector<float> xs = random_floats(rng, size_t(channels * width * height));
  HostTensor x = f32_tensor(xs, channels, width, height);
  HostTensor dst = zero_tensor(LOOM_DTYPE_F32, channels, width / k, height / k);
  const loom_pool_params params{sizeof(loom_pool_params), k};
  auto dut = device_under_test(ctx);
  run_or_fail(*dut, LOOM_OP_POOL_2D, {&x}, &dst, &params, "POOL_2D");
  std::vector<float> want(size_t(channels * (width / k) * (height / k)));
  for (int64_t j = 0; j < height / k; j++)
    for (int64_t i = 0; i < width / k; i++)
      for (int64_t c = 0; c < channels; c++) {
        double sum = 0.0;
        for (int64_t dy = 0; dy < k; dy++)
          for (int64_t dx = 0; dx < k; dx++) sum += xs[size_t(((k * j + dy) * width + k * i + dx) * channels + c)];
        want[size_t((j * (width / k) + i) * channels + c)] = float(sum / double(k * k));
      }
  require_close(dst.floats(), want, 1e-6, "POOL_2D");
}

// CLAMP (ABI 1.11): exact, bounds included; infinities are clamped too. A minimum above the maximum
// is INVALID_ARGUMENT.
void case_clamp(CaseContext& ctx, bool inverted) {
  std::mt19937 rng(85);
  const int64_t n = 70, rows = 3;
  std::vector<float> xs = random_floats(rng, size_t(n * rows));
  for (float& v : xs) v *= 3.0f;
  xs[0] = -0.5f, xs[1] = 1.25f, xs[2] = INFINITY, xs[3] = -INFINITY;
  HostTensor x = f32_tensor(xs, n, rows), dst = zero_tensor(LOOM_DTYPE_F32, n, rows);
  const loom_clamp_params params{sizeof(loom_clamp_params), inverted ? 2.0f : -0.5f, inverted ? 1.0f : 1.25f};
  auto dut = device_under_test(ctx);
  if (inverted) {
    const loom_status st = dut->run(LOOM_OP_CLAMP, {&x}, &dst, &params, /*ask_supports=*/false);
    if (st == LOOM_STATUS_UNSUPPORTED) not_supported("CLAMP (ABI 1.11): " + dut->last_error());
    require(st == LOOM_STATUS_INVALID_ARGUMENT, "CLAMP with min 2 above max 1 must fail with INVALID_ARGUMENT, got " + std::to_string(st));
    return;
  }
  run_or_fail(*dut, LOOM_OP_CLAMP, {&x}, &dst, &params, "CLAMP");
  std::vector<float> want(xs.size());
  for (size_t i = 0; i < xs.size(); i++) want[i] = std::min(std::max(xs[i], -0.5f), 1.25f);
  require_close(dst.floats(), want, 0.0, "CLAMP (exact)");
}

// Malformed encoder ops are INVALID_ARGUMENT, never a crash or a silent partial result.
void case_bad_encoder_op(CaseContext& ctx, bool bad_grid) {
  auto dut = device_under_test(ctx);
  loom_status st;
  if (bad_grid) {
    HostTensor image = zero_tensor(LOOM_DTYPE_F32, 15, 14, 3), dst = zero_tensor(LOOM_DTYPE_F32, 7 * 7 * 3, 4);
    const loom_patch_params params{sizeof(loom_patch_params), 7};
    st = dut->run(LOOM_OP_PATCHES, {&image}, &dst, &params, /*ask_supports=*/false);
  } else {
    HostTensor q = zero_tensor(LOOM_DTYPE_F32, 8, 2, 6), k = zero_tensor(LOOM_DTYPE_F32, 8, 2, 6), v = zero_tensor(LOOM_DTYPE_F32, 8, 2, 6);
    HostTensor seqs = i32_tensor({0, 4, 4, 3}, 2, 2), dst = zero_tensor(LOOM_DTYPE_F32, 8, 2, 6);
    const loom_encoder_attention_params params{sizeof(loom_encoder_attention_params), 0.0f, 0, 0};
    st = dut->run(LOOM_OP_ATTENTION, {&q, &k, &v, &seqs}, &dst, &params, /*ask_supports=*/false);
  }
  if (st == LOOM_STATUS_UNSUPPORTED) not_supported("the encoder ops (ABI 1.9): " + dut->last_error());
  require(st == LOOM_STATUS_INVALID_ARGUMENT,
          std::string(bad_grid ? "PATCHES of a 15x14 image with patch size 7" : "ATTENTION with a sequence past the last row") +
              " must fail with INVALID_ARGUMENT, got " + std::to_string(st));
}

}  // namespace

std::vector<Case> backend_encoder_cases() {
  const auto backend_case = [](std::string name, std::function<void(CaseContext&)> run) {
    return Case{std::move(name), LOOM_PLUGIN_KIND_BACKEND, std::move(run)};
  };
  return {
      backend_case("backend.layer_norm.affine", [](CaseContext& ctx) { case_layer_norm(ctx, true, 1152); }),
      backend_case("backend.layer_norm.plain", [](CaseContext& ctx) { case_layer_norm(ctx, false, 40); }),
      backend_case("backend.attention.one_sequence", [](CaseContext& ctx) { case_attention(ctx, {}, 91); }),
      backend_case("backend.attention.three_sequences_gqa",
                   [](CaseContext& ctx) { case_attention(ctx, {72, 4, 2, {0, 7, 9, 1, 10, 10}, 20}, 92); }),
      backend_case("backend.attention.causal_scaled",
                   [](CaseContext& ctx) { case_attention(ctx, {64, 2, 2, {0, 12, 12, 5}, 17, true, 0.3f}, 93); }),
      backend_case("backend.attention.many_keys", [](CaseContext& ctx) { case_attention(ctx, {32, 2, 1, {}, 300}, 94); }),
      // ABI 1.14: windows narrower than some sequences and wider than others; 12 heads, so ALiBi's
      // slopes take both of ggml's series (8 from m0, 4 from m1).
      backend_case("backend.attention.window", [](CaseContext& ctx) {
        case_attention(ctx, {64, 4, 2, {0, 30, 30, 5, 40, 90}, 130, false, 0.0f, 16}, 95);
      }),
      backend_case("backend.attention.alibi", [](CaseContext& ctx) {
        case_attention(ctx, {32, 12, 12, {0, 40, 40, 7}, 47, false, 0.0f, 0, 8.0f}, 96);
      }),
      backend_case("backend.patches.rgb", [](CaseContext& ctx) { case_patches(ctx, 28, 21, 3, 7); }),
      backend_case("backend.patches.one_channel", [](CaseContext& ctx) { case_patches(ctx, 16, 16, 1, 4); }),
      backend_case("backend.pool_2d.k2", [](CaseContext& ctx) { case_pool_2d(ctx, 5, 8, 6, 2); }),
      backend_case("backend.pool_2d.k4", [](CaseContext& ctx) { case_pool_2d(ctx, 33, 16, 8, 4); }),
      backend_case("backend.clamp.rows", [](CaseContext& ctx) { case_clamp(ctx, false); }),
      backend_case("backend.clamp.inverted_bounds_is_an_error", [](CaseContext& ctx) { case_clamp(ctx, true); }),
      backend_case("backend.patches.grid_not_a_multiple_is_an_error", [](CaseContext& ctx) { case_bad_encoder_op(ctx, true); }),
      backend_case("backend.attention.sequence_out_of_range_is_an_error", [](CaseContext& ctx) { case_bad_encoder_op(ctx, false); }),
  };
}

}  // namespace loom::conformance
