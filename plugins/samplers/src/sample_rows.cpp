// One row through the chain: scan the logits, run the stages, pick, report.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "sampler_instance.h"
#include "stages.h"

namespace loom::samplers {

namespace {

class ScratchLease {
 public:
  explicit ScratchLease(loom_sampler& sampler) : sampler_(sampler) {
    std::lock_guard<std::mutex> lock(sampler_.pool_mutex);
    if (sampler_.pool.empty()) {
      scratch_ = std::make_unique<Scratch>();
    } else {
      scratch_ = std::move(sampler_.pool.back());
      sampler_.pool.pop_back();
    }
  }
  ~ScratchLease() {
    std::lock_guard<std::mutex> lock(sampler_.pool_mutex);
    sampler_.pool.push_back(std::move(scratch_));
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& get() { return *scratch_; }

 private:
  loom_sampler& sampler_;
  std::unique_ptr<Scratch> scratch_;
};

// Copies the finite logits into the candidate buffer; NaN and +inf are errors, -inf is a mask.
CandidateSet scan_logits(const float* logits, uint32_t n_vocab, Scratch& scratch) {
  CandidateSet set;
  set.data = scratch.candidates.data();
  uint32_t n = 0;
  for (uint32_t i = 0; i < n_vocab; ++i) {
    const float x = logits[i];
    if (x == -INFINITY) continue;
    if (!std::isfinite(x))
      fail_invalid("logits[" + std::to_string(i) + "] (token " + std::to_string(i) + ") is " +
                   (std::isnan(x) ? "NaN" : "+inf") + "; only finite values and -inf (masked) are allowed");
    set.data[n++] = Candidate{x, static_cast<int32_t>(i)};
  }
  if (n == 0) fail_invalid("every logit is -inf: no token can be sampled");
  set.n = n;
  set.is_identity = n == n_vocab;
  set.is_sorted = false;
  return set;
}

// Top alternatives from log-softmax of the raw logits, best first; slots beyond the finite tokens
// get token -1 and -inf.
void report_top_logprobs(const float* logits, uint32_t n_vocab, uint32_t n_top, int32_t* top_tokens,
                         float* top_logprobs, Scratch& scratch) {
  float max = -INFINITY;
  for (uint32_t i = 0; i < n_vocab; ++i) max = std::max(max, logits[i]);
  double total = 0.0;
  for (uint32_t i = 0; i < n_vocab; ++i) total += std::exp(static_cast<double>(logits[i] - max));
  const double log_total = std::log(total);

  // Min-heap of the best n_top seen so far (the heap's front is the worst kept).
  std::vector<Candidate>& heap = scratch.top;
  heap.clear();
  const auto worse_on_top = [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); };
  for (uint32_t i = 0; i < n_vocab; ++i) {
    if (logits[i] == -INFINITY) continue;
    const Candidate c{logits[i], static_cast<int32_t>(i)};
    if (heap.size() < n_top) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), worse_on_top);
    } else if (ranks_before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), worse_on_top);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), worse_on_top);
    }
  }
  std::sort(heap.begin(), heap.end(), ranks_before);
  for (uint32_t i = 0; i < n_top; ++i) {
    const bool has = i < heap.size();
    if (top_tokens != nullptr) top_tokens[i] = has ? heap[i].id : -1;
    if (top_logprobs != nullptr)
      top_logprobs[i] = has ? static_cast<float>(static_cast<double>(heap[i].logit - max) - log_total) : -INFINITY;
  }
}

// The greedy pick as pick_token would make it on a set reduced to the argmax: probability 1, log-
// probability 0, one uniform drawn so the sequence's random stream advances as on the full path.
// False (nothing written) when the logits hold a NaN or +inf or are all masked.
bool pick_greedy_from_logits(loom_sample_row& row, uint32_t n_vocab, bool is_draw, const loom_sampling_params& params,
                             Scratch& scratch) {
  const int32_t token = argmax_logits(row.logits, n_vocab);
  if (token < 0) return false;
  if (row.out_probs != nullptr) {
    std::memset(row.out_probs, 0, sizeof(float) * n_vocab);
    row.out_probs[token] = 1.0f;
  }
  if (is_draw) {
    (void)row.state->rng.uniform();
    row.token = token;
  } else {
    row.token = -1;
  }
  row.logprob = 0.0f;
  if (params.n_top_logprobs > 0 && (row.top_tokens != nullptr || row.top_logprobs != nullptr))
    report_top_logprobs(row.logits, n_vocab, params.n_top_logprobs, row.top_tokens, row.top_logprobs, scratch);
  return true;
}

