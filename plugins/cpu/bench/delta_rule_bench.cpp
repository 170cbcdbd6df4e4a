#include "delta_rule_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace loom::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kD = 128, kKeyHeads = 16, kValueHeads = 32, kMaxTokens = 1024;

loom_tensor tensor(loom_buffer_t* buf, uint64_t offset, std::initializer_list<int64_t> ne, loom_dtype dtype = LOOM_DTYPE_F32) {
  loom_tensor t{sizeof(loom_tensor), dtype, buf, offset, {1, 1, 1, 1}, {4, 0, 0, 0}};
  int d = 0;
  for (int64_t n : ne) t.ne[d++] = n;
  for (d = 1; d < 4; ++d) t.nb[d] = t.nb[d - 1] * uint64_t(t.ne[d - 1]);
  return t;
}

// The layer's inputs for kMaxTokens tokens, a one-slot state pool and a {0, n, 0, 0} table.
class DeltaLayer {
 public:
  DeltaLayer(const loom_backend_i* api, loom_backend_t* be, std::mt19937& rng) : api_(api), be_(be) {
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), decay(-0.2f, 0.0f), beta(0.0f, 1.0f);
    qk_ = upload(random(rng, unit, kD * kKeyHeads * 2 * kMaxTokens));
    v_ = upload(random(rng, unit, kD * kValueHeads * kMaxTokens));
    g_ = upload(random(rng, decay, kValueHeads * kMaxTokens));
    beta_ = upload(random(rng, beta, kValueHeads * kMaxTokens));
    states_ = upload(std::vector<float>(size_t(kD * kD * kValueHeads), 0.0f));
    dst_ = upload(std::vector<float>(size_t(kD * kValueHeads * kMaxTokens), 0.0f));
    seqs_ = upload(std::vector<float>(4, 0.0f));
  }
  ~DeltaLayer() {
    for (auto* b : {qk_, v_, g_, beta_, states_, dst_, seqs_}) api_->buffer_destroy(be_, b);
  }

  // Tokens [first, first + n) as one sequence continuing the state in slot 0.
  void run(int64_t first, int64_t n) {
    const int32_t table[4] = {0, int32_t(n), 0, 0};
    api_->copy_to_device(be_, nullptr, seqs_, 0, table, sizeof(table));
    const auto at = [](int64_t t, int64_t floats_per_token) { return uint64_t(t * floats_per_token) * 4; };
    loom_op op{};
    op.struct_size = sizeof(loom_op);
    op.type = LOOM_OP_GATED_DELTA_NET;
    op.n_src = 6;
    op.src[0] = tensor(qk_, at(first, kD * kKeyHeads * 2), {kD, kKeyHeads, 2, n});
    op.src[1] = tensor(v_, at(first, kD * kValueHeads), {kD, kValueHeads, n});
    op.src[2] = tensor(g_, at(first, kValueHeads), {kValueHeads, n});
    op.src[3] = tensor(beta_, at(first, kValueHeads), {kValueHeads, n});
    op.src[4] = tensor(states_, 0, {kD, kD, kValueHeads, 1});
    op.src[5] = tensor(seqs_, 0, {4, 1}, LOOM_DTYPE_I32);
    op.dst = tensor(dst_, at(first, kD * kValueHeads), {kD, kValueHeads, n});
    const loom_delta_net_params params{sizeof(loom_delta_net_params), 0.0f, 1u, 1e-6f, 0u};
    op.params = &params;
    if (api_->run_ops(be_, nullptr, &op, 1) != LOOM_STATUS_OK) {
      std::fprintf(stderr, "GATED_DELTA_NET failed: %s\n", api_->last_error(be_));
      std::exit(1);
    }
  }

 private:
  template <typename Dist>
  static std::vector<float> random(std::mt19937& rng, Dist& dist, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    for (float& x : out) x = dist(rng);
    return out;
  }
  loom_buffer_t* upload(const std::vector<float>& data) {
    loom_buffer_t* buf = nullptr;
    api_->buffer_create(be_, data.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &buf);
    api_->copy_to_device(be_, nullptr, buf, 0, data.data(), data.size() * 4);
    return buf;
  }

  const loom_backend_i* api_;
  loom_backend_t* be_;
  loom_buffer_t *qk_, *v_, *g_, *beta_, *states_, *dst_, *seqs_;
};

// Best microseconds per token over a few repetitions of `pass`.
template <typename Pass>
double us_per_token(int64_t n, Pass pass) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t = Clock::now();
    pass();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t).count());
  }
  return best / double(n) * 1e6;
}

}  // namespace

void bench_delta_rule(const loom_backend_i* api, loom_backend_t* be) {
  std::mt19937 rng(7);
  DeltaLayer layer(api, be, rng);
  std::printf("\n%-40s  %12s  %12s  %8s\n", "GATED_DELTA_NET (16 k / 32 v heads of 128)", "us/tok, 1 op", "us/tok, 1/op", "speed-up");
  for (int64_t n : {1, 4, 8, 16, 32, 64, 256, 1024}) {
    const double whole = us_per_token(n, [&] { layer.run(0, n); });
    const double each = us_per_token(n, [&] {
      for (int64_t t = 0; t < n; ++t) layer.run(t, 1);
    });
    std::printf("%-40s  %12.2f  %12.2f  %7.2fx\n", (std::to_string(n) + " tokens").c_str(), whole, each, each / whole);
  }
}

}  // namespace loom::bench
