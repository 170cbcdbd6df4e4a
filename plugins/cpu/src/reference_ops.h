// The reference layer: every op as plain loops over dequantized floats, the oracle that every other
// backend (and the fast CPU kernels) is checked against. Selected with config {"reference": true}.
#pragma once

#include <vector>

#include "cpu_tensor.h"

namespace loom::cpu {

// Runs one validated op. Throws OpError for data-dependent errors (row id, slot or block out of range).
void run_reference_op(const OpArgs& a);

void reference_store_kv(const OpArgs& a);
void reference_paged_attention(const OpArgs& a);

// ---- helpers shared with the fast layer ---------------------------------------------------------------
// One sequence of a PAGED_ATTENTION batch (a column of the seqs table).
struct SeqInfo {
  int64_t first_row;  // first query row in q / dst
  int64_t n_query;    // query rows of this sequence in the batch
  int64_t ctx_len;    // keys visible to the last query row (includes the batch's own rows)
  bool non_causal = false;  // LOOM_SEQ_NON_CAUSAL: every row sees keys up to ctx_len - 1

  // The last key the row at `pos` sees.
  int64_t last_key(int64_t pos) const { return non_causal ? ctx_len - 1 : pos; }
};
// Reads and checks the seqs table and every block id the sequences will touch.
std::vector<SeqInfo> read_seqs(const OpArgs& a);
// Cache slot of position `pos` of sequence `seq`.
inline int64_t kv_slot(const Tensor& block_tables, int64_t seq, int64_t pos, int64_t block_size) {
  const auto* table = reinterpret_cast<const int32_t*>(block_tables.at(seq));
  return int64_t(table[pos / block_size]) * block_size + pos % block_size;
}
// First key position query `pos` may see: 0, or the start of its sliding window.
inline int64_t first_visible_key(int64_t pos, uint32_t sliding_window) {
  return sliding_window == 0 || pos < int64_t(sliding_window) ? 0 : pos - int64_t(sliding_window) + 1;
}
// Reads a row id / slot and checks it against [0, limit).
int64_t checked_index(const Tensor& ids, int64_t i, int64_t limit, const char* what);

// Rotation angles of RoPE for one position: both layers use this so they agree to the bit.
// `freq_factors` (n_dims/2 divisors of the pairs' frequencies, LOOM_ROPE_FREQ_FACTORS) may be null.
// A token's rope positions: one, or (LOOM_ROPE_MROPE) its time, height, width and extra components.
struct RopePositions {
  int64_t component[4] = {0, 0, 0, 0};
  bool operator==(const RopePositions&) const = default;
};
RopePositions rope_positions(const OpArgs& a, int64_t token);
void rope_cos_sin(const OpParams& p, const RopePositions& pos, const float* freq_factors, float* cos_out, float* sin_out);  // n_dims/2 each
// The frequency factors of a ROPE op as a contiguous copy (empty without LOOM_ROPE_FREQ_FACTORS).
std::vector<float> rope_freq_factors(const OpArgs& a);

}  // namespace loom::cpu
