// Shared by every Loom shader: the status buffer (data-dependent errors reach the host through it),
// row addressing, exact f16/bf16 conversions and workgroup reductions.
// Every operand is a `uint` storage buffer addressed in bytes from push-constant offsets, so tensors
// may sit at any 4-byte offset (2-byte for 16-bit data) of one large buffer.
#extension GL_EXT_control_flow_attributes : enable
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

layout(std430, binding = 7) buffer StatusBuffer { uint status[]; };

// Error codes: see kErrorMessages in vk_stream.cpp.
const uint ERR_ROW_ID = 1u;
const uint ERR_SLOT = 2u;
const uint ERR_SEQ_ROWS = 3u;
const uint ERR_SEQ_CTX = 4u;
const uint ERR_SEQ_TABLE = 5u;
const uint ERR_BLOCK = 6u;
const uint ERR_STATE_ROWS = 7u;
const uint ERR_STATE_SLOT = 8u;
const uint ERR_STATE_SHARED = 9u;
const uint ERR_EXPERT = 10u;
const uint ERR_KEYS = 11u;
const uint ERR_LORA_SLOT = 12u;

// The first error of a submission wins; its detail value is kept beside it.
void report_error(uint code, uint value) {
  if (atomicCompSwap(status[0], 0u, code) == 0u) status[1] = value;
}

// Byte offset of row r of the flattened [ne1, ne2, ne3] index space.
uint row_offset(uint r, uint ne1, uint ne2, uint nb1, uint nb2, uint nb3) {
  return (r % ne1) * nb1 + ((r / ne1) % ne2) * nb2 + (r / (ne1 * ne2)) * nb3;
}

// IEEE half -> float, subnormals included (unpackHalf2x16 may flush them).
float half_to_float(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e != 0u) return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
  float v = float(m) * (1.0 / 16777216.0);  // m * 2^-24, exact
  return sign != 0u ? -v : v;
}

// float -> IEEE half, round to nearest even, inf/NaN preserved (bit-exact with the CPU reference).
uint float_to_half(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return sign;
    uint e = a >> 23;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;
    uint hm = m >> shift;
    uint rest = m & ((1u << shift) - 1u);
    uint halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (hm & 1u) != 0u)) hm++;
    return sign | hm;
  }
  uint h = (a - 0x38000000u) >> 13;
  uint rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h++;
  return sign | h;
}

float bf16_to_float(uint h) { return uintBitsToFloat(h << 16); }

uint float_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 64u) & 0xffffu;
  return ((u + (0x7fffu + ((u >> 16) & 1u))) >> 16) & 0xffffu;
}

// tanh without exp overflow for large |x|.
float safe_tanh(float x) {
  float t = exp(-2.0 * abs(x));
  float r = (1.0 - t) / (1.0 + t);
  return x < 0.0 ? -r : r;
}

#ifdef RED_WG
// Workgroup-wide sum / max of one value per invocation. Call from uniform control flow.
shared float red_s[RED_WG];

float wg_sum(float v) {
#ifdef USE_SUBGROUP
  v = subgroupAdd(v);
  if (subgroupElect()) red_s[gl_SubgroupID] = v;
  barrier();
  float total = 0.0;
  for (uint i = 0u; i < gl_NumSubgroups; i++) total += red_s[i];
  barrier();
  return total;
#else
  uint lid = gl_LocalInvocationIndex;
  red_s[lid] = v;
  barrier();
  for (uint s = RED_WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) red_s[lid] += red_s[lid + s];
    barrier();
  }
  float total = red_s[0];
  barrier();
  return total;
#endif
}

float wg_max(float v) {
#ifdef USE_SUBGROUP
  v = subgroupMax(v);
  if (subgroupElect()) red_s[gl_SubgroupID] = v;
  barrier();
  float m = red_s[0];
  for (uint i = 1u; i < gl_NumSubgroups; i++) m = max(m, red_s[i]);
  barrier();
  return m;
#else
  uint lid = gl_LocalInvocationIndex;
  red_s[lid] = v;
  barrier();
  for (uint s = RED_WG / 2u; s > 0u; s >>= 1) {
    if (lid < s) red_s[lid] = max(red_s[lid], red_s[lid + s]);
    barrier();
  }
  float m = red_s[0];
  barrier();
  return m;
#endif
}
#endif

// OCP FP8 E4M3 (the F8_E4M3 KV cache; plugins/common/fp8_e4m3.h): 4 exponent bits of bias 7, 3
// mantissa bits, subnormals in steps of 2^-9, ties to even, saturating at +-448 (0x7E).
uint float_to_e4m3(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 24) & 0x80u;
  uint a = x & 0x7fffffffu;
  if (a >= 0x43e00000u) return sign | 0x7eu;                                      // >= 448
  if (a < 0x3c800000u) return sign | uint(roundEven(uintBitsToFloat(a) * 512.0));  // < 2^-6
  uint e8 = ((((a >> 23) - 120u) << 3) | ((a >> 20) & 7u));  // rebias 127 -> 7, top 3 mantissa bits
  uint rest = a & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (e8 & 1u) != 0u)) e8++;  // a carry moves into the exponent
  return sign | e8;
}

float e4m3_to_float(uint b) {
  uint e = (b >> 3) & 15u, m = b & 7u;
  float v = e == 0u ? float(m) * (1.0 / 512.0) : uintBitsToFloat(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) != 0u ? -v : v;
}
