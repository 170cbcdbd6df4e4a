// Conformance cases for the quantizer kind. Every declared format is exercised; formats this suite
// knows (GGML and Loom dtypes) also get error bounds derived below, unknown ones the generic checks.
//
// Error bounds (d = the block's scale, amax = max |x| of the block or row, 2^-11 = f16 relative
// rounding, valid while the scale is an f16 normal, i.e. amax not tiny):
//  F16     |e| <= max(|x| 2^-11, 2^-25)                   (round to nearest, subnormal step 2^-24)
//  BF16    |e| <= max(|x| 2^-8, 2^-134)
//  Q8_0    |e| <= d/2 + 127 |d - f16(d)| <= amax (1/254 + 2^-11),  d = amax/127
//  Q4_0    |e| <= d + 8 |d - f16(d)| <= amax/8 (1 + 2^-8): values round to d/2, but the extreme
//          opposite the signed max lands on +8, clamped to 7 (an error of one whole step)
//  I8_ROW, INT8_KV   |e| <= amax/254 (1 + 1e-5)   (f32 scale, so also for tiny values)
//  Q4_K, Q6_K, I4_G128 have searched scales and no useful worst case; they get RMS bounds on
//  N(0,1) data from the uniform-quantizer noise step/sqrt(12), step = expected range / levels:
//    Q4_K   32-value sub-blocks, 16 levels, E[range of 32 N(0,1)] ~ 4.1  -> 0.079; bound 0.085
//    Q6_K   16-value sub-blocks, 64 levels, E[2 max|x| of 16] ~ 3.5      -> 0.016; bound 0.020
//    I4_G128 128-value groups, 16 levels, E[range of 128] ~ 5.2          -> 0.100; bound 0.105
//  (the searches beat the estimate; the bound allows for the 6-bit scale rounding).
//  Q4_1, Q5_1 |e| <= amax (1/15 or 1/31 + 2^-9): d = range/levels, range <= 2 amax, values round to
//          d/2, plus the f16 rounding of d (times up to 31 levels) and of the min
//  Q5_0    as Q4_0 with 16 levels each side: |e| <= amax/16 (1 + 2^-8)
//  Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS: RMS bounds on N(0,1) data, ggml's own quantizer's measured RMS
//          (0.297, 0.151, 0.036, 0.076, 0.077; the same bytes as this plugin's) plus 10%
//  MXFP4   scale 2^(floor(log2 amax) - 3) =: d <= amax/8 with levels 0..12 d: values up to 8d round to
//          within d, those in (8d, 12d] within 2d, and amax < 16d clips to 12d, so |e| < 4d <= amax/4
//          (measured on N(0,1): 0.2499 amax; RMS 0.115, bound 0.13). A constant is such a value:
//          it comes back within 25%, not to f16 precision.
//  F8_E4M3_B32 d = amax/448 in f32; E4M3's 3 mantissa bits round a normal value within 2^-4 of it, a
//          subnormal one (below 2^-6 d) within 2^-10 d (its steps are 2^-9 d); RMS on N(0,1) ~0.027,
//          bound 0.035.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "conformance_case.h"

