// Paged attention against a naive dense attention written here, over a randomly permuted block
// layout: several sequences of different lengths, prefill chunks mixed with decode rows, GQA,
// sliding window, softcap, and F32 / F16 / INT8 / Q8_0 / Q4_0 / FP8 E4M3 KV caches written by the backend's own
// STORE_KV.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend_support.h"

namespace loom::conformance {
namespace {

using namespace backend;

struct Seq {
  int32_t ctx_len;  // keys after this batch
  int32_t n_query;  // rows of this sequence in the batch (the last n_query positions)
  // (ABI 1.9) Rows see the whole context (LOOM_SEQ_NON_CAUSAL), and a later part of an earlier entry's
  // sequence (same block table and K/V; -1: a sequence of its own, holding `stored` keys, 0: ctx_len).
  bool non_causal = false;
  int32_t part_of = -1;
  int32_t stored = 0;
  int32_t keys_stored() const { return stored > 0 ? stored : ctx_len; }
};

struct AttentionSetup {
  int64_t head_dim = 64, n_heads = 8, n_kv_heads = 2;  // GQA: 4 query heads per KV head
  uint32_t block_size = 16, sliding_window = 0;
  float softcap = 0.0f, scale = 0.125f;
  loom_dtype kv_dtype = LOOM_DTYPE_F32;
  bool sinks = false;  // gpt-oss: one extra softmax score per head with no value (src5, ABI 1.5)
  std::vector<Seq> seqs = {{37, 37}, {50, 13}, {70, 1}, {1, 1}, {33, 5}};
  // A backend may refuse the op (a device limit), with an error; it may never answer wrongly.
  bool may_refuse = false;
};

// out[head_dim, n_heads, n_tok] by the definition: dense softmax over the visible keys.
std::vector<float> naive_attention(const AttentionSetup& s, const std::vector<Seq>& seqs, const std::vector<float>& q,
                                   const std::vector<std::vector<float>>& k, const std::vector<std::vector<float>>& v,
                                   int64_t n_tok, const std::vector<float>& sinks) {
  std::vector<float> out(size_t(s.head_dim * s.n_heads * n_tok), 0.0f);
  int64_t row = 0;
  for (size_t si = 0; si < seqs.size(); si++) {
    for (int32_t i = 0; i < seqs[si].n_query; i++, row++) {
      const int64_t pos = seqs[si].ctx_len - seqs[si].n_query + i;
      const int64_t first = s.sliding_window ? std::max<int64_t>(0, pos - s.sliding_window + 1) : 0;
      const int64_t last = seqs[si].non_causal ? seqs[si].ctx_len - 1 : pos;
      const size_t owner = seqs[si].part_of >= 0 ? size_t(seqs[si].part_of) : si;
      for (int64_t h = 0; h < s.n_heads; h++) {
        const int64_t kvh = h / (s.n_heads / s.n_kv_heads);
        const float* qv = &q[size_t((row * s.n_heads + h) * s.head_dim)];
        std::vector<double> w;
        for (int64_t j = first; j <= last; j++) {
          const float* kv = &k[owner][size_t((j * s.n_kv_heads + kvh) * s.head_dim)];
          double dot = 0.0;
          for (int64_t d = 0; d < s.head_dim; d++) dot += double(qv[d]) * kv[d];
          dot *= s.scale;
          if (s.softcap > 0.0f) dot = s.softcap * std::tanh(dot / s.softcap);
          w.push_back(dot);
        }
        double mx = *std::max_element(w.begin(), w.end());
        if (!sinks.empty()) mx = std::max(mx, double(sinks[size_t(h)]));
        double sum = sinks.empty() ? 0.0 : std::exp(sinks[size_t(h)] - mx);
        for (double& x : w) sum += x = std::exp(x - mx);
        float* o = &out[size_t((row * s.n_heads + h) * s.head_dim)];
        for (int64_t j = first; j <= last; j++) {
          const float* vv = &v[owner][size_t((j * s.n_kv_heads + kvh) * s.head_dim)];
          for (int64_t d = 0; d < s.head_dim; d++) o[d] += float(w[size_t(j - first)] / sum * vv[d]);
        }
      }
    }
  }
  return out;
}

float round_to_half(float x) {
  if (x == 0.0f) return 0.0f;
  int e = 0;
  std::frexp(x, &e);
  const float step = std::ldexp(1.0f, e - 11);  // 11 significant bits, ties to even
  return std::nearbyint(x / step) * step;
}

// OCP FP8 E4M3: 4 significant bits (steps of 2^-9 below 2^-6), ties to even, saturating at 448.
float round_to_e4m3(float x) {
  const float a = std::fabs(x);
  if (a >= 448.0f) return std::copysign(448.0f, x);
  const float step = a < 0.015625f ? 1.0f / 512.0f : std::ldexp(1.0f, std::ilogb(a) - 3);
  return std::copysign(std::nearbyint(a / step) * step, x);
}

// K/V as a block-quantized cache holds them: ggml's Q8_0 and Q4_0 definitions (one f16 scale per
// 32 values of a row), so the naive attention sees the same values the backend stored and the
// comparison stays tight. Other dtypes pass through; their rounding is in the case's tolerance.
std::vector<float> as_stored(loom_dtype dtype, std::vector<float> values) {
  if (dtype == LOOM_DTYPE_F8_E4M3) {
    for (float& x : values) x = round_to_e4m3(x);
    return values;
  }
  if (dtype != LOOM_DTYPE_Q8_0 && dtype != LOOM_DTYPE_Q4_0) return values;
  for (size_t b = 0; b + 32 <= values.size(); b += 32) {
    float* x = &values[b];
    float amax = 0.0f, signed_max = 0.0f;
    for (int i = 0; i < 32; i++)
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), signed_max = x[i];
    if (dtype == LOOM_DTYPE_Q8_0) {
      const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f, stored_d = round_to_half(d);
      for (int i = 0; i < 32; i++) x[i] = std::round(x[i] * id) * stored_d;
    } else {
      const float d = signed_max / -8.0f, id = d ? 1.0f / d : 0.0f, stored_d = round_to_half(d);
      for (int i = 0; i < 32; i++) x[i] = float(std::min(15, int(x[i] * id + 8.5f)) - 8) * stored_d;
    }
  }
  return values;
}

void run_attention_case(CaseContext& ctx, const AttentionSetup& s, double tolerance, uint32_t seed) {
  auto dev = device_under_test(ctx);
  if (!dev->declares_kv(s.kv_dtype)) not_supported("caps do not declare " + dtype_label(s.kv_dtype) + " KV caches");
  if (dev->caps().max_block_size && s.block_size > dev->caps().max_block_size) not_supported("block size above caps.max_block_size");
  std::mt19937 rng(seed);
  // A full prefill, a chunked-prefill continuation, two decodes (one with a 1-token context).
  const std::vector<Seq>& seqs = s.seqs;
  int32_t longest = 0;
  bool seq_flags = false;
  for (const Seq& q : seqs) longest = std::max(longest, q.keys_stored()), seq_flags |= q.non_causal;
  const int64_t max_blocks = (longest + s.block_size - 1) / s.block_size;
  const int64_t n_blocks = max_blocks * int64_t(seqs.size()) + 3;      // a few blocks stay unused
  std::vector<int32_t> perm(n_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);  // blocks of a sequence are scattered over the pool
  std::vector<int32_t> tables(size_t(max_blocks * int64_t(seqs.size())), -1), seq_info;
  size_t next_block = 0;
  int64_t n_tok = 0;
  for (size_t si = 0; si < seqs.size(); si++) {
    if (seqs[si].part_of >= 0) {
      std::copy_n(&tables[size_t(seqs[si].part_of) * size_t(max_blocks)], max_blocks, &tables[si * size_t(max_blocks)]);
    } else {
      for (int64_t b = 0; b * s.block_size < uint32_t(seqs[si].keys_stored()); b++) tables[si * max_blocks + size_t(b)] = perm[next_block++];
    }
    seq_info.insert(seq_info.end(), {int32_t(n_tok), seqs[si].n_query, seqs[si].ctx_len, seqs[si].non_causal ? LOOM_SEQ_NON_CAUSAL : 0});
    n_tok += seqs[si].n_query;
  }
  // K/V of every position of every sequence, written with one STORE_KV through the slot mapping.
  std::vector<std::vector<float>> k(seqs.size()), v(seqs.size());
  std::vector<float> k_all, v_all;
  std::vector<int32_t> slots;
  for (size_t si = 0; si < seqs.size(); si++) {
    if (seqs[si].part_of >= 0) continue;  // its keys are its owner's
    k[si] = random_floats(rng, size_t(seqs[si].keys_stored() * s.n_kv_heads * s.head_dim), -2.0f, 2.0f);
    v[si] = random_floats(rng, k[si].size());
    k_all.insert(k_all.end(), k[si].begin(), k[si].end());
    v_all.insert(v_all.end(), v[si].begin(), v[si].end());
    for (int32_t p = 0; p < seqs[si].keys_stored(); p++)
      slots.push_back(tables[si * max_blocks + size_t(p / int32_t(s.block_size))] * int32_t(s.block_size) + p % int32_t(s.block_size));
  }
  slots.push_back(-1);  // a padding row: must be skipped
  k_all.resize(k_all.size() + size_t(s.n_kv_heads * s.head_dim), 99.0f);
  v_all.resize(v_all.size() + size_t(s.n_kv_heads * s.head_dim), 99.0f);
  const int64_t n_store = int64_t(slots.size()), n_slots = n_blocks * s.block_size;
  HostTensor kt = f32_tensor(k_all, s.head_dim, s.n_kv_heads, n_store), vt = f32_tensor(v_all, s.head_dim, s.n_kv_heads, n_store);
  HostTensor slot_t = i32_tensor(slots, n_store);
  HostTensor k_cache = zero_tensor(s.kv_dtype, s.head_dim, s.n_kv_heads, n_slots), v_cache = k_cache;
  loom_status st = dev->run(LOOM_OP_STORE_KV, {&kt, &vt, &slot_t, &k_cache, &v_cache}, nullptr, nullptr);
  require(st == LOOM_STATUS_OK, "STORE_KV failed: " + dev->last_error());

  const std::vector<float> q = random_floats(rng, size_t(s.head_dim * s.n_heads * n_tok), -2.0f, 2.0f);
  HostTensor qt = f32_tensor(q, s.head_dim, s.n_heads, n_tok);
  HostTensor table_t = i32_tensor(tables, max_blocks, int64_t(seqs.size()));
  HostTensor seq_t = i32_tensor(seq_info, 4, int64_t(seqs.size()));
  HostTensor out = zero_tensor(LOOM_DTYPE_F32, s.head_dim, s.n_heads, n_tok);
  const loom_attention_params p{sizeof(loom_attention_params), s.scale, s.block_size, s.sliding_window, s.softcap,
                                seq_flags ? LOOM_ATTENTION_SEQ_FLAGS : 0u};
  // Sinks around the scores' own range, so some heads give the sink most of the weight.
  const std::vector<float> sinks = s.sinks ? random_floats(rng, size_t(s.n_heads), -3.0f, 6.0f) : std::vector<float>{};
  HostTensor sink_t = s.sinks ? f32_tensor(sinks, s.n_heads) : HostTensor{};
  std::vector<HostTensor*> srcs = {&qt, &k_cache, &v_cache, &table_t, &seq_t};
  if (s.sinks) srcs.push_back(&sink_t);
  st = dev->run(LOOM_OP_PAGED_ATTENTION, srcs, &out, &p);
  if (s.may_refuse && st != LOOM_STATUS_OK) {
    require(!dev->last_error().empty(), "PAGED_ATTENTION refused without a message");
    not_supported("refused: " + dev->last_error());
  }
  require(st == LOOM_STATUS_OK, "PAGED_ATTENTION failed: " + dev->last_error());
  for (size_t si = 0; si < seqs.size(); si++) k[si] = as_stored(s.kv_dtype, k[si]), v[si] = as_stored(s.kv_dtype, v[si]);
  require_close(out.floats(), naive_attention(s, seqs, q, k, v, n_tok, sinks), tolerance, "PAGED_ATTENTION vs naive attention");
}

}  // namespace

