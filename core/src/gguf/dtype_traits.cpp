#include "gguf/dtype_traits.h"

#include <array>
#include <cctype>
#include <limits>
#include <string>

#include "common/error.h"

namespace loom {

namespace {

struct TraitsEntry {
  loom_dtype id;
  DtypeTraits traits;
};

// Block sizes are GGML's (ggml-common.h). Ids GGML retired (4, 5, 31-33, 36-38) are absent on
// purpose: a file using them is rejected as an unknown type rather than misread.
constexpr std::array<TraitsEntry, 39> kTraits{{
    {LOOM_DTYPE_F32, {"F32", 1, 4}},
    {LOOM_DTYPE_F16, {"F16", 1, 2}},
    {LOOM_DTYPE_Q4_0, {"Q4_0", 32, 18}},    // f16 d + 16 nibble bytes
    {LOOM_DTYPE_Q4_1, {"Q4_1", 32, 20}},    // f16 d, m + 16
    {LOOM_DTYPE_Q5_0, {"Q5_0", 32, 22}},    // f16 d + 4 qh + 16
    {LOOM_DTYPE_Q5_1, {"Q5_1", 32, 24}},    // f16 d, m + 4 qh + 16
    {LOOM_DTYPE_Q8_0, {"Q8_0", 32, 34}},    // f16 d + 32
    {LOOM_DTYPE_Q8_1, {"Q8_1", 32, 36}},    // f16 d, s + 32
    {LOOM_DTYPE_Q2_K, {"Q2_K", 256, 84}},   // 16 scales + 64 qs + f16 d, dmin
    {LOOM_DTYPE_Q3_K, {"Q3_K", 256, 110}},  // 32 hmask + 64 qs + 12 scales + f16 d
    {LOOM_DTYPE_Q4_K, {"Q4_K", 256, 144}},  // f16 d, dmin + 12 scales + 128 qs
    {LOOM_DTYPE_Q5_K, {"Q5_K", 256, 176}},  // f16 d, dmin + 12 scales + 32 qh + 128 qs
    {LOOM_DTYPE_Q6_K, {"Q6_K", 256, 210}},  // 128 ql + 64 qh + 16 scales + f16 d
    {LOOM_DTYPE_Q8_K, {"Q8_K", 256, 292}},  // f32 d + 256 qs + 16 x i16 bsums
    {16, {"IQ2_XXS", 256, 66}},             // f16 d + 32 x u16
    {17, {"IQ2_XS", 256, 74}},              // f16 d + 32 x u16 + 8 scales
    {18, {"IQ3_XXS", 256, 98}},             // f16 d + 96
    {19, {"IQ1_S", 256, 50}},               // f16 d + 32 qs + 8 x u16 qh
    {20, {"IQ4_NL", 32, 18}},               // f16 d + 16
    {21, {"IQ3_S", 256, 110}},              // f16 d + 64 qs + 8 qh + 32 signs + 4 scales
    {22, {"IQ2_S", 256, 82}},               // f16 d + 64 qs + 8 qh + 8 scales
    {23, {"IQ4_XS", 256, 136}},             // f16 d + u16 scales_h + 4 scales_l + 128 qs
    {LOOM_DTYPE_MXFP4, {"MXFP4", 32, 17}},  // e8m0 exponent + 16
    {LOOM_DTYPE_I8, {"I8", 1, 1}},
    {LOOM_DTYPE_I16, {"I16", 1, 2}},
    {LOOM_DTYPE_I32, {"I32", 1, 4}},
    {LOOM_DTYPE_I64, {"I64", 1, 8}},
    {LOOM_DTYPE_F64, {"F64", 1, 8}},
    {29, {"IQ1_M", 256, 56}},               // 32 qs + 16 qh + 8 scales (d lives in the scales)
    {LOOM_DTYPE_BF16, {"BF16", 1, 2}},
    {34, {"TQ1_0", 256, 54}},               // 48 qs + 4 qh + f16 d
    {35, {"TQ2_0", 256, 66}},               // 64 qs + f16 d
    {39, {"MXFP4", 32, 17}},                // e8m0 scale + 16 nibble bytes
    {LOOM_DTYPE_INT8_KV, {"INT8_KV", 1, 1, 4}},
    {LOOM_DTYPE_I8_ROW, {"I8_ROW", 1, 1, 4}},
    {LOOM_DTYPE_I4_G128, {"I4_G128", 128, 68}},  // f16 d, m + 64 nibble bytes
    {LOOM_DTYPE_F8_E4M3, {"F8_E4M3", 1, 1}},     // one OCP E4M3 byte per value
    {LOOM_DTYPE_F8_E4M3_B32, {"F8_E4M3_B32", 32, 36}},  // f32 d + 32 E4M3 bytes
    {-1, {"", 0, 0}},  // sentinel, never matched (ids are never negative in files)
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) != std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

const DtypeTraits* dtype_traits(loom_dtype type) {
  if (type < 0) return nullptr;
  for (const auto& entry : kTraits) {
    if (entry.id == type) return &entry.traits;
  }
  return nullptr;
}

std::optional<loom_dtype> dtype_from_name(std::string_view name) {
  for (const auto& entry : kTraits) {
    if (entry.id >= 0 && iequals(entry.traits.name, name)) return entry.id;
  }
  return std::nullopt;
}

uint64_t dtype_row_bytes(loom_dtype type, int64_t n) {
  const DtypeTraits* traits = dtype_traits(type);
  if (traits == nullptr) throw Error("unknown element type id " + std::to_string(type));
  if (n < 0) throw Error("negative row length " + std::to_string(n));
  if (n % traits->block_elems != 0) {
    throw Error("row of " + std::to_string(n) + " elements is not a multiple of the " +
                std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
  }
  const auto n_blocks = static_cast<uint64_t>(n / traits->block_elems);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (n_blocks > (kMax - traits->row_overhead_bytes) / traits->block_bytes) {
    throw Error("row of " + std::to_string(n) + " " + std::string(traits->name) + " elements overflows");
  }
  return n_blocks * traits->block_bytes + traits->row_overhead_bytes;
}

std::string dtype_name(loom_dtype type) {
  const DtypeTraits* traits = dtype_traits(type);
  return traits ? std::string(traits->name) : "type#" + std::to_string(type);
}

}  // namespace loom