namespace loom::conformance {

namespace {

constexpr uint8_t kGuardByte = 0xA5;
constexpr size_t kGuardSize = 64;

struct KnownFormat {
  double (*elem_bound)(double x, double amax);  // per-element bound, NULL = none (searched formats)
  int64_t bound_group;                          // elements amax is taken over (0 = whole row)
  double rms_bound_normal;                      // RMS bound on N(0,1) data
  bool is_requantize_exact;                     // re-quantizing the dequantized data gives the same bytes
  uint32_t row_elem_bytes;                      // per-row formats: bytes per element
};

const std::map<loom_dtype, KnownFormat>& known_formats() {
  static const std::map<loom_dtype, KnownFormat> known = {
      {LOOM_DTYPE_F16, {[](double x, double) { return std::max(std::fabs(x) * 0x1p-11, 0x1p-25); }, 1, 3e-4, true, 0}},
      {LOOM_DTYPE_BF16, {[](double x, double) { return std::max(std::fabs(x) * 0x1p-8, 0x1p-134); }, 1, 2.5e-3, true, 0}},
      {LOOM_DTYPE_Q8_0, {[](double, double amax) { return amax * (1.0 / 254 + 0x1p-11); }, 32, 0.0065, true, 0}},
      {LOOM_DTYPE_Q4_0, {[](double, double amax) { return amax / 8 * (1 + 0x1p-8); }, 32, 0.13, true, 0}},
      {LOOM_DTYPE_I8_ROW, {[](double, double amax) { return amax / 254 * (1 + 1e-5); }, 0, 0.0095, true, 1}},
      {LOOM_DTYPE_INT8_KV, {[](double, double amax) { return amax / 254 * (1 + 1e-5); }, 0, 0.0095, true, 1}},
      {LOOM_DTYPE_Q4_1, {[](double, double amax) { return amax * (1.0 / 15 + 0x1p-9); }, 32, 0.085, false, 0}},
      {LOOM_DTYPE_Q5_0, {[](double, double amax) { return amax / 16 * (1 + 0x1p-8); }, 32, 0.047, true, 0}},
      {LOOM_DTYPE_Q5_1, {[](double, double amax) { return amax * (1.0 / 31 + 0x1p-9); }, 32, 0.042, false, 0}},
      {LOOM_DTYPE_Q2_K, {nullptr, 256, 0.33, false, 0}},
      {LOOM_DTYPE_Q3_K, {nullptr, 256, 0.165, false, 0}},
      {LOOM_DTYPE_Q4_K, {nullptr, 256, 0.085, false, 0}},
      {LOOM_DTYPE_Q5_K, {nullptr, 256, 0.040, false, 0}},
      {LOOM_DTYPE_IQ4_NL, {nullptr, 32, 0.083, false, 0}},
      {LOOM_DTYPE_IQ4_XS, {nullptr, 256, 0.084, false, 0}},
      {LOOM_DTYPE_MXFP4, {[](double, double amax) { return amax / 4; }, 32, 0.13, true, 0}},
      {LOOM_DTYPE_F8_E4M3_B32, {[](double x, double amax) { return std::max(std::fabs(x) * 0x1p-4, amax / 448 * 0x1p-10) * (1 + 0x1p-12); }, 32, 0.035, false, 0}},
      {LOOM_DTYPE_Q6_K, {nullptr, 256, 0.020, false, 0}},
      {LOOM_DTYPE_I4_G128, {nullptr, 128, 0.105, false, 0}},
  };
  return known;
}

const KnownFormat* known_format(loom_dtype dtype) {
  auto it = known_formats().find(dtype);
  return it == known_formats().end() ? nullptr : &it->second;
}

class Quantizer {
 public:
  explicit Quantizer(const CaseContext& ctx) : t_(ctx.plugin->quantizer()) {
    require(t_ != nullptr, "plugin has no quantizer table");
    char error[LOOM_ERROR_BUFFER_SIZE] = {};
    const loom_status status = t_->create(ctx.host, ctx.plugin_config_json.c_str(), &q_, error, sizeof(error));
    require(status == LOOM_STATUS_OK && q_ != nullptr, "create failed (" + std::to_string(status) + "): " + error);
  }
  ~Quantizer() {
    if (q_ != nullptr) t_->destroy(q_);
  }
  Quantizer(const Quantizer&) = delete;
  Quantizer& operator=(const Quantizer&) = delete;

  const loom_quantizer_i* operator->() const { return t_; }
  loom_quantizer_t* get() const { return q_; }
  std::string error() const { return t_->last_error(q_); }

