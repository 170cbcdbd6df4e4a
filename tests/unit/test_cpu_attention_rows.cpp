// The CPU backend's attention gives a query row the same result to the bit however the row is
// batched: decoded alone, decoded beside other sequences (the query heads of a KV head together),
// or as one row of a prefill chunk (scores and weighted values as matrix products). The engine's
// batch invariance rests on it: activations are rounded to int8 blocks downstream, where a
// last-bit difference can move a value by a whole step. Tolerance-based cases (conformance) cannot
// see a change of summation order; this test can.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "test_model_helpers.h"

namespace {

using loom::Backend;
using loom::Buffer;

constexpr int64_t kHeadDim = 64, kHeads = 8, kKvHeads = 2, kBlock = 16, kContext = 150;

loom_tensor tensor(const Buffer& buffer, loom_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2, uint64_t elem) {
  loom_tensor t{};
  t.struct_size = sizeof(loom_tensor);
  t.dtype = dtype;
  t.buffer = buffer.get();
  t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = 1;
  t.nb[0] = elem, t.nb[1] = elem * uint64_t(ne0), t.nb[2] = t.nb[1] * uint64_t(ne1), t.nb[3] = t.nb[2] * uint64_t(ne2);
  return t;
}

template <typename T>
Buffer upload(Backend& backend, const std::vector<T>& values) {
  Buffer b = backend.alloc(values.size() * sizeof(T), LOOM_BUFFER_USAGE_COMPUTE);
  backend.upload(b, 0, values.data(), values.size() * sizeof(T));
  return b;
}

struct Cache {
  Buffer k, v, table;
};

// One sequence of kContext positions in an F16 cache, its blocks in reverse order.
Cache fill_cache(Backend& backend, std::mt19937& rng) {
  const int64_t n_blocks = (kContext + kBlock - 1) / kBlock, n_slots = n_blocks * kBlock;
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> k(size_t(kHeadDim * kKvHeads * kContext)), v(k.size());
  for (auto& x : k) x = dist(rng);
  for (auto& x : v) x = dist(rng);
  std::vector<int32_t> table(static_cast<size_t>(n_blocks)), slots(static_cast<size_t>(kContext));
  for (int64_t b = 0; b < n_blocks; b++) table[size_t(b)] = int32_t(n_blocks - 1 - b);
  for (int64_t p = 0; p < kContext; p++) slots[size_t(p)] = table[size_t(p / kBlock)] * int32_t(kBlock) + int32_t(p % kBlock);
  Cache cache{backend.alloc(uint64_t(kHeadDim * kKvHeads * n_slots) * 2, LOOM_BUFFER_USAGE_KV),
              backend.alloc(uint64_t(kHeadDim * kKvHeads * n_slots) * 2, LOOM_BUFFER_USAGE_KV), upload(backend, table)};
  Buffer kb = upload(backend, k), vb = upload(backend, v), sb = upload(backend, slots);
  loom_op store{};
  store.struct_size = sizeof(loom_op);
  store.type = LOOM_OP_STORE_KV;
  store.n_src = 5;
  store.src[0] = tensor(kb, LOOM_DTYPE_F32, kHeadDim, kKvHeads, kContext, 4);
  store.src[1] = tensor(vb, LOOM_DTYPE_F32, kHeadDim, kKvHeads, kContext, 4);
  store.src[2] = tensor(sb, LOOM_DTYPE_I32, kContext, 1, 1, 4);
  store.src[3] = tensor(cache.k, LOOM_DTYPE_F16, kHeadDim, kKvHeads, n_slots, 2);
  store.src[4] = tensor(cache.v, LOOM_DTYPE_F16, kHeadDim, kKvHeads, n_slots, 2);
  backend.run({&store, 1});
  backend.synchronize();
  return cache;
}

// Attention for `n_seqs` copies of the sequence, each with its last n_query positions as query
// rows (q: [kHeadDim, kHeads, n_seqs * n_query]); the output rows in the same order.
std::vector<float> attend(Backend& backend, const Cache& cache, const std::vector<float>& q, int64_t n_seqs, int64_t n_query) {
  const int64_t n_blocks = (kContext + kBlock - 1) / kBlock, n_tok = n_seqs * n_query;
  std::vector<int32_t> tables, seqs;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; b++) table[size_t(b)] = int32_t(n_blocks - 1 - b);
  for (int64_t s = 0; s < n_seqs; s++) {
    tables.insert(tables.end(), table.begin(), table.end());
    seqs.insert(seqs.end(), {int32_t(s * n_query), int32_t(n_query), int32_t(kContext), 0});
  }
  Buffer qb = upload(backend, q), tb = upload(backend, tables), sb = upload(backend, seqs);
  Buffer out = backend.alloc(uint64_t(kHeadDim * kHeads * n_tok) * 4, LOOM_BUFFER_USAGE_COMPUTE);
  const loom_attention_params params{sizeof(loom_attention_params), 0.125f, uint32_t(kBlock), 0, 0.0f, 0};
  loom_op op{};
  op.struct_size = sizeof(loom_op);
  op.type = LOOM_OP_PAGED_ATTENTION;
  op.n_src = 5;
  op.src[0] = tensor(qb, LOOM_DTYPE_F32, kHeadDim, kHeads, n_tok, 4);
  op.src[1] = tensor(cache.k, LOOM_DTYPE_F16, kHeadDim, kKvHeads, n_blocks * kBlock, 2);
  op.src[2] = tensor(cache.v, LOOM_DTYPE_F16, kHeadDim, kKvHeads, n_blocks * kBlock, 2);
  op.src[3] = tensor(tb, LOOM_DTYPE_I32, n_blocks, n_seqs, 1, 4);
  op.src[4] = tensor(sb, LOOM_DTYPE_I32, 4, n_seqs, 1, 4);
  op.dst = tensor(out, LOOM_DTYPE_F32, kHeadDim, kHeads, n_tok, 4);
  op.params = &params;
  backend.run({&op, 1});
  std::vector<float> result(size_t(kHeadDim * kHeads * n_tok));
  backend.download(result.data(), out, 0, result.size() * 4);
  backend.synchronize();
  return result;
}

}  // namespace

