// Conformance cases for LORA (ABI 1.16): a batch whose rows use several adapter slots, or none, gets
// dst += scale_s * B_s · (A_s · x) on exactly the rows of slot s, written out here in double precision.
// Ranks 8 and 64 (the shapes adapters ship in); A and B in F32 and F16; a slot that no row uses and a
// row of every slot interleaved, so a backend that groups rows by slot must put them back in place. A
// backend without the op answers UNSUPPORTED and the cases report not-supported.
#include <cmath>
#include <cstring>
#include <random>

#include "backend_support.h"

namespace loom::conformance {

namespace {

using namespace backend;

struct LoraShape {
  int64_t n_in, n_out, rank, n_slots;
  std::vector<int32_t> slots;  // one per row
  loom_dtype weights = LOOM_DTYPE_F32;
};

// An F16 value, exactly.
float half_value(uint16_t h) {
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  const float magnitude = exponent == 0 ? std::ldexp(float(mantissa), -24) : std::ldexp(float(1024 + mantissa), exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// F32 values, or their F16 roundings stored as F16 (the reference reads the rounded values).
HostTensor weight_tensor(std::vector<float>& values, loom_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2) {
  if (dtype == LOOM_DTYPE_F32) return f32_tensor(values, ne0, ne1, ne2);
  HostTensor t = zero_tensor(LOOM_DTYPE_F16, ne0, ne1, ne2);
  auto* h = reinterpret_cast<uint16_t*>(t.data.data());
  for (size_t i = 0; i < values.size(); i++) {
    h[i] = to_half(values[i]);
    values[i] = half_value(h[i]);
  }
  return t;
}

void case_lora(CaseContext& ctx, const LoraShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n_tok = int64_t(s.slots.size());
  // B as the op takes it, transposed: b[(slot * rank + j) * n_out + o] is B_slot[o, j].
  std::vector<float> a = random_floats(rng, size_t(s.n_in * s.rank * s.n_slots)), b = random_floats(rng, size_t(s.rank * s.n_out * s.n_slots));
  std::vector<float> xs = random_floats(rng, size_t(s.n_in * n_tok)), base = random_floats(rng, size_t(s.n_out * n_tok));
  std::vector<float> scales;
  for (int64_t i = 0; i < s.n_slots; i++) scales.push_back(0.25f + 0.5f * float(i));
  HostTensor A = weight_tensor(a, s.weights, s.n_in, s.rank, s.n_slots), B = weight_tensor(b, s.weights, s.n_out, s.rank, s.n_slots);
  HostTensor x = f32_tensor(xs, s.n_in, n_tok), slots = i32_tensor(s.slots, n_tok), sc = f32_tensor(scales, s.n_slots);
  HostTensor dst = f32_tensor(base, s.n_out, n_tok);
  auto dut = device_under_test(ctx);
  const loom_status st = dut->run(LOOM_OP_LORA, {&A, &B, &x, &slots, &sc}, &dst, nullptr);
  if (st == LOOM_STATUS_UNSUPPORTED) not_supported("LORA (ABI 1.16): " + dut->last_error());
  require(st == LOOM_STATUS_OK, "LORA failed (" + std::to_string(st) + "): " + dut->last_error());
  std::vector<float> want = base;
  for (int64_t t = 0; t < n_tok; t++) {
    const int64_t slot = s.slots[size_t(t)];
    if (slot < 0) continue;
    std::vector<double> down(size_t(s.rank), 0.0);
    for (int64_t j = 0; j < s.rank; j++)
      for (int64_t i = 0; i < s.n_in; i++) down[size_t(j)] += double(a[size_t((slot * s.rank + j) * s.n_in + i)]) * xs[size_t(t * s.n_in + i)];
    for (int64_t o = 0; o < s.n_out; o++) {
      double up = 0.0;
      for (int64_t j = 0; j < s.rank; j++) up += double(b[size_t((slot * s.rank + j) * s.n_out + o)]) * down[size_t(j)];
      want[size_t(t * s.n_out + o)] = float(double(base[size_t(t * s.n_out + o)]) + scales[size_t(slot)] * up);
    }
  }
  // Sums of n_in then rank products of values in [-1, 1]: float accumulation error grows with both.
  require_close(dst.floats(), want, 1e-5 * double(s.n_in + s.rank), "LORA");
}

// A row naming a slot past the last is INVALID_ARGUMENT, never a read out of bounds.
void case_bad_slot(CaseContext& ctx) {
  HostTensor A = zero_tensor(LOOM_DTYPE_F32, 16, 4, 2), B = zero_tensor(LOOM_DTYPE_F32, 8, 4, 2), x = zero_tensor(LOOM_DTYPE_F32, 16, 3);
  HostTensor slots = i32_tensor({0, 2, -1}, 3), sc = f32_tensor({1.0f, 1.0f}, 2), dst = zero_tensor(LOOM_DTYPE_F32, 8, 3);
  auto dut = device_under_test(ctx);
  const loom_status st = dut->run(LOOM_OP_LORA, {&A, &B, &x, &slots, &sc}, &dst, nullptr, /*ask_supports=*/false);
  if (st == LOOM_STATUS_UNSUPPORTED) not_supported("LORA (ABI 1.16): " + dut->last_error());
  require(st == LOOM_STATUS_INVALID_ARGUMENT, "LORA with slot 2 of 2 slots must fail with INVALID_ARGUMENT, got " + std::to_string(st));
}

}  // namespace

std::vector<Case> backend_lora_cases() {
  const auto backend_case = [](std::string name, std::function<void(CaseContext&)> run) {
    return Case{std::move(name), LOOM_PLUGIN_KIND_BACKEND, std::move(run)};
  };
  return {
      backend_case("backend.lora.rank8_mixed_batch", [](CaseContext& ctx) {
        case_lora(ctx, {96, 80, 8, 4, {0, -1, 2, 2, 0, 3, -1, 0, 2}}, 101);  // slot 1 unused
      }),
      backend_case("backend.lora.rank64_f16", [](CaseContext& ctx) {
        case_lora(ctx, {256, 192, 64, 2, {1, 0, 1, -1, 1}, LOOM_DTYPE_F16}, 102);
      }),
      backend_case("backend.lora.decode_one_row", [](CaseContext& ctx) { case_lora(ctx, {128, 128, 16, 3, {2}}, 103); }),
      backend_case("backend.lora.no_adapter_rows_leave_dst", [](CaseContext& ctx) { case_lora(ctx, {64, 32, 8, 2, {-1, -1}}, 104); }),
      backend_case("backend.lora.slot_out_of_range_is_an_error", [](CaseContext& ctx) { case_bad_slot(ctx); }),
  };
}

}  // namespace loom::conformance