std::vector<Case> backend_attention_cases() {
  std::vector<Case> out;
  auto add = [&](const std::string& name, AttentionSetup s, double tolerance, uint32_t seed) {
    out.push_back({"backend.paged_attention." + name, LOOM_PLUGIN_KIND_BACKEND,
                   [=](CaseContext& ctx) { run_attention_case(ctx, s, tolerance, seed); }});
  };
  // F32 cache: only summation order and exp/tanh rounding differ from the naive double loop.
  add("f32", AttentionSetup{}, 1e-4, 1);
  AttentionSetup window;
  window.sliding_window = 20;
  add("f32.sliding_window", window, 1e-4, 2);
  AttentionSetup capped;
  capped.softcap = 5.0f;
  capped.scale = 0.5f;  // logits large enough for the softcap to bend them
  add("f32.softcap", capped, 1e-4, 3);
  AttentionSetup odd;
  odd.head_dim = 40, odd.n_heads = 6, odd.n_kv_heads = 6, odd.block_size = 8;  // no GQA, odd sizes
  add("f32.odd_head_dim", odd, 1e-4, 4);
  // Gemma 3's shape in the model tests: small blocks, a window the prefill rows cross, F16 cache.
  AttentionSetup small;
  small.head_dim = 32, small.n_heads = 4, small.n_kv_heads = 2, small.block_size = 4, small.sliding_window = 8;
  small.kv_dtype = LOOM_DTYPE_F16;
  add("f16_cache.small_blocks.sliding_window", small, 3e-3, 10);
  AttentionSetup sinks;
  sinks.sinks = true;
  add("f32.sinks", sinks, 1e-4, 8);
  sinks.sliding_window = 20;
  add("f32.sinks.sliding_window", sinks, 1e-4, 9);
  // F16 cache: K/V rounded to 11-bit mantissas (relative error ≤ 2^-11 ≈ 4.9e-4 per element).
  AttentionSetup f16;
  f16.kv_dtype = LOOM_DTYPE_F16;
  add("f16_cache", f16, 3e-3, 5);
  // INT8 cache: per-row absmax/127 steps (≤ 0.4% of the row max per element); outputs are convex
  // combinations of V rows, so a few percent of max|out| bounds the error of a correct backend.
  AttentionSetup int8;
  int8.kv_dtype = LOOM_DTYPE_INT8_KV;
  add("int8_cache", int8, 4e-2, 6);
  int8.sliding_window = 9;
  add("int8_cache.sliding_window", int8, 4e-2, 7);
  // Block-quantized caches (ggml's Q8_0 and Q4_0, one f16 scale per 32 values): the naive side
  // rounds K/V through the same format (the CPU backend then agrees within 1e-6); the margin is for
  // a backend whose rounding of a tie lands one step away.
  // (Against the unrounded K/V the CPU backend's error is 0.008 for Q8_0 and 0.13 for Q4_0.)
  AttentionSetup q8;
  q8.kv_dtype = LOOM_DTYPE_Q8_0;
  add("q8_0_cache", q8, 1e-3, 12);
  AttentionSetup q4;
  q4.kv_dtype = LOOM_DTYPE_Q4_0;
  add("q4_0_cache", q4, 1e-3, 13);
  q4.sliding_window = 9;
  add("q4_0_cache.sliding_window", q4, 1e-3, 14);
  // FP8 E4M3 cache (one byte per value, no scale; the GPU backends' format): the naive side rounds
  // K/V to E4M3 too, so a backend that stores them correctly agrees to float noise.
  AttentionSetup fp8;
  fp8.kv_dtype = LOOM_DTYPE_F8_E4M3;
  add("f8_e4m3_cache", fp8, 1e-3, 15);
  fp8.sliding_window = 9;
  add("f8_e4m3_cache.sliding_window", fp8, 1e-3, 16);
  // One long context (20,000 keys, heads of 128): lavapipe's shader loops stop after 65535
  // iterations, which cut its attention off silently here until it refused such rows.
  AttentionSetup long_ctx;
  long_ctx.head_dim = 128, long_ctx.n_heads = 2, long_ctx.n_kv_heads = 1;
  long_ctx.seqs = {{20000, 2}, {9000, 1}};
  long_ctx.may_refuse = true;
  add("long_context", long_ctx, 1e-4, 11);
  // (ABI 1.9) A prompt with an image in the middle, as Gemma 3 decodes it: one sequence as three
  // entries over one block table, text rows causal, the image's 16 rows seeing the whole image (and
  // the text before it), then text again; beside it an ordinary prefill and a decode row.
  AttentionSetup image;
  image.seqs = {{20, 8, false, -1, 44}, {36, 16, true, 0}, {44, 8, false, 0}, {33, 5}, {70, 1}};
  add("f32.non_causal_parts", image, 1e-4, 17);
  image.sliding_window = 12;  // the window still bounds the keys before each row
  image.kv_dtype = LOOM_DTYPE_F16;
  add("f16_cache.non_causal_parts.sliding_window", image, 3e-3, 18);
  return out;
}

}  // namespace loom::conformance
