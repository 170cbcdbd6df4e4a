#include "backend_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace loom::conformance::backend {

namespace {
constexpr uint64_t kGuardBytes = 256;
constexpr uint8_t kGuardPattern = 0xA5;
}  // namespace

namespace {

// Formats the suite knows only by their GGUF layout (no block struct in the ABI): values per block,
// bytes per block, and the offsets of the f16 scales a random block must keep finite.
struct GgufBlock {
  int64_t elems = 0;
  uint64_t bytes = 0;
  std::vector<size_t> half_offsets;
};

GgufBlock gguf_block(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_Q4_1: return {32, 20, {0, 2}};
    case LOOM_DTYPE_Q5_1: return {32, 24, {0, 2}};
    case LOOM_DTYPE_Q2_K: return {256, 84, {80, 82}};
    case LOOM_DTYPE_Q3_K: return {256, 110, {108}};
    case LOOM_DTYPE_Q5_K: return {256, 176, {0, 2}};
    case LOOM_DTYPE_IQ4_NL: return {32, 18, {0}};
    case LOOM_DTYPE_IQ4_XS: return {256, 136, {0}};
    case LOOM_DTYPE_MXFP4: return {32, 17, {}};  // an exponent byte, kept near 2^0 below
    case LOOM_DTYPE_F8_E4M3_B32: return {32, 36, {}};  // a float scale, set below
    default: return {};
  }
}

}  // namespace

uint64_t dtype_row_bytes(loom_dtype dtype, int64_t ne0) {
  switch (dtype) {
    case LOOM_DTYPE_F32:
    case LOOM_DTYPE_I32: return uint64_t(ne0) * 4;
    case LOOM_DTYPE_F16:
    case LOOM_DTYPE_BF16: return uint64_t(ne0) * 2;
    case LOOM_DTYPE_Q4_0: return uint64_t(ne0 / LOOM_QK4_0) * sizeof(loom_block_q4_0);
    case LOOM_DTYPE_Q5_0: return uint64_t(ne0 / LOOM_QK5_0) * sizeof(loom_block_q5_0);
    case LOOM_DTYPE_Q8_0: return uint64_t(ne0 / LOOM_QK8_0) * sizeof(loom_block_q8_0);
    case LOOM_DTYPE_Q4_K: return uint64_t(ne0 / LOOM_QK_K) * sizeof(loom_block_q4_k);
    case LOOM_DTYPE_Q6_K: return uint64_t(ne0 / LOOM_QK_K) * sizeof(loom_block_q6_k);
    case LOOM_DTYPE_INT8_KV: return 4 + uint64_t(ne0);
    case LOOM_DTYPE_F8_E4M3: return uint64_t(ne0);
    default: {
      const GgufBlock block = gguf_block(dtype);
      return block.elems > 0 ? uint64_t(ne0 / block.elems) * block.bytes : 0;
    }
  }
}

static uint64_t block_bytes(loom_dtype dtype, int64_t ne0) {
  switch (dtype) {
    case LOOM_DTYPE_Q4_0: return sizeof(loom_block_q4_0);
    case LOOM_DTYPE_Q5_0: return sizeof(loom_block_q5_0);
    case LOOM_DTYPE_Q8_0: return sizeof(loom_block_q8_0);
    case LOOM_DTYPE_Q4_K: return sizeof(loom_block_q4_k);
    case LOOM_DTYPE_Q6_K: return sizeof(loom_block_q6_k);
    case LOOM_DTYPE_INT8_KV: return 1;
    default:
      if (gguf_block(dtype).elems > 0) return gguf_block(dtype).bytes;
      return dtype_row_bytes(dtype, ne0) / uint64_t(ne0);
  }
}

std::string dtype_label(loom_dtype dtype) {
  switch (dtype) {
    case LOOM_DTYPE_F32: return "F32";
    case LOOM_DTYPE_F16: return "F16";
    case LOOM_DTYPE_BF16: return "BF16";
    case LOOM_DTYPE_Q4_0: return "Q4_0";
    case LOOM_DTYPE_Q5_0: return "Q5_0";
    case LOOM_DTYPE_Q8_0: return "Q8_0";
    case LOOM_DTYPE_Q4_K: return "Q4_K";
    case LOOM_DTYPE_Q5_K: return "Q5_K";
    case LOOM_DTYPE_Q4_1: return "Q4_1";
    case LOOM_DTYPE_Q5_1: return "Q5_1";
    case LOOM_DTYPE_Q2_K: return "Q2_K";
    case LOOM_DTYPE_Q3_K: return "Q3_K";
    case LOOM_DTYPE_IQ4_NL: return "IQ4_NL";
    case LOOM_DTYPE_IQ4_XS: return "IQ4_XS";
    case LOOM_DTYPE_MXFP4: return "MXFP4";
    case LOOM_DTYPE_F8_E4M3_B32: return "F8_E4M3_B32";
    case LOOM_DTYPE_Q6_K: return "Q6_K";
    case LOOM_DTYPE_INT8_KV: return "INT8_KV";
    case LOOM_DTYPE_F8_E4M3: return "F8_E4M3";
    default: return "dtype" + std::to_string(dtype);
  }
}

