// ForwardBatch — what the model runner hands the model for one step: a flat list of tokens from
// one or more sequences (prefill chunks and decode tokens mixed), where each token's K/V goes
// (slot_mapping) and where each sequence's earlier K/V lives (block tables). The model only
// executes it; deciding what runs and where KV lives is the scheduler's and the allocator's job.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n_tok]
  std::vector<int32_t> positions;     // [n_tok] position of each token in its sequence
  std::vector<int32_t> slot_mapping;  // [n_tok] KV slot = block * block_size + offset; < 0 = do not store
  struct Seq {
    int32_t first_row = 0;     // first row of this sequence in tokens
    int32_t n_query = 0;       // rows of this sequence in this batch (consecutive)
    int32_t context_len = 0;   // tokens of the sequence after this step, including these rows
    std::vector<int32_t> block_table;  // KV block ids of the sequence, in order
    // Hybrid models: the sequence's recurrent state slot in the KvCache (the allocator's). A batch
    // starting at position 0 (context_len == n_query) starts the state from zeros.
    int32_t state_slot = 0;
    // The rows see every key of context_len, not only those up to their own position (an image's
    // rows in Gemma 3). A sequence may be split into consecutive entries, a causal part and a
    // non-causal one, over the same block table. Needs Model::supports_non_causal().
    bool non_causal = false;
    // The run-time adapter of the rows (Model::set_lora's slot), or -1 for the base model alone.
    int32_t lora_slot = -1;
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> logit_rows;  // rows whose logits are wanted, e.g. the last row of each sequence
  // Rows whose input is given instead of their token's embedding (an image's rows from the vision
  // encoder), ascending, and their values [embd_rows.size()][dim]. Such a row's token is ignored,
  // though it must be a valid id. The values go in as they are: no embedding scale.
  std::vector<int32_t> embd_rows;
  std::vector<float> embd;
  // M-RoPE models (qwen2vl): each row's rope position as four components, [4][n_tok] (time, height,
  // width, extra); an image's rows turn by their place in the image, and text after an image by
  // positions that no longer equal its KV index. Empty: each row's `positions` value in the first three
  // and 0 in the extra one (llama.cpp's M-RoPE text positions).
  std::vector<int32_t> rope_positions;

  void clear() {
    tokens.clear();
    positions.clear();
    slot_mapping.clear();
    seqs.clear();
    logit_rows.clear();
    embd_rows.clear();
    embd.clear();
    rope_positions.clear();
  }
};

}  // namespace loom
