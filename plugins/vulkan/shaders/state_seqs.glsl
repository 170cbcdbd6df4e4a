// Included by the recurrent ops after they declare their sequence table as Q[] (int words).
// The recurrent ops' sequence table (ABI 1.6): sequence s's rows must lie in the batch, its slot in
// the pool, and no earlier sequence may hold the same slot (they would race on it).
bool state_seq_ok(uint s, int first, int n, int slot, uint n_tok, uint n_slots, uint q_off, uint q_nb1) {
  if (first < 0 || n < 0 || uint(first) + uint(n) > n_tok) {
    report_error(ERR_STATE_ROWS, s);
    return false;
  }
  if (slot < 0 || uint(slot) >= n_slots) {
    report_error(ERR_STATE_SLOT, uint(slot));
    return false;
  }
  for (uint o = 0u; o < s; o++) {
    if (Q[((q_off + o * q_nb1) >> 2) + 2u] == slot) {
      report_error(ERR_STATE_SHARED, uint(slot));
      return false;
    }
  }
  return true;
}

