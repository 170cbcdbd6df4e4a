// loom_vulkan_matmul_bench: MATMUL timing of the Vulkan backend per weight type: the first call
// (pipeline build included), then the steady-state matvec (1 token) and a 64-token matmul, as
// weight GB/s and GFLOP/s. Loads the plugin like the host does.
//   loom_vulkan_matmul_bench [plugin.so] [n_in] [n_out] [config_json]
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Type {
  const char* name;
  loom_dtype dtype;
  int64_t block_elems;
  uint64_t block_bytes;
  int half_offset;  // where an f16 scale lives in the block (-1: plain type)
};
const Type kTypes[] = {{"F32", LOOM_DTYPE_F32, 1, 4, -1},    {"F16", LOOM_DTYPE_F16, 1, 2, -1},
                       {"Q8_0", LOOM_DTYPE_Q8_0, 32, 34, 0}, {"Q4_0", LOOM_DTYPE_Q4_0, 32, 18, 0},
                       {"Q4_K", LOOM_DTYPE_Q4_K, 256, 144, 0}, {"Q6_K", LOOM_DTYPE_Q6_K, 256, 210, 208}};

loom_tensor view(loom_buffer_t* b, loom_dtype dtype, int64_t ne0, int64_t ne1, uint64_t nb0, uint64_t row) {
  loom_tensor t{};
  t.struct_size = sizeof(t);
  t.dtype = dtype;
  t.buffer = b;
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = 1, t.ne[3] = 1;
  t.nb[0] = nb0, t.nb[1] = row, t.nb[2] = t.nb[3] = row * uint64_t(ne1);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : LOOM_VULKAN_PLUGIN_PATH;
  const int64_t n_in = argc > 2 ? std::atoll(argv[2]) : 2048, n_out = argc > 3 ? std::atoll(argv[3]) : 2048;
  const std::string config = argc > 4 ? argv[4] : "{}";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror()), 1;
  auto query = reinterpret_cast<loom_plugin_query_fn>(dlsym(lib, LOOM_PLUGIN_ENTRY_SYMBOL));
  const loom_host_version hv{sizeof(hv), LOOM_ABI_MAJOR, LOOM_ABI_MINOR, 0};
  const loom_plugin_desc* desc = nullptr;
  if (!query || query(&hv, &desc) != LOOM_STATUS_OK) return std::fprintf(stderr, "plugin query failed\n"), 1;
  const auto* api = static_cast<const loom_backend_i*>(desc->table);
  uint32_t n_dev = 0;
  char reason[256] = {};
  api->device_count(&n_dev, reason, sizeof(reason));
  if (n_dev == 0) return std::fprintf(stderr, "no device: %s\n", reason), 1;
  loom_backend_t* be = nullptr;
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  if (api->create(nullptr, config.c_str(), &be, error, sizeof(error)) != LOOM_STATUS_OK) return std::fprintf(stderr, "create: %s\n", error), 1;
  loom_backend_caps caps{};
  caps.struct_size = sizeof(caps);
  api->get_caps(be, &caps);
  std::printf("device: %s, W [%lld x %lld]\n", caps.device_name, (long long)n_in, (long long)n_out);
  std::printf("%-6s %10s %12s %12s %14s\n", "type", "first (s)", "matvec (ms)", "matvec GB/s", "64-tok GFLOP/s");
  std::mt19937 rng(1);
  for (const Type& t : kTypes) {
    const uint64_t row = uint64_t(n_in / t.block_elems) * t.block_bytes;
    std::vector<uint8_t> w(row * uint64_t(n_out));
    for (auto& b : w) b = uint8_t(rng());
    if (t.half_offset >= 0)
      for (size_t off = 0; off < w.size(); off += t.block_bytes) w[off + size_t(t.half_offset)] = 0x00, w[off + size_t(t.half_offset) + 1] = 0x20;
    if (t.dtype == LOOM_DTYPE_F32)
      for (size_t i = 0; i < w.size(); i += 4) w[i + 3] = 0x3c;
    if (t.dtype == LOOM_DTYPE_F16)
      for (size_t i = 0; i < w.size(); i += 2) w[i + 1] = 0x3c;
    const int64_t max_tok = 64;
    std::vector<float> x(size_t(n_in * max_tok), 0.5f), y(size_t(n_out * max_tok));
    loom_buffer_t *bw = nullptr, *bx = nullptr, *by = nullptr;
    api->buffer_create(be, w.size(), LOOM_BUFFER_USAGE_WEIGHTS, &bw);
    api->buffer_create(be, x.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &bx);
    api->buffer_create(be, y.size() * 4, LOOM_BUFFER_USAGE_COMPUTE, &by);
    api->copy_to_device(be, nullptr, bw, 0, w.data(), w.size());
    api->copy_to_device(be, nullptr, bx, 0, x.data(), x.size() * 4);
    api->stream_synchronize(be, nullptr);
    auto run = [&](int64_t n_tok) {
      loom_op op{};
      op.struct_size = sizeof(op);
      op.type = LOOM_OP_MATMUL;
      op.n_src = 2;
      op.src[0] = view(bw, t.dtype, n_in, n_out, t.block_bytes, row);
      op.src[1] = view(bx, LOOM_DTYPE_F32, n_in, n_tok, 4, uint64_t(n_in) * 4);
      op.dst = view(by, LOOM_DTYPE_F32, n_out, n_tok, 4, uint64_t(n_out) * 4);
      const loom_status st = api->run_ops(be, nullptr, &op, 1);
      if (st != LOOM_STATUS_OK || api->stream_synchronize(be, nullptr) != LOOM_STATUS_OK)
        std::fprintf(stderr, "%s: %s\n", t.name, api->last_error(be));
    };
    auto t0 = Clock::now();
    run(1);
    const double first = seconds_since(t0);
    const int reps = 10;
    t0 = Clock::now();
    for (int i = 0; i < reps; i++) run(1);
    const double mv = seconds_since(t0) / reps;
    run(max_tok);
    t0 = Clock::now();
    for (int i = 0; i < 3; i++) run(max_tok);
    const double mm = seconds_since(t0) / 3;
    std::printf("%-6s %10.2f %12.3f %12.2f %14.2f\n", t.name, first, mv * 1e3, double(w.size()) / mv / 1e9,
                2.0 * double(n_in * n_out * max_tok) / mm / 1e9);
    api->buffer_destroy(be, bw);
    api->buffer_destroy(be, bx);
    api->buffer_destroy(be, by);
  }
  api->destroy(be);
  return 0;
}