  std::vector<loom_quant_format> formats() const {
    std::vector<loom_quant_format> out;
    const uint32_t n = t_->format_count(q_);
    for (uint32_t i = 0; i < n; ++i) {
      loom_quant_format f{};
      f.struct_size = sizeof(f);
      require(t_->format_get(q_, i, &f) == LOOM_STATUS_OK, "format_get(" + std::to_string(i) + ") failed: " + error());
      require(f.name != nullptr, "format " + std::to_string(i) + " has no name");
      out.push_back(f);
    }
    return out;
  }
  uint64_t row_size(loom_dtype dtype, int64_t n_cols) const {
    uint64_t bytes = 0;
    const loom_status status = t_->row_size(q_, dtype, n_cols, &bytes);
    require(status == LOOM_STATUS_OK, "row_size(" + std::to_string(n_cols) + ") failed: " + error());
    return bytes;
  }
  // Quantize into a buffer with a guard region after it; checks the guard.
  std::vector<uint8_t> quantize(loom_dtype dtype, const std::vector<float>& x, int64_t n_rows, int64_t n_cols,
                                const float* importance = nullptr) const {
    const uint64_t bytes = row_size(dtype, n_cols) * static_cast<uint64_t>(n_rows);
    std::vector<uint8_t> buffer(bytes + kGuardSize, kGuardByte);
    const loom_status status = raw_quantize(dtype, x.data(), n_rows, n_cols, importance, buffer.data(), bytes);
    require(status == LOOM_STATUS_OK, "quantize failed (" + std::to_string(status) + "): " + error());
    require(std::all_of(buffer.begin() + static_cast<ptrdiff_t>(bytes), buffer.end(), [](uint8_t b) { return b == kGuardByte; }),
            "quantize wrote past dst_size");
    buffer.resize(bytes);
    return buffer;
  }
  loom_status raw_quantize(loom_dtype dtype, const float* x, int64_t n_rows, int64_t n_cols, const float* importance,
                           void* dst, uint64_t dst_size) const {
    loom_quantize_request r{};
    r.struct_size = sizeof(r);
    r.dtype = dtype;
    r.src = x;
    r.n_rows = n_rows;
    r.n_cols = n_cols;
    r.importance = importance;
    r.dst = dst;
    r.dst_size = dst_size;
    return t_->quantize(q_, &r);
  }
  std::vector<float> dequantize(loom_dtype dtype, const std::vector<uint8_t>& q, int64_t n_rows, int64_t n_cols) const {
    std::vector<float> y(static_cast<size_t>(n_rows * n_cols) + kGuardSize / sizeof(float), 1234.5f);
    const loom_status status = t_->dequantize(q_, dtype, q.data(), q.size(), n_rows, n_cols, y.data());
    require(status == LOOM_STATUS_OK, "dequantize failed (" + std::to_string(status) + "): " + error());
    require(std::all_of(y.begin() + n_rows * n_cols, y.end(), [](float v) { return v == 1234.5f; }),
            "dequantize wrote past n_rows * n_cols");
    y.resize(static_cast<size_t>(n_rows * n_cols));
    return y;
  }

 private:
  const loom_quantizer_i* t_ = nullptr;
  loom_quantizer_t* q_ = nullptr;
};

// A row length every format accepts: a multiple of every block size.
int64_t common_cols(const std::vector<loom_quant_format>& formats, int64_t at_least) {
  int64_t n = at_least;
  for (const auto& f : formats) {
    if (f.block_elems > 1) n = std::lcm(n, static_cast<int64_t>(f.block_elems));
  }
  return n;
}

std::vector<float> normal_data(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

// Checks the per-element bound of a known format (if it has one) over every bound group.
void check_elem_bound(const loom_quant_format& f, const std::vector<float>& x, const std::vector<float>& y, int64_t n_cols,
                      const std::string& what) {
  const KnownFormat* known = known_format(f.dtype);
  if (known == nullptr || known->elem_bound == nullptr) return;
  const int64_t group = known->bound_group == 0 ? n_cols : known->bound_group;
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(group)) {
    double amax = 0;
    for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[start + i])));
    for (int64_t i = 0; i < group; ++i) {
      const size_t k = start + static_cast<size_t>(i);
      const double err = std::fabs(static_cast<double>(y[k]) - x[k]);
      const double bound = known->elem_bound(x[k], amax);
      require(err <= bound, std::string(f.name) + " " + what + ": |error| " + std::to_string(err) + " at element " +
                                std::to_string(k) + " (x = " + std::to_string(x[k]) + ") exceeds the bound " +
                                std::to_string(bound));
    }
  }
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// ---- cases ------------------------------------------------------------------------------------

