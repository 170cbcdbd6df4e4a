// The CPU backend's op validation: the rules shared by every backend (plugins/common), bound to host
// memory buffers.
#include "op_validation.h"

#include "backend_op_validation.h"

namespace loom::cpu {
namespace {

struct CpuOpRules : plugin_support::BaseOpRules {
  using Buffer = loom_buffer;
  using Tensor = cpu::Tensor;
  using OpArgs = cpu::OpArgs;
  static constexpr const char* kBackendName = "cpu";
  static constexpr bool kRopeFreqFactors = true;
  static constexpr bool kRopeYarn = true;
  static constexpr bool kMoe = true;
  static constexpr bool kAttentionSinks = true;
  static constexpr bool kSwigluOai = true;
  static constexpr bool kSigmoid = true;
  static constexpr bool kRecurrent = true;
  static constexpr bool kSoftplus = true;
  static constexpr bool kEncoder = true;
  static constexpr bool kEncoderWindowAlibi = true;
  static constexpr bool kGeluQuick = true;
  static constexpr bool kClamp = true;
  static constexpr bool kLora = true;
  static constexpr bool kRopeMrope = true;
  static constexpr bool kRopeMropeInterleaved = true;
  static constexpr bool kSeqFlags = true;
  static constexpr uint32_t kBufferMagic = cpu::kBufferMagic;

  [[noreturn]] static void invalid(const std::string& message) { cpu::invalid(message); }
  [[noreturn]] static void unsupported(const std::string& message) { cpu::unsupported(message); }
  static TypeLayout type_layout(loom_dtype type) { return cpu::type_layout(type); }
  static const char* dtype_name(loom_dtype type) { return cpu::dtype_name(type); }
  static uint64_t row_bytes(loom_dtype type, int64_t ne0) { return cpu::row_bytes(type, ne0); }
  static bool is_weight_dtype(loom_dtype type) { return cpu::is_weight_dtype(type); }
  static bool is_kv_dtype(loom_dtype type) { return cpu::is_kv_dtype(type); }

  template <typename Checker>
  static void bind(const Checker&, const loom_tensor& t, const Buffer& buffer, uint64_t /*extent*/, const char* /*role*/, Tensor& out) {
    out.data = buffer.data + t.offset;
  }
};

}  // namespace

OpArgs resolve_op(const loom_op& op, bool need_buffers) { return plugin_support::resolve_op<CpuOpRules>(op, need_buffers); }

}  // namespace loom::cpu