TEST_CASE("cpu backend: a query row's attention is the same to the bit decoded alone, in a batch, or in a prefill chunk",
          "[cpu][attention]") {
  // The machine's own table, and the AVX2 one (the tables with matrix-product attention).
  for (const std::string config : {R"({"threads": 2})", R"({"threads": 2, "simd": "avx2"})"}) {
    INFO(config);
    std::unique_ptr<Backend> backend;
    try {
      backend = Backend::create(loom::find_backend_plugin(loom::test::model_test_config(), "cpu"), config);
    } catch (const std::exception& e) {
      WARN("skipped (" << e.what() << ")");
      continue;
    }
    std::mt19937 rng(5);
    const Cache cache = fill_cache(*backend, rng);
    const int64_t row_floats = kHeadDim * kHeads, chunk = 12;
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<float> q(size_t(row_floats * chunk));
    for (auto& x : q) x = dist(rng);
    const std::vector<float> last_row(q.end() - row_floats, q.end());

    // The last 12 positions as a prefill chunk; the last one alone; the last one as 8 sequences'
    // decode rows (every KV head's query heads together).
    const std::vector<float> in_chunk = attend(*backend, cache, q, 1, chunk);
    const std::vector<float> alone = attend(*backend, cache, last_row, 1, 1);
    std::vector<float> batch_q;
    for (int i = 0; i < 8; i++) batch_q.insert(batch_q.end(), last_row.begin(), last_row.end());
    const std::vector<float> in_batch = attend(*backend, cache, batch_q, 8, 1);

    const float* chunk_row = in_chunk.data() + (chunk - 1) * row_floats;
    CHECK(std::memcmp(alone.data(), chunk_row, size_t(row_floats) * 4) == 0);
    for (int i = 0; i < 8; i++) {
      INFO("sequence " << i << " of the batch");
      CHECK(std::memcmp(in_batch.data() + i * row_floats, chunk_row, size_t(row_floats) * 4) == 0);
    }
    // And the values are attention's, not zeros both ways.
    float largest = 0.0f;
    for (int64_t d = 0; d < row_floats; d++) largest = std::max(largest, std::abs(chunk_row[d]));
    CHECK(largest > 0.01f);
  }
}
