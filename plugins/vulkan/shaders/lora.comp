#version 450
// LORA (ABI 1.16): dst[:, t] += scales[s] * B_s · (A_s · x[:, t]) for the rows t of slot s = slots[t] >= 0.
// One workgroup per row: its 64 invocations first take the rank dot products of A_s with x[:, t] into
// shared memory (the low-rank activations, at most MAX_RANK of them), then each adds its share of the
// output rows. A and B are F32 or F16 (a_f16, b_f16), addressed in bytes as every Loom shader's operands;
// B comes transposed (row j is its column j), so neighbouring invocations read neighbouring outputs.
#include "common.glsl"
#define MAX_RANK 256u
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer ABuf { uint A[]; };
layout(std430, binding = 1) readonly buffer BBuf { uint B[]; };
layout(std430, binding = 2) readonly buffer XBuf { float X[]; };
layout(std430, binding = 3) readonly buffer SBuf { int Slot[]; };
layout(std430, binding = 4) readonly buffer CBuf { float Scale[]; };
layout(std430, binding = 5) buffer DBuf { float D[]; };
layout(push_constant) uniform Push {
  uint a_off, a_nb1, a_nb2, b_off, b_nb1, b_nb2, x_off, x_nb1, s_off, c_off, d_off, d_nb1;
  uint n_in, rank, n_out, n_slots, n_tok, a_f16, b_f16;
} pc;

shared float down[MAX_RANK];

// Element i of the row starting at byte `row` of an F32 or F16 buffer.
float element(uint word, uint byte_in_word, bool f16) {
  return f16 ? half_to_float((word >> (byte_in_word * 8u)) & 0xffffu) : uintBitsToFloat(word);
}

float a_at(uint row, uint i) {
  uint byte = row + i * (pc.a_f16 != 0u ? 2u : 4u);
  return element(A[byte >> 2], byte & 3u, pc.a_f16 != 0u);
}

float b_at(uint row, uint j) {
  uint byte = row + j * (pc.b_f16 != 0u ? 2u : 4u);
  return element(B[byte >> 2], byte & 3u, pc.b_f16 != 0u);
}

void main() {
  for (uint t = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; t < pc.n_tok; t += gl_NumWorkGroups.x * gl_NumWorkGroups.y) {
    int s = Slot[(pc.s_off >> 2) + t];
    if (s < -1 || s >= int(pc.n_slots)) {
      if (gl_LocalInvocationID.x == 0u) report_error(ERR_LORA_SLOT, uint(s));
      continue;
    }
    if (s < 0) continue;  // the whole workgroup agrees: s is per row
    uint x = (pc.x_off + t * pc.x_nb1) >> 2;
    for (uint j = gl_LocalInvocationID.x; j < pc.rank; j += 64u) {
      uint row = pc.a_off + j * pc.a_nb1 + uint(s) * pc.a_nb2;
      float sum = 0.0;
      for (uint i = 0u; i < pc.n_in; i++) sum += a_at(row, i) * X[x + i];
      down[j] = sum;
    }
    barrier();
    float scale = Scale[(pc.c_off >> 2) + uint(s)];
    uint d = (pc.d_off + t * pc.d_nb1) >> 2;
    uint b_slot = pc.b_off + uint(s) * pc.b_nb2;
    for (uint o = gl_LocalInvocationID.x; o < pc.n_out; o += 64u) {
      float sum = 0.0;
      for (uint j = 0u; j < pc.rank; j++) sum += b_at(b_slot + j * pc.b_nb1, o) * down[j];
      D[d + o] += scale * sum;
    }
    barrier();  // down[] is rewritten for the next row
  }
}