void case_formats_described(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  require(!formats.empty(), "the quantizer declares no format");
  for (const auto& f : formats) {
    const std::string name = f.name;
    const bool is_row = (f.flags & LOOM_QUANT_FORMAT_ROW) != 0;
    require((f.flags & (LOOM_QUANT_FORMAT_WEIGHT | LOOM_QUANT_FORMAT_KV)) != 0, name + " is usable for neither weights nor KV");
    if (is_row) {
      require(f.block_elems == 0, name + ": per-row formats must have block_elems 0");
      const uint64_t r1 = q.row_size(f.dtype, 64), r2 = q.row_size(f.dtype, 128);
      require(r1 >= f.block_bytes && r2 > r1, name + ": row_size must grow with n_cols and include the row metadata");
      if (const KnownFormat* known = known_format(f.dtype)) {
        require(r1 == f.block_bytes + 64 * known->row_elem_bytes, name + ": row_size(64) disagrees with the layout");
      }
    } else {
      require(f.block_elems > 0 && f.block_bytes > 0, name + ": block_elems and block_bytes must be positive");
      for (int64_t k : {1, 3, 8}) {
        require(q.row_size(f.dtype, k * f.block_elems) == static_cast<uint64_t>(k) * f.block_bytes,
                name + ": row_size(" + std::to_string(k) + " blocks) is not " + std::to_string(k) + " * block_bytes");
      }
    }
  }
  // GGML layouts are fixed by the file format.
  const std::map<loom_dtype, std::pair<uint32_t, uint32_t>> ggml = {{LOOM_DTYPE_Q8_0, {32, 34}},  {LOOM_DTYPE_Q4_0, {32, 18}},
                                                                    {LOOM_DTYPE_Q4_K, {256, 144}}, {LOOM_DTYPE_Q6_K, {256, 210}},
                                                                    {LOOM_DTYPE_F16, {1, 2}},      {LOOM_DTYPE_BF16, {1, 2}},
                                                                    {LOOM_DTYPE_I4_G128, {128, 68}}};
  for (const auto& f : formats) {
    auto it = ggml.find(f.dtype);
    if (it != ggml.end()) {
      require(f.block_elems == it->second.first && f.block_bytes == it->second.second,
              std::string(f.name) + " does not have the standard block layout");
    }
  }
}

void case_round_trip_normal(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  const int64_t n_cols = common_cols(formats, 1024), n_rows = 48;
  const std::vector<float> x = normal_data(static_cast<size_t>(n_rows * n_cols), 42);
  for (const auto& f : formats) {
    const std::vector<float> y = q.dequantize(f.dtype, q.quantize(f.dtype, x, n_rows, n_cols), n_rows, n_cols);
    check_elem_bound(f, x, y, n_cols, "on N(0,1) data");
    const double err = rms(x, y);
    const KnownFormat* known = known_format(f.dtype);
    const double bound = known ? known->rms_bound_normal : 0.5;  // unknown formats: at least better than nothing
    require(err <= bound, std::string(f.name) + ": RMS error " + std::to_string(err) + " on N(0,1) exceeds " + std::to_string(bound));
  }
}

