#version 450
// GET_ROWS: dst[dim, n] = rows ids[i] of the table (any weight type, WTYPE_*), decoded to F32.
// A table larger than one storage-buffer binding is read in row windows: each dispatch sees rows
// [row_first, row_first + n_rows) and skips ids outside them; ids outside the whole table are errors.
#include "common.glsl"

layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer IBuf { int ids[]; };
layout(std430, binding = 2) writeonly buffer DBuf { uint D[]; };
layout(push_constant) uniform Push {
  uint w_off, w_nb1;   // bytes; w_off is row row_first of the window
  uint i_off, i_nb0;   // bytes
  uint d_off, d_nb1;   // bytes
  uint n_in, n_ids;
  uint row_first, n_rows, n_table_rows;
} pc;

#include "dequant.glsl"

void main() {
  uint n_chunks = (pc.n_in + 31u) / 32u;
  for (uint i = gl_WorkGroupID.y; i < pc.n_ids; i += gl_NumWorkGroups.y) {
    int id = ids[(pc.i_off + i * pc.i_nb0) >> 2];
    if (id < 0 || uint(id) >= pc.n_table_rows) {
      if (gl_LocalInvocationIndex == 0u && pc.row_first == 0u) report_error(ERR_ROW_ID, uint(id));
      continue;
    }
    if (uint(id) < pc.row_first || uint(id) >= pc.row_first + pc.n_rows) continue;
    uint row = pc.w_off + (uint(id) - pc.row_first) * pc.w_nb1;
    uint dw = (pc.d_off + i * pc.d_nb1) >> 2;
    for (uint c = gl_WorkGroupID.x * 32u + gl_LocalInvocationIndex; c < n_chunks; c += gl_NumWorkGroups.x * 32u) {
      float v[32];
      decode_chunk(row, c, pc.n_in, v);
      uint n = min(32u, pc.n_in - c * 32u);
      [[unroll]] for (uint j = 0u; j < 32u; j++)
        if (j < n) D[dw + c * 32u + j] = floatBitsToUint(v[j]);
    }
  }
}
