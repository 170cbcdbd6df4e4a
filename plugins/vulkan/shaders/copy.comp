#version 450
// COPY: dst = convert(a) between F32, F16 and BF16, rounding to nearest even like the reference.
// 16-bit stores go through atomics: two invocations may own the two halves of one word.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { uint A[]; };
layout(std430, binding = 2) buffer DBuf { uint D[]; };
#include "rows.glsl"

const uint DT_F32 = 0u, DT_F16 = 1u, DT_BF16 = 30u;

float load(uint dtype, uint a) {
  if (dtype == DT_F32) return uintBitsToFloat(A[a >> 2]);
  uint h = (A[a >> 2] >> ((a & 2u) << 3)) & 0xffffu;
  return dtype == DT_F16 ? half_to_float(h) : bf16_to_float(h);
}

void store(uint dtype, uint a, float v) {
  if (dtype == DT_F32) {
    D[a >> 2] = floatBitsToUint(v);
    return;
  }
  uint h = dtype == DT_F16 ? float_to_half(v) : float_to_bf16(v);
  uint shift = (a & 2u) << 3;
  atomicAnd(D[a >> 2], ~(0xffffu << shift));
  atomicOr(D[a >> 2], h << shift);
}

void main() {
  uint src_t = pc.mode & 0xffffu, dst_t = pc.mode >> 16;
  uint src_size = src_t == DT_F32 ? 4u : 2u, dst_size = dst_t == DT_F32 ? 4u : 2u;
  for (uint r = gl_WorkGroupID.y; r < pc.n_rows; r += gl_NumWorkGroups.y) {
    uint a = a_row(r), d = d_row(r);
    for (uint i = gl_GlobalInvocationID.x; i < pc.ne0; i += gl_NumWorkGroups.x * 64u)
      store(dst_t, d + i * dst_size, load(src_t, a + i * src_size));
  }
}
