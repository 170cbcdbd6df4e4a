#include "model/session.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace loom {

Session::Session(Model& model, SessionOptions options) : model_(model) {
  n_ctx_ = options.n_ctx > 0 ? std::min<int64_t>(options.n_ctx, model.n_ctx()) : std::min<int64_t>(model.n_ctx(), 4096);
  max_batch_ = std::max<int64_t>(options.max_batch, 1);
  const uint32_t block_size = std::max<uint32_t>(options.block_size, 1);
  const auto n_blocks = static_cast<uint32_t>((n_ctx_ + block_size - 1) / block_size);
  kv_ = model.create_kv_cache(n_blocks, block_size, options.kv_dtype);
  // The whole table every step: attention reads only the blocks context_len needs, and a fixed
  // width keeps the model's op list unchanged from one decode step to the next.
  batch_.seqs.resize(1);
  batch_.seqs[0].block_table.resize(n_blocks);
  std::iota(batch_.seqs[0].block_table.begin(), batch_.seqs[0].block_table.end(), 0);
  history_.reserve(static_cast<size_t>(n_ctx_));
}

const std::vector<float>& Session::prefill(std::span<const int32_t> tokens) {
  if (tokens.empty()) throw Error("prefill: no tokens");
  if (n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_) {
    throw Error("context overflow: " + std::to_string(n_past()) + " tokens in the session + " +
                std::to_string(tokens.size()) + " new exceed the context size " + std::to_string(n_ctx_) + " (n_ctx)");
  }
  size_t done = 0;
  while (done < tokens.size()) {
    const size_t n = std::min<size_t>(tokens.size() - done, static_cast<size_t>(max_batch_));
    const auto start = static_cast<int32_t>(history_.size());
    batch_.tokens.assign(tokens.begin() + static_cast<ptrdiff_t>(done), tokens.begin() + static_cast<ptrdiff_t>(done + n));
    batch_.positions.resize(n);
    batch_.slot_mapping.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int32_t pos = start + static_cast<int32_t>(i);
      batch_.positions[i] = pos;
      batch_.slot_mapping[i] = pos;  // contiguous blocks: block pos / bs, offset pos % bs
    }
    auto& seq = batch_.seqs[0];
    seq.first_row = 0;
    seq.n_query = static_cast<int32_t>(n);
    seq.context_len = start + static_cast<int32_t>(n);
    batch_.logit_rows.assign(1, static_cast<int32_t>(n - 1));
    model_.forward(batch_, kv_, logits_);
    history_.insert(history_.end(), batch_.tokens.begin(), batch_.tokens.end());
    done += n;
  }
  return logits_;
}

const std::vector<float>& Session::decode(int32_t token) { return prefill(std::span<const int32_t>(&token, 1)); }

void Session::truncate(int64_t n_keep) {
  if (n_keep < 0 || n_keep > n_past()) throw Error("truncate: n_keep out of range");
  if (model_.info().is_hybrid() && n_keep > 0 && n_keep < n_past()) {
    // A recurrent state cannot be cut back: rebuild it (and the kept K/V) from the kept tokens.
    const std::vector<int32_t> kept(history_.begin(), history_.begin() + static_cast<ptrdiff_t>(n_keep));
    history_.clear();
    prefill(kept);
    return;
  }
  history_.resize(static_cast<size_t>(n_keep));
}

}  // namespace loom
