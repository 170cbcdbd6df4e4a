#include "hf/gpt_oss_experts.h"

#include <cstring>

#include "common/error.h"

namespace loom::hf {

RepackedExperts repack_mxfp4_experts(const SafeTensor& blocks, const SafeTensor& scales, RowSelection which, const std::string& where) {
  if (blocks.dtype != "U8" || blocks.shape.size() != 4 || blocks.shape[3] != 16)
    throw Error(where + ": tensor '" + blocks.name + "' should be U8 [experts, rows, blocks, 16] (MXFP4 codes)");
  const int64_t experts = blocks.shape[0], rows = blocks.shape[1], per_row = blocks.shape[2];
  if (scales.dtype != "U8" || scales.shape != std::vector<int64_t>{experts, rows, per_row})
    throw Error(where + ": tensor '" + scales.name + "' should be U8 [" + std::to_string(experts) + ", " + std::to_string(rows) + ", " +
                std::to_string(per_row) + "] (MXFP4 exponents)");
  if (which != RowSelection::all && rows % 2 != 0) throw Error(where + ": tensor '" + blocks.name + "' has an odd number of rows to split");
  const int64_t step = which == RowSelection::all ? 1 : 2, first = which == RowSelection::odd ? 1 : 0, out_rows = rows / step;
  RepackedExperts out;
  out.dims = {per_row * 32, out_rows, experts};
  out.bytes.resize(size_t(experts * out_rows * per_row) * 17);
  uint8_t* o = out.bytes.data();
  for (int64_t e = 0; e < experts; e++)
    for (int64_t r = first; r < rows; r += step)
      for (int64_t b = 0; b < per_row; b++, o += 17) {
        const size_t block = size_t((e * rows + r) * per_row + b);
        const uint8_t* codes = blocks.data.data() + block * 16;
        auto code = [&](int i) { return uint8_t((codes[i / 2] >> (4 * (i % 2))) & 0x0F); };
        o[0] = scales.data[block];
        for (int j = 0; j < 16; j++) o[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
      }
  return out;
}

RepackedExperts transposed_experts(const SafeTensor& t, RowSelection which, size_t element_bytes, const std::string& where) {
  if (t.shape.size() != 3) throw Error(where + ": tensor '" + t.name + "' should be [experts, columns, rows]");
  const int64_t experts = t.shape[0], columns = t.shape[1], rows = t.shape[2];
  if (which != RowSelection::all && rows % 2 != 0) throw Error(where + ": tensor '" + t.name + "' has an odd number of rows to split");
  const int64_t step = which == RowSelection::all ? 1 : 2, first = which == RowSelection::odd ? 1 : 0;
  RepackedExperts out;
  out.dims = {columns, rows / step, experts};
  out.bytes.resize(size_t(experts * (rows / step) * columns) * element_bytes);
  uint8_t* o = out.bytes.data();
  for (int64_t e = 0; e < experts; e++)
    for (int64_t r = first; r < rows; r += step)
      for (int64_t c = 0; c < columns; c++, o += element_bytes)
        std::memcpy(o, t.data.data() + size_t((e * columns + c) * rows + r) * element_bytes, element_bytes);
  return out;
}

std::vector<uint8_t> every_other_column(const SafeTensor& t, RowSelection which, size_t element_bytes) {
  const size_t n = t.data.size() / element_bytes, first = which == RowSelection::odd ? 1 : 0;
  std::vector<uint8_t> out;
  out.reserve(t.data.size() / 2);
  for (size_t i = first; i < n; i += 2) out.insert(out.end(), t.data.begin() + ptrdiff_t(i * element_bytes), t.data.begin() + ptrdiff_t((i + 1) * element_bytes));
  return out;
}

}  // namespace loom::hf
