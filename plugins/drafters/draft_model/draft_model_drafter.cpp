#include "draft_model_drafter.h"

#include <algorithm>
#include <cmath>

#include "drafter_support.h"

namespace loom::drafters {

namespace {

bool has_model_services(const loom_host_services* host) {
  return host != nullptr && LOOM_HAS_MEMBER(host, loom_host_services, last_error) && host->model_open != nullptr &&
         host->model_close != nullptr && host->model_get_info != nullptr && host->model_append != nullptr &&
         host->model_truncate != nullptr && host->model_release != nullptr;
}

// Uniform in [0, 1) from the top 53 bits: the same on every platform, unlike std::*_distribution.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

DraftModelDrafter::DraftModelDrafter(const loom_host_services* host, DraftModelOptions options)
    : host_(host), options_(std::move(options)) {
  if (!has_model_services(host_)) {
    fail(LOOM_STATUS_UNSUPPORTED,
         "draft_model: the host offers no model services (model_open ... model_release are absent or NULL), so "
         "there is no way to run the draft model; use a host that runs models for drafters, or drafter kind ngram");
  }
  if (options_.model_path.empty()) {
    fail(LOOM_STATUS_INVALID_ARGUMENT,
         "draft_model config: \"model\" is required (path to a GGUF that shares the target's vocabulary)");
  }
  if (loom_status s = host_->model_open(host_->context, options_.model_path.c_str(), &model_); s != LOOM_STATUS_OK) {
    model_ = nullptr;
    host_failed(s, "opening draft model '" + options_.model_path + "'");
  }
  info_.struct_size = sizeof(info_);
  if (loom_status s = host_->model_get_info(host_->context, model_, &info_); s != LOOM_STATUS_OK) {
    host_->model_close(host_->context, model_);
    model_ = nullptr;
    host_failed(s, "reading the draft model's info");
  }
  if (info_.n_vocab == 0) {
    host_->model_close(host_->context, model_);
    model_ = nullptr;
    fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model: '" + options_.model_path + "' reports an empty vocabulary");
  }
  logits_.resize(info_.n_vocab);
}

DraftModelDrafter::~DraftModelDrafter() {
  if (model_ == nullptr) return;
  for (const auto& [seq_id, state] : seqs_) host_->model_release(host_->context, model_, seq_id);
  host_->model_close(host_->context, model_);
}

void DraftModelDrafter::host_failed(loom_status status, const std::string& what) const {
  const char* message = host_->last_error != nullptr ? host_->last_error(host_->context) : nullptr;
  fail(status, "draft_model: " + what + " failed: " + (message != nullptr && message[0] ? message : "no message"));
}

DraftModelDrafter::SeqState& DraftModelDrafter::state_of(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end()) return it->second;
  SeqState& state = seqs_[seq_id];
  // Distinct, reproducible streams per sequence.
  state.rng.seed(options_.seed ^ (seq_id * 0x9E3779B97F4A7C15ull));
  return state;
}

bool DraftModelDrafter::sync(uint64_t seq_id, SeqState& state, const int32_t* tokens, uint32_t n_tokens) {
  size_t keep = 0;
  while (keep < state.held.size() && keep < n_tokens && state.held[keep] == tokens[keep]) ++keep;
  keep = std::min<size_t>(keep, n_tokens - 1);  // re-append at least one token to get fresh logits
  if (keep < state.held.size()) {
    loom_status s = host_->model_truncate(host_->context, model_, seq_id, static_cast<uint32_t>(keep));
    if (s != LOOM_STATUS_OK) host_failed(s, "rolling back the draft model's KV");
    state.held.resize(keep);
  }
  const auto n_new = static_cast<uint32_t>(n_tokens - keep);
  loom_status s = host_->model_append(host_->context, model_, seq_id, tokens + keep, n_new, nullptr, logits_.data());
  if (s == LOOM_STATUS_OUT_OF_MEMORY) {
    // No room for this sequence's draft KV now: propose nothing and give its memory back.
    host_->model_release(host_->context, model_, seq_id);
    state.held.clear();
    return false;
  }
  if (s != LOOM_STATUS_OK) host_failed(s, "running the draft model");
  state.held.insert(state.held.end(), tokens + keep, tokens + n_tokens);
  return true;
}

int32_t DraftModelDrafter::choose(SeqState& state, float* out_probs) {
  const uint32_t n_vocab = info_.n_vocab;
  if (out_probs == nullptr) {
    int32_t best = 0;
    for (uint32_t i = 1; i < n_vocab; ++i) {
      if (logits_[i] > logits_[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    }
    return best;
  }
  float max = -INFINITY;
  for (float x : logits_) max = std::max(max, x);
  const double inverse = 1.0 / static_cast<double>(options_.temperature);
  double total = 0.0;
  for (uint32_t i = 0; i < n_vocab; ++i) {
    const double w = std::isfinite(logits_[i]) ? std::exp((static_cast<double>(logits_[i]) - max) * inverse) : 0.0;
    out_probs[i] = static_cast<float>(w);
    total += w;
  }
  if (!(total > 0.0) || !std::isfinite(total)) fail(LOOM_STATUS_INTERNAL, "draft_model: the draft logits are not finite");
  // Draw from the float probabilities actually reported, so q(x) is exactly what the host sees.
  double reported = 0.0;
  for (uint32_t i = 0; i < n_vocab; ++i) {
    out_probs[i] = static_cast<float>(out_probs[i] / total);
    reported += out_probs[i];
  }
  const double target = uniform(state.rng) * reported;
  double cumulative = 0.0;
  int32_t last_positive = 0;
  for (uint32_t i = 0; i < n_vocab; ++i) {
    if (out_probs[i] <= 0.0f) continue;
    last_positive = static_cast<int32_t>(i);
    cumulative += out_probs[i];
    if (target < cumulative) return static_cast<int32_t>(i);
  }
  return last_positive;
}

void DraftModelDrafter::propose(loom_draft_request& r) {
  r.n_drafted = 0;
  r.has_probs = 0;
  if (r.n_vocab != info_.n_vocab) {
    fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model: the draft model has " + std::to_string(info_.n_vocab) +
                                           " vocabulary entries but the target has " + std::to_string(r.n_vocab) +
                                           "; they must share one vocabulary");
  }
  for (uint32_t i = 0; i < r.n_tokens; ++i) {
    if (r.tokens[i] < 0 || static_cast<uint32_t>(r.tokens[i]) >= info_.n_vocab) {
      fail(LOOM_STATUS_INVALID_ARGUMENT, "draft_model: tokens[" + std::to_string(i) + "] = " +
                                             std::to_string(r.tokens[i]) + " is outside the vocabulary");
    }
  }
  uint32_t max_draft = std::min(r.max_draft, options_.k);
  // The draft model holds n_tokens + max_draft - 1 tokens at the end.
  max_draft = r.n_tokens >= info_.n_ctx ? 0 : std::min(max_draft, info_.n_ctx - r.n_tokens);
  if (max_draft == 0) return;

  SeqState& state = state_of(r.seq_id);
  if (!sync(r.seq_id, state, r.tokens, r.n_tokens)) return;
  const bool is_sampled = options_.temperature > 0.0f && r.out_probs != nullptr;
  for (uint32_t j = 0; j < max_draft; ++j) {
    float* probs = is_sampled ? r.out_probs + static_cast<size_t>(j) * info_.n_vocab : nullptr;
    const int32_t token = choose(state, probs);
    r.out_tokens[j] = token;
    r.n_drafted = j + 1;
    if (j + 1 == max_draft) break;  // the last proposal's logits are never needed
    loom_status s = host_->model_append(host_->context, model_, r.seq_id, &token, 1, nullptr, logits_.data());
    if (s == LOOM_STATUS_OUT_OF_MEMORY) break;
    if (s != LOOM_STATUS_OK) host_failed(s, "running the draft model");
    state.held.push_back(token);
  }
  r.has_probs = is_sampled ? 1 : 0;
}

void DraftModelDrafter::accepted(uint64_t seq_id, uint32_t n_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || n_tokens >= it->second.held.size()) return;  // nothing held past that point
  // Whatever of the drafts survived is re-checked against the real tokens at the next proposal;
  // rolling back here frees the rejected drafts' KV right away.
  loom_status s = host_->model_truncate(host_->context, model_, seq_id, n_tokens);
  if (s != LOOM_STATUS_OK) host_failed(s, "rolling back the draft model's KV");
  it->second.held.resize(n_tokens);
}

void DraftModelDrafter::release(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  host_->model_release(host_->context, model_, seq_id);
  seqs_.erase(it);
}

}  // namespace loom::drafters
