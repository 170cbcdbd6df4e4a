// Helpers for the backend conformance cases: an RAII backend instance, host-side tensors, running
// one op with guard regions around every operand, and the CPU reference oracle.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conformance_case.h"

namespace loom::conformance::backend {

// A tensor on the host: contiguous, innermost first. `absent` marks an optional operand left out.
struct HostTensor {
  loom_dtype dtype = LOOM_DTYPE_F32;
  int64_t ne[4] = {1, 1, 1, 1};
  std::vector<uint8_t> data;
  bool absent = false;

  uint64_t row_bytes() const;
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::vector<float> floats() const;  // F32 tensors only
};

uint64_t dtype_row_bytes(loom_dtype dtype, int64_t ne0);  // 0 for unknown types
std::string dtype_label(loom_dtype dtype);

HostTensor f32_tensor(std::vector<float> values, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
HostTensor i32_tensor(const std::vector<int32_t>& values, int64_t ne0, int64_t ne1 = 1);
HostTensor zero_tensor(loom_dtype dtype, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f);
// Random but well-formed weights of any supported type: random quants, small positive f16 scales.
HostTensor random_weights(std::mt19937& rng, loom_dtype dtype, int64_t n_in, int64_t n_out);
uint16_t to_half(float f);  // round-to-nearest for normal values (test data only)

// One op of a chain over shared tensors: srcs and dst are indexes into the chain's tensor list.
struct ChainOp {
  loom_op_type type;
  std::vector<int> srcs;
  int dst;
  const void* params = nullptr;
};

// One backend instance of a loaded plugin.
class Device {
 public:
  Device(const LoadedPlugin& plugin, const loom_host_services* host, const std::string& config_json);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const loom_backend_i& api() const { return *api_; }
  loom_backend_t* handle() const { return backend_; }
  const loom_backend_caps& caps() const { return caps_; }
  bool declares_weight(loom_dtype dtype) const;
  bool declares_kv(loom_dtype dtype) const;
  std::string last_error() const;

  // Runs `type` on the given operands (srcs, then dst; dst may be absent). Every operand lives in its
  // own buffer at an offset, between guard regions filled with a pattern; outputs are read back into
  // the tensors (srcs too: STORE_KV writes its caches) and the guards are checked. Returns the
  // status; supports_op UNSUPPORTED throws CaseNotSupported with the backend's reason.
  loom_status run(loom_op_type type, std::vector<HostTensor*> srcs, HostTensor* dst, const void* params,
                  bool ask_supports = true);
  // Runs `ops` in one run_ops call: every tensor lives once, in its own guarded buffer, and every op
  // that names it sees the same memory (so one op's output is a later op's input). All tensors are
  // read back and their guards checked.
  loom_status run_chain(std::vector<HostTensor>& tensors, const std::vector<ChainOp>& ops);

 private:
  loom_buffer_t* upload_guarded(const HostTensor& t);
  void download_checked(loom_buffer_t* buffer, HostTensor& t, const std::string& what);

  const loom_backend_i* api_;
  loom_backend_t* backend_ = nullptr;
  loom_backend_caps caps_{};
};

// The CPU reference backend (the oracle): $LOOM_REFERENCE_BACKEND, else libloom_cpu.so beside the
// plugin under test, else the cpu backend found on the default plugin search path.
std::shared_ptr<LoadedPlugin> reference_plugin(const CaseContext& ctx);
std::unique_ptr<Device> reference_device(const CaseContext& ctx);
std::unique_ptr<Device> device_under_test(const CaseContext& ctx);

// max|a - b| / max(max|b|, 1e-6): error normalised by the reference's magnitude.
double normalised_max_error(const std::vector<float>& got, const std::vector<float>& want);
// Requires normalised_max_error <= tolerance, naming `what` in the failure.
void require_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance, const std::string& what);

}  // namespace loom::conformance::backend
