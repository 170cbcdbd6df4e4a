// The scale searches GGML's K-quants share (make_qkx2_quants, make_qx_quants, make_q3_quants),
// operation for operation in f32 so that the bytes match GGML's.
#pragma once

#include <cstdint>

namespace loom::quant {

inline constexpr float kGroupMaxEps = 1e-15f;

// Asymmetric fit of x[n] to scale * L + min with L in 0..nmax, minimising the weighted squared
// error (or absolute error with `absolute_error`, as Q2_K asks) over a grid of candidate inverse
// scales (rmin + rdelta*is + nmax) / (max - min), is = 0..nstep. Returns the scale and writes
// -min (>= 0) to *neg_min; min is clamped to <= 0, as GGML does.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, uint8_t* L_aux,
                    float rmin, float rdelta, int nstep, bool absolute_error = false);

// Symmetric fit of x[n] to scale * (L - nmax), L - nmax in -nmax..nmax-1, weighted by x^2, over 19
// candidate inverse scales around nmax / max (Q6_K). Writes L (offset by nmax), returns the scale.
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L);

// Q3_K's symmetric fit: start at nmax / max, then up to 5 passes that move single values to the
// level that most improves the x^2-weighted fit. Writes L offset by nmax, returns the scale.
float fit_scale_symmetric_refined(int n, int nmax, const float* x, int8_t* L);

// Q4_K and Q5_K share a super-block layout: eight 32-value sub-blocks, each fitted to scale * L - min
// with weights av(|x|) + |x| (fit_k_sub_block), and the eight (scale, min) pairs as 6-bit integers
// in 12 bytes: pairs 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins), pairs 4..7 as
// nibbles in bytes 8..11 with their top two bits in the high bits of bytes 0..7.
float fit_k_sub_block(const float* x, int nmax, float rmin, int nstep, uint8_t* L, float* neg_min);
// Packs scales[8] and mins[8] against their maxima; `packed` must start zeroed.
void pack_scale_min_k4(const float* scales, const float* mins, float max_scale, float max_min, uint8_t* packed);
void scale_min_k4(int j, const uint8_t* packed, uint8_t* d, uint8_t* m);

}  // namespace loom::quant
