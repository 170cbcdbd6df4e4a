// Push constants shared by the row-wise ops: up to two sources (a, b) and dst, each with its byte
// offset and strides of dims 1..3. A broadcast source row has zero strides.
layout(push_constant) uniform Push {
  uint a_off, a_nb1, a_nb2, a_nb3;
  uint b_off, b_nb1, b_nb2, b_nb3;
  uint d_off, d_nb1, d_nb2, d_nb3;
  uint ne0, ne1, ne2, n_rows;
  uint mode;  // op-specific: binary op, activation, or COPY's (src dtype | dst dtype << 16)
  float f;    // op-specific: scale, eps
} pc;

uint a_row(uint r) { return pc.a_off + row_offset(r, pc.ne1, pc.ne2, pc.a_nb1, pc.a_nb2, pc.a_nb3); }
uint b_row(uint r) { return pc.b_off + row_offset(r, pc.ne1, pc.ne2, pc.b_nb1, pc.b_nb2, pc.b_nb3); }
uint d_row(uint r) { return pc.d_off + row_offset(r, pc.ne1, pc.ne2, pc.d_nb1, pc.d_nb2, pc.d_nb3); }
