#version 450
// MOE_ROUTE (ABI 1.5): per token, the n_used experts of highest probability (the lower id first on a
// tie) and their weights: softmax over all logits, sigmoid per logit, or (SOFTMAX_CHOSEN) chosen by
// logit and weighed by a softmax over the chosen alone; then optional normalisation and scale, as
// backend.h defines them. Router widths are small: one invocation per token does it in order.
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer LBuf { float L[]; };
layout(std430, binding = 1) writeonly buffer IBuf { int I[]; };
layout(std430, binding = 2) buffer WBuf { float Wt[]; };
layout(push_constant) uniform Push {
  uint l_off, l_nb1, i_off, i_nb1, w_off, w_nb1;
  uint n_expert, n_used, n_tok, gating, normalize;
  float scale;
} pc;

const uint MAX_EXPERTS = 512u;  // the host refuses more
const uint GATING_SOFTMAX = 1u, GATING_SIGMOID = 2u, GATING_SOFTMAX_CHOSEN = 3u;

void main() {
  for (uint t = gl_GlobalInvocationID.x; t < pc.n_tok; t += gl_NumWorkGroups.x * 64u) {
    uint l = (pc.l_off + t * pc.l_nb1) >> 2;
    float p[MAX_EXPERTS];
    bool taken[MAX_EXPERTS];
    float top = L[l];
    for (uint e = 0u; e < pc.n_expert; e++) {
      p[e] = L[l + e];
      top = max(top, p[e]);
      taken[e] = false;
    }
    if (pc.gating == GATING_SOFTMAX) {
      float sum = 0.0;
      for (uint e = 0u; e < pc.n_expert; e++) {
        p[e] = exp(p[e] - top);
        sum += p[e];
      }
      for (uint e = 0u; e < pc.n_expert; e++) p[e] /= sum;
    } else if (pc.gating == GATING_SIGMOID) {
      for (uint e = 0u; e < pc.n_expert; e++) p[e] = 1.0 / (1.0 + exp(-p[e]));
    }
    uint i = (pc.i_off + t * pc.i_nb1) >> 2, w = (pc.w_off + t * pc.w_nb1) >> 2;
    float sum = 0.0;
    for (uint k = 0u; k < pc.n_used; k++) {
      uint best = 0u;
      bool found = false;
      for (uint e = 0u; e < pc.n_expert; e++) {
        if (!taken[e] && (!found || p[e] > p[best])) {
          best = e;
          found = true;
        }
      }
      taken[best] = true;
      I[i + k] = int(best);
      Wt[w + k] = p[best];
    }
    if (pc.gating == GATING_SOFTMAX_CHOSEN) {
      float first = Wt[w];
      float total = 0.0;
      for (uint k = 0u; k < pc.n_used; k++) {
        float x = exp(Wt[w + k] - first);
        Wt[w + k] = x;
        total += x;
      }
      for (uint k = 0u; k < pc.n_used; k++) Wt[w + k] /= total;
    }
    if (pc.normalize != 0u) {
      for (uint k = 0u; k < pc.n_used; k++) sum += Wt[w + k];
      sum = max(sum, 6.103515625e-5);
      for (uint k = 0u; k < pc.n_used; k++) Wt[w + k] /= sum;
    }
    for (uint k = 0u; k < pc.n_used; k++) Wt[w + k] *= pc.scale;
  }
}
