#include "op_dispatch.h"

#include <algorithm>
#include <cstring>

#include "kernels.h"
#include "op_validation.h"

namespace loom::cuda {

namespace {

void launch_one(const OpArgs& a, const LaunchContext& ctx) {
  switch (a.type) {
    case LOOM_OP_GET_ROWS: return launch_get_rows(a, ctx);
    case LOOM_OP_MATMUL: return launch_matmul(a, ctx);
    case LOOM_OP_ADD:
    case LOOM_OP_MUL: return launch_binary(a, ctx);
    case LOOM_OP_SCALE: return launch_scale(a, ctx);
    case LOOM_OP_RMS_NORM: return launch_rms_norm(a, ctx);
    case LOOM_OP_ROPE: return launch_rope(a, ctx);
    case LOOM_OP_GLU:
    case LOOM_OP_UNARY: return launch_glu(a, ctx);
    case LOOM_OP_COPY: return launch_copy(a, ctx);
    case LOOM_OP_SOFTMAX: return launch_softmax(a, ctx);
    case LOOM_OP_STORE_KV: return launch_store_kv(a, ctx);
    case LOOM_OP_PAGED_ATTENTION: return launch_paged_attention(a, ctx);
    case LOOM_OP_LORA: return launch_lora(a, ctx);
    default: unsupported("op type " + std::to_string(a.type) + " has no cuda kernel");
  }
}

// The graph key: everything a captured launch depends on. Kernels read data (ids, positions, block
// tables) from device memory at run time, so only types, shapes, addresses and params matter.
void append_tensor(std::vector<uint64_t>& key, const loom_tensor& t) {
  key.push_back(uint64_t(uint32_t(t.dtype)));
  key.push_back(t.buffer ? reinterpret_cast<uint64_t>(t.buffer->data) + t.offset : 0);
  for (int i = 0; i < 4; i++) key.push_back(uint64_t(t.ne[i]));
  for (int i = 0; i < 4; i++) key.push_back(t.nb[i]);
}

void append_op(std::vector<uint64_t>& key, const loom_op& op) {
  key.push_back(uint64_t(uint32_t(op.type)) << 32 | op.n_src);
  append_tensor(key, op.dst);
  for (uint32_t i = 0; i < op.n_src && i < LOOM_OP_MAX_SRC; i++) append_tensor(key, op.src[i]);
  if (op.params != nullptr) {
    const uint32_t size = std::min<uint32_t>(*static_cast<const uint32_t*>(op.params), 128);
    uint64_t words[16] = {};
    std::memcpy(words, op.params, size);
    key.push_back(size);
    for (uint32_t i = 0; i < (size + 7) / 8; i++) key.push_back(words[i]);
  }
}

}  // namespace

void run_op_list(StreamState& stream, const loom_op* ops, uint32_t n_ops, const DispatchConfig& config) {
  std::vector<OpArgs> args;
  args.reserve(n_ops);
  LaunchContext ctx;
  ctx.stream = stream.stream();
  ctx.cublas = stream.cublas();
  ctx.error_word = stream.error_word_device();
  ctx.sm_count = config.sm_count;
  ctx.gemm_min_tokens = config.gemm_min_tokens;
  uint64_t scratch = 0;
  for (uint32_t i = 0; i < n_ops; i++) {
    try {
      args.push_back(resolve_op(ops[i], /*need_buffers=*/true));
      const OpArgs& a = args.back();
      if (a.type == LOOM_OP_MATMUL) scratch = std::max(scratch, matmul_scratch_bytes(a, ctx));
      if (a.type == LOOM_OP_PAGED_ATTENTION) scratch = std::max(scratch, attention_scratch_bytes(a));
    } catch (const OpError& e) {
      throw OpError(e.status, "op " + std::to_string(i) + ": " + e.what());
    }
  }
  stream.ensure_scratch(scratch);
  ctx.scratch = stream.scratch();
  ctx.scratch_size = stream.scratch_size();

  std::vector<uint64_t> key;
  key.reserve(size_t(n_ops) * 40 + 2);
  key.push_back(reinterpret_cast<uint64_t>(ctx.scratch));
  key.push_back(uint64_t(ctx.gemm_min_tokens));
  for (uint32_t i = 0; i < n_ops; i++) append_op(key, ops[i]);

  stream.run(key, [&] {
    for (size_t i = 0; i < args.size(); i++) {
      try {
        launch_one(args[i], ctx);
      } catch (const OpError& e) {
        throw OpError(e.status, "op " + std::to_string(i) + ": " + e.what());
      }
    }
  });
}

}  // namespace loom::cuda
