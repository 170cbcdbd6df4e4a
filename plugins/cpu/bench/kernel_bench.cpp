// loom_cpu_kernel_bench: matvec bandwidth of the fast kernels per weight type, and the speed-up of
// the fast layer over the reference for a 512-token matmul. Loads the plugin like the host does.
// It ends with a mixture-of-experts decode step's expert matmuls at 1, 4 and 16 tokens.
//   loom_cpu_kernel_bench [plugin.so] [threads] [matvec|moe|delta]   ("matvec": skip the 512-token
//                                       comparison; "moe": only the MoE step; "delta": only the
//                                       delta rule, prefilled in one op against token by token)
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "delta_rule_bench.h"
#include "loom/loom.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Type {
  const char* name;
  loom_dtype dtype;
  int64_t block_elems;
  uint64_t block_bytes;
  int half_offset;  // where an f16 scale lives in the block (-1: plain type)
};
const Type kTypes[] = {{"F32", LOOM_DTYPE_F32, 1, 4, -1},        {"F16", LOOM_DTYPE_F16, 1, 2, -1},
                       {"BF16", LOOM_DTYPE_BF16, 1, 2, -1},      {"Q8_0", LOOM_DTYPE_Q8_0, 32, 34, 0},
                       {"Q4_0", LOOM_DTYPE_Q4_0, 32, 18, 0},     {"Q5_0", LOOM_DTYPE_Q5_0, 32, 22, 0},     {"Q4_K", LOOM_DTYPE_Q4_K, 256, 144, 0},
                       {"Q6_K", LOOM_DTYPE_Q6_K, 256, 210, 208}, {"MXFP4", LOOM_DTYPE_MXFP4, 32, 17, -1}};

const loom_backend_i* g_api = nullptr;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Memory read bandwidth: sum a buffer much larger than the caches.
double measure_read_bandwidth() {
  std::vector<uint64_t> data(size_t(512) << 20 >> 3, 1);  // 512 MiB
  uint64_t sink = 0;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    const auto t = Clock::now();
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < data.size(); i += 4) s0 += data[i], s1 += data[i + 1], s2 += data[i + 2], s3 += data[i + 3];
    sink += s0 + s1 + s2 + s3;
    best = std::max(best, double(data.size() * 8) / seconds_since(t) / 1e9);
  }
  if (sink == 42) std::puts("");
  return best;
}

double measure_memcpy_bandwidth() {
  std::vector<char> a(size_t(256) << 20, 1), b(size_t(256) << 20);
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    const auto t = Clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    best = std::max(best, 2.0 * double(a.size()) / seconds_since(t) / 1e9);  // read + write
  }
  return best;
}

struct Matmul {
  loom_backend_t* be;
  loom_buffer_t *w, *x, *y;
  loom_op op{};
};

Matmul make_matmul(loom_backend_t* be, const Type& t, int64_t n_in, int64_t n_out, int64_t n_tok, std::mt19937& rng) {
  Matmul m{be, nullptr, nullptr, nullptr, {}};
  const uint64_t row = uint64_t(n_in / t.block_elems) * t.block_bytes;
  std::vector<uint8_t> w(row * uint64_t(n_out));
  for (auto& b : w) b = uint8_t(rng());
  if (t.half_offset >= 0)
    for (size_t off = 0; off < w.size(); off += t.block_bytes) w[off + size_t(t.half_offset)] = 0x00, w[off + size_t(t.half_offset) + 1] = 0x20;
  if (t.dtype == LOOM_DTYPE_F32)
    for (size_t i = 0; i < w.size(); i += 4) w[i + 3] = 0x3c;  // keep floats finite
  std::vector<float> x(size_t(n_in * n_tok));
  for (auto& v : x) v = float(int(rng() % 2000) - 1000) / 1000.0f;
  g_api->buffer_create(be, w.size(), LOOM_BUFFER_USAGE_WEIGHTS, &m.w);
  g_api->buffer_create(be, x.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &m.x);
  g_api->buffer_create(be, uint64_t(n_out * n_tok) * 4, LOOM_BUFFER_USAGE_COMPUTE, &m.y);
  g_api->copy_to_device(be, nullptr, m.w, 0, w.data(), w.size());
  g_api->copy_to_device(be, nullptr, m.x, 0, x.data(), x.size() * 4);
  auto tensor = [](loom_dtype dtype, loom_buffer_t* buf, int64_t ne0, int64_t ne1, uint64_t nb0, uint64_t nb1) {
    return loom_tensor{sizeof(loom_tensor), dtype, buf, 0, {ne0, ne1, 1, 1}, {nb0, nb1, nb1 * uint64_t(ne1), nb1 * uint64_t(ne1)}};
  };
  m.op.struct_size = sizeof(loom_op);
  m.op.type = LOOM_OP_MATMUL;
  m.op.n_src = 2;
  m.op.src[0] = tensor(t.dtype, m.w, n_in, n_out, t.block_bytes, row);
  m.op.src[1] = tensor(LOOM_DTYPE_F32, m.x, n_in, n_tok, 4, uint64_t(n_in) * 4);
  m.op.dst = tensor(LOOM_DTYPE_F32, m.y, n_out, n_tok, 4, uint64_t(n_out) * 4);
  return m;
}

