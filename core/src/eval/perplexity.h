// Perplexity of a model over a token sequence, with one of two windowing schemes.
//
// llama.cpp (stride == 0, the default; what `llama-perplexity` does): the tokens are cut into
// consecutive, non-overlapping windows of n_ctx tokens; each window is evaluated from an empty cache
// with its first token replaced by BOS (when the model has one), and only the second half is scored:
// the predictions of window[j + 1] from the logits at j for j in [n_ctx / 2, n_ctx - 1). Every scored
// token therefore sees at least n_ctx / 2 tokens of context. Tokens after the last full window are
// not used. Numbers are comparable with llama.cpp's for the same tokens and n_ctx.
//
// Hugging Face strided (stride > 0; the "perplexity of fixed-length models" recipe): windows of up to
// n_ctx tokens start every `stride` tokens; each window scores only the tokens no earlier window
// scored (its last n_ctx - stride... tokens), so with stride < n_ctx every token after the first is
// scored exactly once, with between n_ctx - stride and n_ctx - 1 tokens of context. stride == n_ctx
// gives disjoint windows whose first tokens have no context and are not scored (as in HF's recipe,
// where that label is shifted away). The text's own first token (BOS when added) is never scored.
//
// PPL = exp(mean NLL); its standard error is llama.cpp's: the standard error of the mean NLL,
// sqrt(var(NLL) / (N - 1)), times PPL (first-order propagation through exp).
//
// With a base KV type (kld_base), every batch also runs over a second cache of that type, through
// the same weights, and each scored position compares the two distributions: KL(base || tested),
// as llama-perplexity's --kl-divergence does against saved base logits, and whether the top token
// agrees. That isolates what the KV type costs from what the weights' quantization costs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "loom/dtype.h"

namespace loom {

class Model;

struct PerplexityOptions {
  int64_t n_ctx = 512;    // window length in tokens
  int64_t stride = 0;     // 0: llama.cpp windows; > 0: HF strided windows
  int64_t max_batch = 128;  // tokens per forward; bounds the logits buffer to max_batch * n_vocab floats
  int32_t bos_id = -1;    // llama.cpp mode: the token that replaces each window's first (< 0: none)
  loom_dtype kv_dtype = LOOM_DTYPE_F16;
  std::optional<loom_dtype> kld_base;  // also run this KV type and compare (see above)
};

struct NllSummary {
  int64_t n = 0;
  double mean_nll = 0.0;
  double nll_stderr = 0.0;  // standard error of the mean NLL (0 when n < 2)
  double ppl = 0.0;         // exp(mean_nll)
  double ppl_stderr = 0.0;  // ppl * nll_stderr
};

struct PerplexityWindowReport {
  int64_t index = 0;      // 0-based
  int64_t n_windows = 0;
  int64_t n_scored = 0;   // tokens scored in this window
  NllSummary running;     // over every token scored so far
};

// The tested cache against the base cache, over every scored position.
struct KldSummary {
  int64_t n = 0;
  double mean_kld = 0.0, kld_stderr = 0.0;
  double max_kld = 0.0;
  double top1_agreement = 0.0;  // fraction of positions whose most likely token is the same
  NllSummary base;              // the base cache's own perplexity
};

struct PerplexityResult {
  int64_t n_tokens = 0;   // tokens of the input
  int64_t n_windows = 0;
  NllSummary summary;
  std::vector<double> nll;  // per scored token, in order
  std::optional<KldSummary> kld;  // with options.kld_base
};

using PerplexityCallback = std::function<void(const PerplexityWindowReport&)>;

// -log softmax(logits)[target], computed in double with the max subtracted.
double token_nll(std::span<const float> logits, int32_t target);
// KL(P || Q) of the softmax distributions of two logit rows, in nats (double precision).
double logits_kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);
NllSummary summarize_nll(std::span<const double> nll);

// The windows as [begin, end) token ranges and the first row scored in each (see above), without a
// model: for tests and for `loom perplexity` to say how much it will score before it starts.
struct PerplexityWindow {
  int64_t begin = 0, end = 0;
  int64_t first_scored = 0;  // row j of the window whose logits predict window[j + 1] is scored for j >= this
};
std::vector<PerplexityWindow> plan_perplexity_windows(int64_t n_tokens, const PerplexityOptions& options);

// loom::Error when the options are out of range or the text is too short for one window.
PerplexityResult compute_perplexity(Model& model, std::span<const int32_t> tokens, const PerplexityOptions& options,
                                    const PerplexityCallback& on_window = {});

}  // namespace loom