uint64_t HostTensor::row_bytes() const { return dtype_row_bytes(dtype, ne[0]); }

std::vector<float> HostTensor::floats() const {
  std::vector<float> out(data.size() / 4);
  std::memcpy(out.data(), data.data(), out.size() * 4);
  return out;
}

HostTensor f32_tensor(std::vector<float> values, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  HostTensor t;
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

HostTensor i32_tensor(const std::vector<int32_t>& values, int64_t ne0, int64_t ne1) {
  HostTensor t;
  t.dtype = LOOM_DTYPE_I32;
  t.ne[0] = ne0, t.ne[1] = ne1;
  t.data.resize(values.size() * 4);
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

HostTensor zero_tensor(loom_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  HostTensor t;
  t.dtype = dtype;
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
  t.data.assign(t.row_bytes() * uint64_t(ne1 * ne2 * ne3), 0);
  return t;
}

std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t e = int32_t((x >> 23) & 0xff) - 127 + 15;
  if (e <= 0) return uint16_t(sign);  // test data never needs subnormals
  if (e >= 31) return uint16_t(sign | 0x7c00);
  const uint32_t m = (x >> 13) & 0x3ff;
  return uint16_t(sign | uint32_t(e) << 10 | m);
}

HostTensor random_weights(std::mt19937& rng, loom_dtype dtype, int64_t n_in, int64_t n_out) {
  HostTensor t = zero_tensor(dtype, n_in, n_out);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), small(0.002f, 0.02f);
  auto put_half = [&](size_t offset, float v) {
    const uint16_t h = to_half(v);
    std::memcpy(t.data.data() + offset, &h, 2);
  };
  const size_t n = t.data.size();
  switch (dtype) {
    case LOOM_DTYPE_F32:
      for (size_t i = 0; i < n; i += 4) {
        const float v = unit(rng);
        std::memcpy(t.data.data() + i, &v, 4);
      }
      break;
    case LOOM_DTYPE_F16:
      for (size_t i = 0; i < n; i += 2) put_half(i, unit(rng));
      break;
    case LOOM_DTYPE_BF16:
      for (size_t i = 0; i < n; i += 2) {
        const float v = unit(rng);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        const uint16_t h = uint16_t(u >> 16);
        std::memcpy(t.data.data() + i, &h, 2);
      }
      break;
    default: {
      for (auto& b : t.data) b = uint8_t(byte(rng));
      const uint64_t bb = block_bytes(dtype, n_in);
      for (size_t off = 0; off < n; off += bb) {
        if (dtype == LOOM_DTYPE_Q4_0 || dtype == LOOM_DTYPE_Q5_0 || dtype == LOOM_DTYPE_Q8_0) put_half(off, small(rng));
        if (dtype == LOOM_DTYPE_Q4_K) put_half(off, small(rng)), put_half(off + 2, small(rng));
        if (dtype == LOOM_DTYPE_Q6_K) put_half(off + offsetof(loom_block_q6_k, d), small(rng) * 0.1f);
        if (dtype == LOOM_DTYPE_MXFP4) t.data[off] = uint8_t(118 + byte(rng) % 8);  // scales 2^-10 .. 2^-3
        if (dtype == LOOM_DTYPE_F8_E4M3_B32) {  // codes up to +-448, so scales near 2^-12; no NaN codes
          const float d = small(rng) * 0.02f;
          std::memcpy(t.data.data() + off, &d, 4);
          for (size_t j = 4; j < 36; j++)
            if ((t.data[off + j] & 0x7F) == 0x7F) t.data[off + j] ^= 0x01;
        }
        for (size_t half : gguf_block(dtype).half_offsets) put_half(off + half, small(rng));
      }
    }
  }
  return t;
}

// ---- Device -----------------------------------------------------------------------------------------