void case_adversarial_inputs(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  const int64_t n = common_cols(formats, 256);
  for (const auto& f : formats) {
    const std::string name = f.name;
    // All zero: exact zeros.
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    for (float v : q.dequantize(f.dtype, q.quantize(f.dtype, zeros, 1, n), 1, n)) {
      require(v == 0.0f, name + ": an all-zero row does not dequantize to exact zeros");
    }
    // Constant rows: every format represents a constant to f16 precision (2^-7 allows for K-quant
    // 6-bit scale rounding).
    for (float c : {0.7f, -3.1f, 1000.0f, -0.01f}) {
      const std::vector<float> x(static_cast<size_t>(n), c);
      const std::vector<float> y = q.dequantize(f.dtype, q.quantize(f.dtype, x, 1, n), 1, n);
      const double constant_rel = f.dtype == LOOM_DTYPE_MXFP4 ? 0.25 : 0x1p-7;  // see the MXFP4 bound above
      for (float v : y) {
        require(std::fabs(v - c) <= std::fabs(c) * constant_rel,
                name + ": constant " + std::to_string(c) + " dequantizes to " + std::to_string(v));
      }
      check_elem_bound(f, x, y, n, "on a constant row");
    }
    // One huge outlier among small values: the outlier survives, the bounds still hold.
    std::vector<float> x = normal_data(static_cast<size_t>(n), 7, 0.01f);
    x[static_cast<size_t>(n / 3)] = 1000.0f;
    std::vector<float> y = q.dequantize(f.dtype, q.quantize(f.dtype, x, 1, n), 1, n);
    check_elem_bound(f, x, y, n, "with an outlier");
    const double outlier_rel = f.dtype == LOOM_DTYPE_MXFP4 ? 0.25 : 1.0 / 16;  // MXFP4 clips its top quarter
    require(std::fabs(y[static_cast<size_t>(n / 3)] - 1000.0f) <= 1000.0f * outlier_rel,
            name + ": the outlier 1000 dequantizes to " + std::to_string(y[static_cast<size_t>(n / 3)]));
    for (size_t i = 0; i < y.size(); ++i) {
      const double bound = i == static_cast<size_t>(n / 3) ? 1000.0 * outlier_rel : 1000.0 / 8;
      require(std::isfinite(y[i]) && std::fabs(y[i] - x[i]) <= bound, name + ": an outlier ruined its neighbours");
    }
    // Tiny values: finite, never larger than the input scale (f16 scales may flush them to zero).
    for (float scale : {1e-6f, 1e-30f}) {
      x = normal_data(static_cast<size_t>(n), 9, scale);
      y = q.dequantize(f.dtype, q.quantize(f.dtype, x, 1, n), 1, n);
      double amax = 0;
      for (float v : x) amax = std::max(amax, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < y.size(); ++i) {
        require(std::isfinite(y[i]) && std::fabs(y[i] - x[i]) <= 2 * amax,
                name + ": tiny input " + std::to_string(x[i]) + " dequantizes to " + std::to_string(y[i]));
      }
      const loom_dtype d = f.dtype;
      if (d == LOOM_DTYPE_I8_ROW || d == LOOM_DTYPE_INT8_KV || d == LOOM_DTYPE_BF16) check_elem_bound(f, x, y, n, "on tiny values");
    }
  }
}

void case_requantize_stable(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  const int64_t n_cols = common_cols(formats, 1024), n_rows = 16;
  const std::vector<float> x = normal_data(static_cast<size_t>(n_rows * n_cols), 3);
  for (const auto& f : formats) {
    const std::vector<uint8_t> q1 = q.quantize(f.dtype, x, n_rows, n_cols);
    const std::vector<float> y1 = q.dequantize(f.dtype, q1, n_rows, n_cols);
    const std::vector<uint8_t> q2 = q.quantize(f.dtype, y1, n_rows, n_cols);
    const std::vector<float> y2 = q.dequantize(f.dtype, q2, n_rows, n_cols);
    const KnownFormat* known = known_format(f.dtype);
    if (known != nullptr && known->is_requantize_exact) {
      require(q1 == q2, std::string(f.name) + ": re-quantizing the dequantized data changed the bytes");
    } else {
      // Searched scales may pick another grid for data already on a grid: the second pass must not
      // drift by more than a quarter of the format's own first-pass error.
      const double drift = rms(y1, y2), first = rms(x, y1);
      require(drift <= 0.25 * first, std::string(f.name) + ": re-quantizing drifts by RMS " + std::to_string(drift) +
                                         " (first pass error " + std::to_string(first) + ")");
    }
  }
}