// Mirostat replaces the chain: the bias and the temperature of the chain apply, in its order, then
// Mirostat's truncation for the sequence's running target, the draw, and the target's update.
void sample_mirostat(loom_sample_row& row, uint32_t n_vocab, bool is_draw, const loom_sampling_params& params,
                     const SamplerExtras& extras, const loom_sampling_params& chain_owner, Scratch& scratch) {
  CandidateSet set = scan_logits(row.logits, n_vocab, scratch);
  for (uint32_t s = 0; s < chain_owner.n_stages; ++s) {
    const loom_sampler_stage stage = chain_owner.stages[s];
    if (stage == LOOM_SAMPLER_STAGE_LOGIT_BIAS) apply_logit_bias(set, params, n_vocab, scratch);
    // Temperature 0 is greedy as everywhere; Mirostat then has one token left to keep.
    if (stage == LOOM_SAMPLER_STAGE_TEMPERATURE) apply_temperature(set, params.temperature);
    if (set.n == 0) fail_invalid(std::string("every token was masked after stage ") + stage_name(stage));
  }
  float mu = 2.0f * extras.mirostat_tau;
  if (row.state != nullptr && row.state->mirostat_started) mu = row.state->mirostat_mu;
  mirostat_truncate(set, extras, mu, n_vocab, scratch);
  const Pick pick = pick_token(set, is_draw ? &row.state->rng : nullptr, row.out_probs, n_vocab);
  row.token = pick.token;
  row.logprob = is_draw ? pick.logprob : 0.0f;
  if (is_draw) {
    row.state->mirostat_mu = mirostat_update(mu, extras, pick.logprob);
    row.state->mirostat_started = true;
  }
  if (params.n_top_logprobs > 0 && (row.top_tokens != nullptr || row.top_logprobs != nullptr))
    report_top_logprobs(row.logits, n_vocab, params.n_top_logprobs, row.top_tokens, row.top_logprobs, scratch);
}