Device::Device(const LoadedPlugin& plugin, const loom_host_services* host, const std::string& config_json)
    : api_(plugin.backend()) {
  require(api_ != nullptr, "plugin " + plugin.name() + " is not a backend");
  // A GPU backend on a machine without its GPU: every case is "not supported here", not a failure.
  uint32_t n_devices = 0;
  char reason[256] = {};
  if (api_->device_count(&n_devices, reason, sizeof(reason)) != LOOM_STATUS_OK || n_devices == 0) {
    not_supported(std::string("no device: ") + reason);
  }
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  const loom_status st = api_->create(host, config_json.c_str(), &backend_, error, sizeof(error));
  require(st == LOOM_STATUS_OK && backend_ != nullptr,
          "create(" + config_json + ") failed with status " + std::to_string(st) + ": " + error);
  caps_.struct_size = sizeof(caps_);
  require(api_->get_caps(backend_, &caps_) == LOOM_STATUS_OK, "get_caps failed: " + last_error());
}

Device::~Device() {
  if (backend_) api_->destroy(backend_);
}

bool Device::declares_weight(loom_dtype dtype) const {
  return std::find(caps_.weight_dtypes, caps_.weight_dtypes + std::min<uint32_t>(caps_.n_weight_dtypes, LOOM_BACKEND_MAX_DTYPES), dtype) !=
         caps_.weight_dtypes + std::min<uint32_t>(caps_.n_weight_dtypes, LOOM_BACKEND_MAX_DTYPES);
}

bool Device::declares_kv(loom_dtype dtype) const {
  const uint32_t n = std::min<uint32_t>(caps_.n_kv_dtypes, 8);
  return std::find(caps_.kv_dtypes, caps_.kv_dtypes + n, dtype) != caps_.kv_dtypes + n;
}

std::string Device::last_error() const {
  const char* message = api_->last_error(backend_);
  return message ? message : "";
}

static loom_tensor describe(const HostTensor& t, loom_buffer_t* buffer, uint64_t offset) {
  loom_tensor out{};
  out.struct_size = sizeof(loom_tensor);
  out.dtype = t.dtype;
  out.buffer = buffer;
  out.offset = offset;
  for (int i = 0; i < 4; i++) out.ne[i] = t.ne[i];
  out.nb[0] = block_bytes(t.dtype, t.ne[0]);
  out.nb[1] = t.row_bytes();
  out.nb[2] = out.nb[1] * uint64_t(t.ne[1]);
  out.nb[3] = out.nb[2] * uint64_t(t.ne[2]);
  return out;
}

loom_buffer_t* Device::upload_guarded(const HostTensor& t) {
  const uint64_t size = kGuardBytes * 2 + t.data.size();
  loom_buffer_t* buffer = nullptr;
  require(api_->buffer_create(backend_, size, LOOM_BUFFER_USAGE_COMPUTE, &buffer) == LOOM_STATUS_OK,
          "buffer_create failed: " + last_error());
  std::vector<uint8_t> image(size, kGuardPattern);
  std::copy(t.data.begin(), t.data.end(), image.begin() + kGuardBytes);
  if (api_->copy_to_device(backend_, nullptr, buffer, 0, image.data(), size) != LOOM_STATUS_OK) {
    const std::string error = last_error();
    api_->buffer_destroy(backend_, buffer);
    throw CaseFailure("copy_to_device failed: " + error);
  }
  return buffer;
}

void Device::download_checked(loom_buffer_t* buffer, HostTensor& t, const std::string& what) {
  const uint64_t size = kGuardBytes * 2 + t.data.size();
  std::vector<uint8_t> image(size);
  require(api_->copy_to_host(backend_, nullptr, image.data(), buffer, 0, size) == LOOM_STATUS_OK,
          "copy_to_host failed: " + last_error());
  require(api_->stream_synchronize(backend_, nullptr) == LOOM_STATUS_OK, "stream_synchronize failed");
  for (uint64_t g = 0; g < kGuardBytes; g++)
    require(image[g] == kGuardPattern && image[size - 1 - g] == kGuardPattern,
            what + ": guard region overwritten (out-of-bounds write)");
  std::copy(image.begin() + kGuardBytes, image.end() - kGuardBytes, t.data.begin());
}