void case_non_finite_rejected(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  const int64_t n = common_cols(formats, 256);
  for (const auto& f : formats) {
    for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
      std::vector<float> x = normal_data(static_cast<size_t>(2 * n), 5);
      x[static_cast<size_t>(n + 17)] = bad;
      std::vector<uint8_t> dst(q.row_size(f.dtype, n) * 2);
      const loom_status status = q.raw_quantize(f.dtype, x.data(), 2, n, nullptr, dst.data(), dst.size());
      require(status == LOOM_STATUS_INVALID_ARGUMENT, std::string(f.name) + ": " + std::to_string(bad) +
                                                          " input gave status " + std::to_string(status) + ", expected INVALID_ARGUMENT");
      require(!q.error().empty(), std::string(f.name) + ": non-finite input refused without a message");
    }
  }
}

void case_shapes(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  for (const auto& f : formats) {
    const std::string name = f.name;
    if (f.block_elems > 1) {
      const int64_t odd = f.block_elems + 1;
      uint64_t bytes = 0;
      require(q->row_size(q.get(), f.dtype, odd, &bytes) == LOOM_STATUS_INVALID_ARGUMENT,
              name + ": row_size of a non-multiple of the block must be INVALID_ARGUMENT");
      std::vector<float> x(static_cast<size_t>(odd), 1.0f);
      std::vector<uint8_t> dst(1024);
      require(q.raw_quantize(f.dtype, x.data(), 1, odd, nullptr, dst.data(), dst.size()) == LOOM_STATUS_INVALID_ARGUMENT,
              name + ": quantizing a non-multiple of the block must be INVALID_ARGUMENT");
      require(!q.error().empty(), name + ": odd n_cols refused without a message");
    }
    // Rows are independent: many rows at once equal the rows one by one (and one row works).
    const int64_t n_cols = f.block_elems > 1 ? f.block_elems : 96;
    const int64_t n_rows = 300;
    const std::vector<float> x = normal_data(static_cast<size_t>(n_rows * n_cols), 11);
    const std::vector<uint8_t> all = q.quantize(f.dtype, x, n_rows, n_cols);
    const uint64_t row = q.row_size(f.dtype, n_cols);
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{150}, n_rows - 1}) {
      const std::vector<float> one(x.begin() + r * n_cols, x.begin() + (r + 1) * n_cols);
      const std::vector<uint8_t> single = q.quantize(f.dtype, one, 1, n_cols);
      require(std::equal(single.begin(), single.end(), all.begin() + static_cast<ptrdiff_t>(r * static_cast<int64_t>(row))),
              name + ": row " + std::to_string(r) + " quantized alone differs from the same row in a batch");
    }
  }
}

void case_bad_buffers(CaseContext& ctx) {
  Quantizer q(ctx);
  const auto formats = q.formats();
  const int64_t n = common_cols(formats, 256);
  const std::vector<float> x = normal_data(static_cast<size_t>(2 * n), 13);
  for (const auto& f : formats) {
    const std::string name = f.name;
    const uint64_t needed = q.row_size(f.dtype, n) * 2;
    std::vector<uint8_t> dst(needed + kGuardSize, kGuardByte);
    require(q.raw_quantize(f.dtype, x.data(), 2, n, nullptr, dst.data(), needed - 1) != LOOM_STATUS_OK,
            name + ": quantize into a dst one byte too small must fail");
    require(!q.error().empty(), name + ": dst too small refused without a message");
    require(std::all_of(dst.begin() + static_cast<ptrdiff_t>(needed - 1), dst.end(), [](uint8_t b) { return b == kGuardByte; }),
            name + ": a refused quantize wrote past dst_size");
    std::vector<uint8_t> src(needed, 0);
    std::vector<float> out(static_cast<size_t>(2 * n));
    require(q->dequantize(q.get(), f.dtype, src.data(), needed - 1, 2, n, out.data()) != LOOM_STATUS_OK,
            name + ": dequantize of a src one byte too small must fail");
  }
  std::vector<uint8_t> dst(4096);
  require(q.raw_quantize(987654, x.data(), 1, 32, nullptr, dst.data(), dst.size()) == LOOM_STATUS_UNSUPPORTED,
          "quantize to an unknown dtype must be UNSUPPORTED");
  uint64_t bytes = 0;
  require(q->row_size(q.get(), 987654, 32, &bytes) == LOOM_STATUS_UNSUPPORTED, "row_size of an unknown dtype must be UNSUPPORTED");
}