void sample_row(loom_sampler& sampler, loom_sample_row& row, uint32_t n_vocab, Scratch& scratch) {
  if (row.struct_size < sizeof(loom_sample_row))
    fail_invalid("struct_size = " + std::to_string(row.struct_size) + " is smaller than ABI 1.0's " +
                 std::to_string(sizeof(loom_sample_row)));
  if (row.params == nullptr) fail_invalid("params is NULL");
  if (row.logits == nullptr) fail_invalid("logits is NULL");
  const bool is_draw = (row.flags & LOOM_SAMPLE_DISTRIBUTION_ONLY) == 0;
  if (is_draw && row.state == nullptr) fail_invalid("state is NULL (needed to draw a token)");
  const loom_sampling_params& params = *row.params;
  validate_params(params, "params");
  // Structured output (ABI 1.3): disallowed tokens become -inf logits for everything below.
  if (const uint32_t* allowed = allowed_tokens(params)) {
    scratch.masked_logits.assign(row.logits, row.logits + n_vocab);
    bool any = false;
    for (uint32_t t = 0; t < n_vocab; ++t) {
      if ((allowed[t / 32] >> (t % 32)) & 1u) {
        any = true;
      } else {
        scratch.masked_logits[t] = -std::numeric_limits<float>::infinity();
      }
    }
    if (!any) fail_invalid("allowed_tokens allows no token");
    loom_sample_row masked = row;
    masked.logits = scratch.masked_logits.data();
    loom_sampling_params unmasked = params;
    unmasked.allowed_tokens = nullptr;
    masked.params = &unmasked;
    sample_row(sampler, masked, n_vocab, scratch);
    row.token = masked.token;
    row.logprob = masked.logprob;
    return;
  }

  const loom_sampling_params& chain_owner = params.n_stages > 0 ? params : sampler.config.defaults;
  // Greedy (temperature 0) picks the best-ranked token. Top-k, top-p and min-p always keep that
  // token, so when nothing but such cuts and the temperature stage follow them they cannot change
  // the pick, and they are skipped: each costs a pass or a partial sort over the whole vocabulary
  // (262k tokens for Gemma 3). Earlier stages (penalties, bias, typical-p) and any cut that one of
  // them follows still run, since a cut there decides what the later stage sees.
  const auto is_cut = [](loom_sampler_stage st) {
    return st == LOOM_SAMPLER_STAGE_TOP_K || st == LOOM_SAMPLER_STAGE_TOP_P || st == LOOM_SAMPLER_STAGE_MIN_P ||
           st == LOOM_SAMPLER_STAGE_TOP_N_SIGMA;
  };
  const SamplerExtras extras = extras_of(params);
  if (extras.mirostat != 0) return sample_mirostat(row, n_vocab, is_draw, params, extras, chain_owner, scratch);
  // Stages whose parameters make them no-ops (the defaults: penalties 1/0/0, no bias, typical-p 1)
  // return before touching the set, so they may sit in that trailing run too.
  const auto is_no_op = [&](loom_sampler_stage st) {
    switch (st) {
      case LOOM_SAMPLER_STAGE_PENALTIES:
        return (params.repetition_penalty == 1.0f && params.frequency_penalty == 0.0f &&
                params.presence_penalty == 0.0f) ||
               params.penalty_last_n == 0 || row.n_history == 0;
      case LOOM_SAMPLER_STAGE_LOGIT_BIAS: return params.n_logit_bias == 0;
      case LOOM_SAMPLER_STAGE_TYPICAL_P: return params.typical_p >= 1.0f;
      case LOOM_SAMPLER_STAGE_TOP_N_SIGMA: return extras.top_n_sigma <= 0.0f;
      case LOOM_SAMPLER_STAGE_XTC: return extras.xtc_probability <= 0.0f || extras.xtc_threshold > 0.5f;
      case LOOM_SAMPLER_STAGE_DRY: return extras.dry_multiplier <= 0.0f || extras.dry_penalty_last_n == 0 || row.n_history < 2;
      default: return false;
    }
  };
  uint32_t tail_start = chain_owner.n_stages;  // first stage of the trailing run of cuts, no-ops, temperature
  bool tail_has_temperature = false;
  while (tail_start > 0 && (is_cut(chain_owner.stages[tail_start - 1]) || is_no_op(chain_owner.stages[tail_start - 1]) ||
                            chain_owner.stages[tail_start - 1] == LOOM_SAMPLER_STAGE_TEMPERATURE)) {
    tail_has_temperature |= chain_owner.stages[--tail_start] == LOOM_SAMPLER_STAGE_TEMPERATURE;
  }
  const bool greedy = params.temperature <= 0.0f && tail_has_temperature;
  // With nothing before that tail, greedy is the argmax of the raw logits: no candidate set at all.
  if (greedy && tail_start == 0 && pick_greedy_from_logits(row, n_vocab, is_draw, params, scratch)) return;

  CandidateSet set = scan_logits(row.logits, n_vocab, scratch);
  for (uint32_t s = 0; s < chain_owner.n_stages; ++s) {
    const loom_sampler_stage stage = chain_owner.stages[s];
    if (greedy && s >= tail_start && is_cut(stage)) continue;
    switch (stage) {
      case LOOM_SAMPLER_STAGE_PENALTIES:
        apply_penalties(set, params, row.history, row.n_history, n_vocab, scratch);
        break;
      case LOOM_SAMPLER_STAGE_LOGIT_BIAS: apply_logit_bias(set, params, n_vocab, scratch); break;
      case LOOM_SAMPLER_STAGE_TOP_K: apply_top_k(set, params.top_k, scratch); break;
      case LOOM_SAMPLER_STAGE_TOP_P: apply_top_p(set, params.top_p, scratch); break;
      case LOOM_SAMPLER_STAGE_MIN_P: apply_min_p(set, params.min_p); break;
      case LOOM_SAMPLER_STAGE_TYPICAL_P: apply_typical_p(set, params.typical_p, scratch); break;
      case LOOM_SAMPLER_STAGE_TEMPERATURE: apply_temperature(set, params.temperature); break;
      case LOOM_SAMPLER_STAGE_TOP_N_SIGMA: apply_top_n_sigma(set, extras.top_n_sigma); break;
      case LOOM_SAMPLER_STAGE_XTC:
        apply_xtc(set, extras.xtc_probability, extras.xtc_threshold, is_draw ? &row.state->rng : nullptr);
        break;
      case LOOM_SAMPLER_STAGE_DRY: apply_dry(set, extras, row.history, row.n_history, n_vocab, scratch); break;
      default: fail_invalid("unknown stage id " + std::to_string(chain_owner.stages[s]));
    }
    if (set.n == 0)
      fail_invalid(std::string("every token was masked after stage ") + stage_name(chain_owner.stages[s]));
  }

  const Pick pick = pick_token(set, is_draw ? &row.state->rng : nullptr, row.out_probs, n_vocab);
  row.token = pick.token;
  row.logprob = is_draw ? pick.logprob : 0.0f;
  if (params.n_top_logprobs > 0 && (row.top_tokens != nullptr || row.top_logprobs != nullptr))
    report_top_logprobs(row.logits, n_vocab, params.n_top_logprobs, row.top_tokens, row.top_logprobs, scratch);
}

}  // namespace

void sample_rows(loom_sampler& sampler, loom_sample_row* rows, uint32_t n_rows, uint32_t n_vocab) {
  if (n_rows == 0) return;
  if (rows == nullptr) fail_invalid("rows is NULL but n_rows = " + std::to_string(n_rows));
  if (n_vocab == 0) fail_invalid("n_vocab = 0: there is nothing to sample from");
  ScratchLease lease(sampler);
  Scratch& scratch = lease.get();
  scratch.reserve_vocab(n_vocab);
  for (uint32_t r = 0; r < n_rows; ++r) {
    try {
      sample_row(sampler, rows[r], n_vocab, scratch);
    } catch (const SamplerError& e) {
      throw SamplerError(e.status, "row " + std::to_string(r) + ": " + e.what());
    }
  }
}

}  // namespace loom::samplers
