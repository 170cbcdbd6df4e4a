// The CUDA backend's op validation: the rules shared by every backend (plugins/common), bound to
// device allocations, plus the attention kernel's head_dim limit.
#include "op_validation.h"

#include "backend_op_validation.h"
#include "kernels.h"

namespace loom::cuda {
namespace {

struct CudaOpRules : plugin_support::BaseOpRules {
  // rope_kernel divides by the factors and blends YaRN's frequencies (k_rowops.cu).
  static constexpr bool kRopeFreqFactors = true;
  static constexpr bool kRopeYarn = true;
  // lora_kernel: ranks up to kMaxLoraRank, F32 or F16 stacks (k_lora.cu).
  static constexpr bool kLora = true;
  using Buffer = loom_buffer;
  using Tensor = DevTensor;
  using OpArgs = cuda::OpArgs;
  static constexpr const char* kBackendName = "cuda";
  static constexpr uint32_t kBufferMagic = cuda::kBufferMagic;

  [[noreturn]] static void invalid(const std::string& message) { cuda::invalid(message); }
  [[noreturn]] static void unsupported(const std::string& message) { cuda::unsupported(message); }
  static TypeLayout type_layout(loom_dtype type) { return cuda::type_layout(type); }
  static const char* dtype_name(loom_dtype type) { return cuda::dtype_name(type); }
  static uint64_t row_bytes(loom_dtype type, int64_t ne0) { return cuda::row_bytes(type, ne0); }
  static bool is_weight_dtype(loom_dtype type) { return cuda::is_weight_dtype(type); }
  static bool is_kv_dtype(loom_dtype type) { return cuda::is_kv_dtype(type); }

  template <typename Checker>
  static void bind(const Checker&, const loom_tensor& t, const Buffer& buffer, uint64_t /*extent*/, const char* /*role*/, Tensor& out) {
    out.data = buffer.data + t.offset;
  }
  template <typename Checker>
  static void check_attention(const Checker& c, const OpArgs& a) {
    const int64_t head_dim = a.src[0].ne[0];
    if (head_dim > kMaxHeadDim)
      c.unsupported("head_dim " + std::to_string(head_dim) + " is above the cuda backend's limit of " + std::to_string(kMaxHeadDim));
  }
};

}  // namespace

OpArgs resolve_op(const loom_op& op, bool need_buffers) { return plugin_support::resolve_op<CudaOpRules>(op, need_buffers); }

}  // namespace loom::cuda