void case_activation_aware_int4(CaseContext& ctx) {
  Quantizer q(ctx);
  bool declared = false;
  for (const auto& f : q.formats()) declared |= f.dtype == LOOM_DTYPE_I4_G128;
  if (!declared) not_supported("I4_G128 is not declared");
  const int64_t n_cols = 512, n_rows = 32;
  const std::vector<float> w = normal_data(static_cast<size_t>(n_rows * n_cols), 21);
  // Skewed per-column importance, like activation statistics: a few columns matter far more.
  std::mt19937 rng(5);
  std::lognormal_distribution<float> skew(0.0f, 1.5f);
  std::vector<float> importance(static_cast<size_t>(n_cols));
  for (auto& v : importance) v = skew(rng);
  const std::vector<float> plain = q.dequantize(LOOM_DTYPE_I4_G128, q.quantize(LOOM_DTYPE_I4_G128, w, n_rows, n_cols), n_rows, n_cols);
  const std::vector<float> aware =
      q.dequantize(LOOM_DTYPE_I4_G128, q.quantize(LOOM_DTYPE_I4_G128, w, n_rows, n_cols, importance.data()), n_rows, n_cols);
  // The stored weights approximate W itself (no activation rescaling), so they are compared to W.
  auto weighted = [&](const std::vector<float>& y) {
    double sum = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t c = 0; c < n_cols; ++c) {
        const double e = static_cast<double>(y[r * n_cols + c]) - w[r * n_cols + c];
        sum += importance[static_cast<size_t>(c)] * e * e;
      }
    }
    return sum;
  };
  const double e_plain = weighted(plain), e_aware = weighted(aware);
  require(e_aware <= e_plain * (1 + 1e-9), "activation-aware I4_G128 has a larger importance-weighted error (" +
                                               std::to_string(e_aware) + ") than plain (" + std::to_string(e_plain) + ")");
  require(e_aware < e_plain * 0.98, "importance changed nothing measurable (" + std::to_string(e_aware) + " vs " +
                                        std::to_string(e_plain) + ")");
  require(rms(w, aware) <= 0.15, "activation-aware I4_G128 is far from W (RMS " + std::to_string(rms(w, aware)) + ")");
  std::vector<float> negative = importance;
  negative[3] = -1.0f;
  std::vector<uint8_t> dst(q.row_size(LOOM_DTYPE_I4_G128, n_cols) * n_rows);
  require(q.raw_quantize(LOOM_DTYPE_I4_G128, w.data(), n_rows, n_cols, negative.data(), dst.data(), dst.size()) ==
              LOOM_STATUS_INVALID_ARGUMENT,
          "negative importance must be INVALID_ARGUMENT");
  negative[3] = std::nanf("");
  require(q.raw_quantize(LOOM_DTYPE_I4_G128, w.data(), n_rows, n_cols, negative.data(), dst.data(), dst.size()) ==
              LOOM_STATUS_INVALID_ARGUMENT,
          "NaN importance must be INVALID_ARGUMENT");
}

}  // namespace

std::vector<Case> quantizer_cases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, std::function<void(CaseContext&)> run) {
    cases.push_back({std::move(name), LOOM_PLUGIN_KIND_QUANTIZER, std::move(run)});
  };
  add("quantizer.formats_described", case_formats_described);
  add("quantizer.round_trip_normal", case_round_trip_normal);
  add("quantizer.adversarial_inputs", case_adversarial_inputs);
  add("quantizer.requantize_stable", case_requantize_stable);
  add("quantizer.non_finite_rejected", case_non_finite_rejected);
  add("quantizer.shapes", case_shapes);
  add("quantizer.bad_buffers", case_bad_buffers);
  add("quantizer.activation_aware_int4", case_activation_aware_int4);
  return cases;
}

}  // namespace loom::conformance