void free_matmul(Matmul& m) {
  g_api->buffer_destroy(m.be, m.w);
  g_api->buffer_destroy(m.be, m.x);
  g_api->buffer_destroy(m.be, m.y);
}

// Seconds per run (best of several, after a warm-up), running for at least `min_seconds` in total.
double time_op(Matmul& m, double min_seconds) {
  if (g_api->run_ops(m.be, nullptr, &m.op, 1) != LOOM_STATUS_OK) {
    std::fprintf(stderr, "run_ops failed: %s\n", g_api->last_error(m.be));
    std::exit(1);
  }
  double best = 1e30, total = 0;
  int runs = 0;
  while (total < min_seconds || runs < 3) {
    const auto t = Clock::now();
    g_api->run_ops(m.be, nullptr, &m.op, 1);
    const double s = seconds_since(t);
    best = std::min(best, s), total += s, runs++;
  }
  return best;
}

// A synthetic qwen3moe decode step's expert matmuls (8 layers x gate, up, down; 8 experts of
// 1024 x 1024, Q8_0, top-2), cycled so the weights stream from memory as in the model: microseconds
// per MOE_MATMUL and the rate at which the experts a step chose were read.
void bench_moe_step(loom_backend_t* be, std::mt19937& rng) {
  const int64_t n_in = 1024, n_out = 1024, n_expert = 8, n_used = 2, n_matrices = 24;
  const uint64_t expert_bytes = uint64_t(n_in / 32) * 34 * uint64_t(n_out);
  std::vector<uint8_t> w(expert_bytes * uint64_t(n_expert));
  for (auto& b : w) b = uint8_t(rng());
  for (size_t off = 0; off < w.size(); off += 34) w[off] = 0x00, w[off + 1] = 0x20;
  std::vector<loom_buffer_t*> weights(static_cast<size_t>(n_matrices));
  for (auto& buf : weights) {
    g_api->buffer_create(be, w.size(), LOOM_BUFFER_USAGE_WEIGHTS, &buf);
    g_api->copy_to_device(be, nullptr, buf, 0, w.data(), w.size());
  }
  auto tensor = [](loom_dtype dtype, loom_buffer_t* buf, std::array<int64_t, 4> ne, uint64_t nb0) {
    loom_tensor t{sizeof(loom_tensor), dtype, buf, 0, {ne[0], ne[1], ne[2], ne[3]}, {nb0, 0, 0, 0}};
    t.nb[1] = dtype == LOOM_DTYPE_Q8_0 ? uint64_t(ne[0] / 32) * 34 : uint64_t(ne[0]) * nb0;
    for (int d = 2; d < 4; d++) t.nb[d] = t.nb[d - 1] * uint64_t(ne[d - 1]);
    return t;
  };
  std::printf("\n%-34s  %10s  %8s  %8s\n", "MoE expert matmul (8 x 1024x1024 Q8_0)", "us per op", "experts", "GB/s");
  for (int64_t n_tok : {1, 4, 16}) {
    std::vector<float> x(size_t(n_in * n_tok));
    for (auto& v : x) v = float(int(rng() % 2000) - 1000) / 1000.0f;
    std::vector<int32_t> ids(size_t(n_used * n_tok));
    std::vector<bool> chosen(size_t(n_expert), false);
    for (int64_t t = 0; t < n_tok; t++) {
      const auto first = int32_t(rng() % uint32_t(n_expert)), second = int32_t((first + 1 + rng() % uint32_t(n_expert - 1)) % n_expert);
      ids[size_t(t * n_used)] = first, ids[size_t(t * n_used + 1)] = second;
      chosen[size_t(first)] = chosen[size_t(second)] = true;
    }
    const auto n_read = std::count(chosen.begin(), chosen.end(), true);
    loom_buffer_t *xb = nullptr, *ib = nullptr, *yb = nullptr;
    g_api->buffer_create(be, x.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &xb);
    g_api->buffer_create(be, ids.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &ib);
    g_api->buffer_create(be, uint64_t(n_out * n_used * n_tok) * 4, LOOM_BUFFER_USAGE_COMPUTE, &yb);
    g_api->copy_to_device(be, nullptr, xb, 0, x.data(), x.size() * 4);
    g_api->copy_to_device(be, nullptr, ib, 0, ids.data(), ids.size() * 4);
    std::vector<loom_op> ops(static_cast<size_t>(n_matrices));
    for (int64_t i = 0; i < n_matrices; i++) {
      loom_op& op = ops[size_t(i)];
      op.struct_size = sizeof(loom_op);
      op.type = LOOM_OP_MOE_MATMUL;
      op.n_src = 3;
      op.src[0] = tensor(LOOM_DTYPE_Q8_0, weights[size_t(i)], {n_in, n_out, n_expert, 1}, 34);
      op.src[1] = tensor(LOOM_DTYPE_F32, xb, {n_in, 1, n_tok, 1}, 4);
      op.src[2] = tensor(LOOM_DTYPE_I32, ib, {n_used, n_tok, 1, 1}, 4);
      op.dst = tensor(LOOM_DTYPE_F32, yb, {n_out, n_used, n_tok, 1}, 4);
    }
    double best = 1e30;
    for (int rep = 0; rep < 20; rep++) {
      const auto t = Clock::now();
      for (const loom_op& op : ops)  // one op per call, as the engine's graph would interleave others
        if (g_api->run_ops(be, nullptr, &op, 1) != LOOM_STATUS_OK) {
          std::fprintf(stderr, "run_ops failed: %s\n", g_api->last_error(be));
          std::exit(1);
        }
      best = std::min(best, seconds_since(t) / double(n_matrices));
    }
    std::printf("%-34s  %10.1f  %8lld  %8.1f\n", (std::to_string(n_tok) + " tokens x top-2").c_str(), best * 1e6, (long long)n_read,
                double(n_read) * double(expert_bytes) / best / 1e9);
    for (auto* b : {xb, ib, yb}) g_api->buffer_destroy(be, b);
  }
  for (auto* buf : weights) g_api->buffer_destroy(be, buf);
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : LOOM_CPU_PLUGIN_PATH;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror()), 1;
  auto query = reinterpret_cast<loom_plugin_query_fn>(dlsym(lib, LOOM_PLUGIN_ENTRY_SYMBOL));
  const loom_host_version hv{sizeof(hv), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, 0};
  const loom_plugin_desc* desc = nullptr;
  if (!query || query(&hv, &desc) != LOOM_STATUS_OK) return std::fprintf(stderr, "plugin query failed\n"), 1;
  g_api = static_cast<const loom_backend_i*>(desc->table);

  std::printf("memory read bandwidth (1 thread, 512 MiB sum): %.1f GB/s; memcpy (read+write): %.1f GB/s\n",
              measure_read_bandwidth(), measure_memcpy_bandwidth());
  char err[LOOM_ERROR_BUFFER_SIZE];
  const std::string cfg = "{\"threads\": " + std::to_string(threads) + "}";
  loom_backend_t *fast = nullptr, *ref = nullptr;
  g_api->create(nullptr, cfg.c_str(), &fast, err, sizeof(err));
  g_api->create(nullptr, "{\"reference\": true}", &ref, err, sizeof(err));
  loom_backend_caps caps{};
  caps.struct_size = sizeof(caps);
  g_api->get_caps(fast, &caps);
  std::printf("backend: %s\n\n", caps.device_name);
  std::mt19937 rng(1);
  if (argc > 3 && std::strcmp(argv[3], "delta") == 0) {
    loom::bench::bench_delta_rule(g_api, fast);
    g_api->destroy(fast);
    g_api->destroy(ref);
    return 0;
  }
  if (argc > 3 && std::strcmp(argv[3], "moe") == 0) {
    bench_moe_step(fast, rng);
    g_api->destroy(fast);
    g_api->destroy(ref);
    return 0;
  }

  std::printf("%-5s  %-12s  %9s  %9s\n", "type", "matrix", "matvec ms", "GB/s");
  for (const Type& t : kTypes) {
    // 2048 x 2048 fits the caches; 4096 x 11008 is a 7B FFN matrix; 640 x 262144 is the default
    // model's tied output matrix (too large for any cache, and its rows are short).
    for (auto [n_in, n_out] : {std::pair<int64_t, int64_t>{2048, 2048}, {4096, 11008}, {640, 262144}}) {
      if (n_in % t.block_elems != 0) continue;
      Matmul m = make_matmul(fast, t, n_in, n_out, 1, rng);
      const double s = time_op(m, 0.5);
      const double bytes = double(n_in / t.block_elems) * double(t.block_bytes) * double(n_out);
      std::printf("%-5s  %4lldx%-6lld  %9.3f  %9.1f\n", t.name, (long long)n_in, (long long)n_out, s * 1e3, bytes / s / 1e9);
      free_matmul(m);
    }
  }
  // A batched decode step's matmuls: the default model's shapes and a synthetic MoE expert (1024 x 1024) at 4, 8
  // and 16 tokens, as multiply-adds per second.
  std::printf("\n%-5s  %-18s  %10s  %8s\n", "type", "matmul x tokens", "ms", "GMAC/s");
  const struct {
    const char* type;
    int64_t n_in, n_out;
  } batched[] = {{"Q8_0", 640, 262144}, {"Q8_0", 1024, 1024}, {"Q5_0", 640, 2048}, {"Q5_0", 640, 1024}, {"Q4_K", 1024, 640}, {"Q6_K", 2048, 640}, {"Q4_K", 2048, 640}};
  for (int64_t n_tok : {4, 8, 16})
  for (const auto& b : batched) {
    const Type* t = nullptr;
    for (const Type& c : kTypes)
      if (std::strcmp(c.name, b.type) == 0) t = &c;
    Matmul m = make_matmul(fast, *t, b.n_in, b.n_out, n_tok, rng);
    const double s = time_op(m, 0.3);
    std::printf("%-5s  %4lldx%-6lld x %2lld  %10.3f  %8.1f\n", t->name, (long long)b.n_in, (long long)b.n_out, (long long)n_tok, s * 1e3,
                double(b.n_in * b.n_out * n_tok) / s / 1e9);
    free_matmul(m);
  }
  if (argc > 3 && std::strcmp(argv[3], "matvec") == 0) {
    g_api->destroy(fast);
    g_api->destroy(ref);
    return 0;
  }
  std::printf("\n%-5s  %-18s  %10s  %10s  %8s  %8s\n", "type", "matmul x 512 tok", "fast ms", "ref ms", "speed-up", "GFLOP/s");
  for (const Type& t : kTypes) {
    const int64_t n_in = 2048, n_out = 2048, n_tok = 512;
    Matmul mf = make_matmul(fast, t, n_in, n_out, n_tok, rng);
    Matmul mr = make_matmul(ref, t, n_in, n_out, n_tok, rng);
    const double sf = time_op(mf, 0.5), sr = time_op(mr, 0.0);
    std::printf("%-5s  %4lldx%-4lld x %-5lld  %10.1f  %10.1f  %7.1fx  %8.1f\n", t.name, (long long)n_in, (long long)n_out,
                (long long)n_tok, sf * 1e3, sr * 1e3, sr / sf, 2.0 * double(n_in * n_out * n_tok) / sf / 1e9);
    free_matmul(mf);
    free_matmul(mr);
  }
  bench_moe_step(fast, rng);
  g_api->destroy(fast);
  g_api->destroy(ref);
  return 0;
}