loom_status Device::run_chain(std::vector<HostTensor>& tensors, const std::vector<ChainOp>& ops) {
  std::vector<loom_buffer_t*> buffers;
  auto cleanup = [&] {
    for (auto* b : buffers) api_->buffer_destroy(backend_, b);
  };
  loom_status st = LOOM_STATUS_OK;
  try {
    for (const HostTensor& t : tensors) buffers.push_back(upload_guarded(t));
    std::vector<loom_op> chain;
    for (const ChainOp& c : ops) {
      loom_op op{};
      op.struct_size = sizeof(loom_op);
      op.type = c.type;
      op.params = c.params;
      op.n_src = uint32_t(c.srcs.size());
      for (size_t i = 0; i < c.srcs.size(); i++) op.src[i] = describe(tensors[size_t(c.srcs[i])], buffers[size_t(c.srcs[i])], kGuardBytes);
      op.dst = describe(tensors[size_t(c.dst)], buffers[size_t(c.dst)], kGuardBytes);
      chain.push_back(op);
    }
    st = api_->run_ops(backend_, nullptr, chain.data(), uint32_t(chain.size()));
    const loom_status sync = api_->stream_synchronize(backend_, nullptr);
    if (st == LOOM_STATUS_OK) st = sync;
    if (st == LOOM_STATUS_OK)
      for (size_t i = 0; i < tensors.size(); i++) download_checked(buffers[i], tensors[i], "tensor " + std::to_string(i));
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return st;
}

loom_status Device::run(loom_op_type type, std::vector<HostTensor*> srcs, HostTensor* dst, const void* params,
                        bool ask_supports) {
  loom_op op{};
  op.struct_size = sizeof(loom_op);
  op.type = type;
  op.n_src = uint32_t(srcs.size());
  op.params = params;
  std::vector<HostTensor*> all = srcs;
  all.push_back(dst);
  if (ask_supports) {
    for (size_t i = 0; i < all.size(); i++) {
      if (all[i] == nullptr) continue;
      loom_tensor t = describe(*all[i], nullptr, 0);
      if (all[i]->absent) t.ne[0] = 0;
      (i < srcs.size() ? op.src[i] : op.dst) = t;
    }
    char reason[512] = {};
    const loom_status st = api_->supports_op(backend_, &op, reason, sizeof(reason));
    if (st == LOOM_STATUS_UNSUPPORTED) not_supported(reason);
    require(st == LOOM_STATUS_OK, std::string("supports_op answered ") + std::to_string(st) + ": " + reason);
  }
  // One buffer per operand: [guard | tensor | guard], guards filled with a pattern.
  std::vector<loom_buffer_t*> buffers(all.size(), nullptr);
  auto cleanup = [&] {
    for (auto* b : buffers)
      if (b) api_->buffer_destroy(backend_, b);
  };
  loom_status st = LOOM_STATUS_OK;
  try {
    for (size_t i = 0; i < all.size(); i++) {
      HostTensor* t = all[i];
      if (t == nullptr || t->absent) continue;
      buffers[i] = upload_guarded(*t);
      (i < srcs.size() ? op.src[i] : op.dst) = describe(*t, buffers[i], kGuardBytes);
    }
    st = api_->run_ops(backend_, nullptr, &op, 1);
    const loom_status sync = api_->stream_synchronize(backend_, nullptr);
    if (st == LOOM_STATUS_OK) st = sync;
    if (st == LOOM_STATUS_OK) {
      for (size_t i = 0; i < all.size(); i++) {
        HostTensor* t = all[i];
        if (t == nullptr || t->absent) continue;
        download_checked(buffers[i], *t, "operand " + std::to_string(i));
      }
    }
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return st;
}

// ---- oracle -----------------------------------------------------------------------------------------

std::shared_ptr<LoadedPlugin> reference_plugin(const CaseContext& ctx) {
  static std::shared_ptr<LoadedPlugin> cached;
  if (cached) return cached;
  if (const char* env = std::getenv("LOOM_REFERENCE_BACKEND"); env && *env) {
    cached = PluginLoader::load_library(env);
    return cached;
  }
  const auto sibling = ctx.plugin->library_path().parent_path() / "libloom_cpu.so";
  if (std::filesystem::exists(sibling)) {
    cached = PluginLoader::load_library(sibling);
    return cached;
  }
  const PluginDiscovery found = discover_plugins(plugin_search_path());
  cached = found.find(LOOM_PLUGIN_KIND_BACKEND, "cpu");
  require(cached != nullptr, "no CPU reference backend: set LOOM_REFERENCE_BACKEND to libloom_cpu.so");
  return cached;
}

std::unique_ptr<Device> reference_device(const CaseContext& ctx) {
  return std::make_unique<Device>(*reference_plugin(ctx), ctx.host, "{\"reference\": true}");
}

std::unique_ptr<Device> device_under_test(const CaseContext& ctx) {
  return std::make_unique<Device>(*ctx.plugin, ctx.host, ctx.plugin_config_json);
}

double normalised_max_error(const std::vector<float>& got, const std::vector<float>& want) {
  double max_err = 0.0, max_ref = 1e-6;
  for (size_t i = 0; i < want.size(); i++) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
  }
  return max_err / max_ref;
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance, const std::string& what) {
  require(got.size() == want.size(), what + ": size mismatch");
  const double err = normalised_max_error(got, want);
  require(err <= tolerance, what + ": normalised max error " + std::to_string(err) + " exceeds " + std::to_string(tolerance));
}

}  // namespace loom::conformance::backend
