#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "common/error.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace loom {

namespace {

constexpr uint32_t kBlockSize = 16;

// Per scored position of the base cache's run (with options.kld_base).
struct BaseComparison {
  KvCache* kv = nullptr;
  std::vector<double> nll, kld;
  int64_t top1_same = 0;
};

int64_t argmax(std::span<const float> row) { return std::max_element(row.begin(), row.end()) - row.begin(); }

// NLL of every scored prediction of one window, evaluated from an empty cache (and, with `base`,
// the same batches over the base cache, compared row by row).
void eval_window(Model& model, KvCache& kv, std::span<const int32_t> window, int64_t first_scored,
                 int64_t max_batch, std::vector<double>& nll_out, BaseComparison* base) {
  const int64_t n = static_cast<int64_t>(window.size());
  ForwardBatch batch;
  batch.seqs.resize(1);
  auto& seq = batch.seqs[0];
  seq.block_table.resize(kv.n_blocks());
  std::iota(seq.block_table.begin(), seq.block_table.end(), 0);
  std::vector<float> logits, base_logits;
  const int64_t n_vocab = model.info().n_vocab;
  for (int64_t start = 0; start < n; start += max_batch) {
    const int64_t count = std::min(max_batch, n - start);
    batch.tokens.assign(window.begin() + start, window.begin() + start + count);
    batch.positions.resize(static_cast<size_t>(count));
    batch.slot_mapping.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      batch.positions[size_t(i)] = static_cast<int32_t>(start + i);
      batch.slot_mapping[size_t(i)] = static_cast<int32_t>(start + i);  // contiguous blocks 0..
    }
    seq.first_row = 0;
    seq.n_query = static_cast<int32_t>(count);
    seq.context_len = static_cast<int32_t>(start + count);
    // Rows j with first_scored <= j < n - 1: their logits predict window[j + 1].
    batch.logit_rows.clear();
    for (int64_t j = std::max(start, first_scored); j < std::min(start + count, n - 1); ++j) {
      batch.logit_rows.push_back(static_cast<int32_t>(j - start));
    }
    const bool any = !batch.logit_rows.empty();
    if (!any) batch.logit_rows.push_back(static_cast<int32_t>(count - 1));  // the model wants >= 1 row
    model.forward(batch, kv, logits);
    if (base) model.forward(batch, *base->kv, base_logits);
    if (!any) continue;
    for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
      const int64_t j = start + batch.logit_rows[r];
      const std::span<const float> row(logits.data() + r * static_cast<size_t>(n_vocab), static_cast<size_t>(n_vocab));
      nll_out.push_back(token_nll(row, window[size_t(j + 1)]));
      if (!base) continue;
      const std::span<const float> base_row(base_logits.data() + r * static_cast<size_t>(n_vocab),
                                            static_cast<size_t>(n_vocab));
      base->nll.push_back(token_nll(base_row, window[size_t(j + 1)]));
      base->kld.push_back(logits_kl_divergence(base_row, row));
      base->top1_same += argmax(base_row) == argmax(row);
    }
  }
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t target) {
  if (target < 0 || static_cast<size_t>(target) >= logits.size()) {
    throw Error("perplexity: token id " + std::to_string(target) + " is outside the vocabulary of " +
                std::to_string(logits.size()));
  }
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, double(v));
  double sum = 0.0;
  for (float v : logits) sum += std::exp(double(v) - max);
  return std::log(sum) + max - double(logits[size_t(target)]);
}

double logits_kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  if (p_logits.size() != q_logits.size() || p_logits.empty()) throw Error("kl divergence: logit rows differ in size");
  auto log_sum_exp = [](std::span<const float> row) {
    double max = -INFINITY;
    for (float v : row) max = std::max(max, double(v));
    double sum = 0.0;
    for (float v : row) sum += std::exp(double(v) - max);
    return max + std::log(sum);
  };
  const double p_norm = log_sum_exp(p_logits), q_norm = log_sum_exp(q_logits);
  double kld = 0.0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double log_p = double(p_logits[i]) - p_norm, log_q = double(q_logits[i]) - q_norm;
    kld += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(0.0, kld);  // rounding can leave a tiny negative for equal rows
}

NllSummary summarize_nll(std::span<const double> nll) {
  NllSummary s;
  s.n = static_cast<int64_t>(nll.size());
  if (nll.empty()) return s;
  double sum = 0.0, sum_sq = 0.0;
  for (double v : nll) {
    sum += v;
    sum_sq += v * v;
  }
  const double n = static_cast<double>(nll.size());
  s.mean_nll = sum / n;
  if (nll.size() > 1) {
    const double variance = std::max(0.0, sum_sq / n - s.mean_nll * s.mean_nll);
    s.nll_stderr = std::sqrt(variance / (n - 1.0));
  }
  s.ppl = std::exp(s.mean_nll);
  s.ppl_stderr = s.ppl * s.nll_stderr;
  return s;
}

std::vector<PerplexityWindow> plan_perplexity_windows(int64_t n_tokens, const PerplexityOptions& o) {
  if (o.n_ctx < 4) throw Error("perplexity: --ctx must be >= 4, got " + std::to_string(o.n_ctx));
  if (o.stride < 0 || o.stride > o.n_ctx) {
    throw Error("perplexity: --stride must be in [1, ctx = " + std::to_string(o.n_ctx) + "], got " +
                std::to_string(o.stride));
  }
  std::vector<PerplexityWindow> windows;
  if (o.stride == 0) {
    if (n_tokens < o.n_ctx) {
      throw Error("perplexity: the text has " + std::to_string(n_tokens) + " tokens, fewer than one window of " +
                  std::to_string(o.n_ctx) + " (use a smaller --ctx or a longer text)");
    }
    for (int64_t k = 0; (k + 1) * o.n_ctx <= n_tokens; ++k) {
      windows.push_back({k * o.n_ctx, (k + 1) * o.n_ctx, o.n_ctx / 2});
    }
    return windows;
  }
  if (n_tokens < 2) throw Error("perplexity: the text has fewer than 2 tokens");
  int64_t prev_end = 0;
  for (int64_t begin = 0; begin < n_tokens; begin += o.stride) {
    const int64_t end = std::min(begin + o.n_ctx, n_tokens);
    const int64_t first_target = std::max(prev_end, begin + 1);  // targets [first_target, end)
    windows.push_back({begin, end, first_target - begin - 1});
    prev_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

PerplexityResult compute_perplexity(Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options,
                                    const PerplexityCallback& on_window) {
  if (options.n_ctx > model.n_ctx()) {
    throw Error("perplexity: --ctx " + std::to_string(options.n_ctx) + " exceeds the model's context size " +
                std::to_string(model.n_ctx()));
  }
  if (options.max_batch < 1) throw Error("perplexity: max_batch must be >= 1");
  const auto windows = plan_perplexity_windows(static_cast<int64_t>(tokens.size()), options);
  const auto n_blocks = static_cast<uint32_t>((options.n_ctx + kBlockSize - 1) / kBlockSize);
  KvCache kv = model.create_kv_cache(n_blocks, kBlockSize, options.kv_dtype);
  std::optional<KvCache> base_kv;
  BaseComparison base;
  if (options.kld_base) {
    base_kv.emplace(model.create_kv_cache(n_blocks, kBlockSize, *options.kld_base));
    base.kv = &*base_kv;
  }

  PerplexityResult result;
  result.n_tokens = static_cast<int64_t>(tokens.size());
  result.n_windows = static_cast<int64_t>(windows.size());
  std::vector<int32_t> window;
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto& win = windows[w];
    window.assign(tokens.begin() + win.begin, tokens.begin() + win.end);
    if (options.stride == 0 && options.bos_id >= 0) window[0] = options.bos_id;
    const size_t before = result.nll.size();
    eval_window(model, kv, window, win.first_scored, options.max_batch, result.nll, base.kv ? &base : nullptr);
    if (on_window) {
      PerplexityWindowReport report;
      report.index = static_cast<int64_t>(w);
      report.n_windows = result.n_windows;
      report.n_scored = static_cast<int64_t>(result.nll.size() - before);
      report.running = summarize_nll(result.nll);
      on_window(report);
    }
  }
  result.summary = summarize_nll(result.nll);
  if (base.kv) {
    KldSummary k;
    const NllSummary kld = summarize_nll(base.kld);  // the same mean and standard error
    k.n = kld.n;
    k.mean_kld = kld.mean_nll;
    k.kld_stderr = kld.nll_stderr;
    for (double v : base.kld) k.max_kld = std::max(k.max_kld, v);
    k.top1_agreement = k.n ? double(base.top1_same) / double(k.n) : 0.0;
    k.base = summarize_nll(base.nll);
    result.kld = k;
  }
  return result;
}

}  // namespace loom
