#include "sampler_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

namespace loom::conformance::sampler_support {

Harness::Harness(CaseContext& ctx, const std::string& config_json) {
  table_ = ctx.plugin ? ctx.plugin->sampler() : nullptr;
  require(table_ != nullptr, "the plugin has no sampler table");
  require(table_->create && table_->destroy && table_->state_create && table_->state_destroy && table_->sample,
          "a mandatory slot (create, destroy, state_create, state_destroy, sample) is NULL");
  char error[LOOM_ERROR_BUFFER_SIZE] = {0};
  const loom_status status = table_->create(ctx.host, config_json.c_str(), &sampler_, error, sizeof(error));
  require(status == LOOM_STATUS_OK && sampler_ != nullptr,
          "create(" + config_json + ") failed with status " + std::to_string(status) + ": " + error);
}

Harness::~Harness() {
  for (loom_sampler_state_t* state : states_) table_->state_destroy(sampler_, state);
  if (sampler_ != nullptr) table_->destroy(sampler_);
}

std::string Harness::last_error() const {
  if (table_->last_error == nullptr) return "";
  const char* message = table_->last_error(sampler_);
  return message ? message : "";
}

loom_sampling_params Harness::neutral(const std::vector<loom_sampler_stage>& chain) const {
  loom_sampling_params p;
  std::memset(&p, 0, sizeof(p));
  p.struct_size = sizeof(p);
  require(chain.size() <= LOOM_SAMPLER_MAX_STAGES, "case bug: chain too long");
  p.n_stages = static_cast<uint32_t>(chain.size());
  for (size_t i = 0; i < chain.size(); ++i) p.stages[i] = chain[i];
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.typical_p = 1.0f;
  p.repetition_penalty = 1.0f;
  p.penalty_last_n = -1;
  return p;
}

loom_sampler_state_t* Harness::new_state(uint64_t seed) {
  loom_sampler_state_t* state = nullptr;
  const loom_status status = table_->state_create(sampler_, seed, &state);
  require(status == LOOM_STATUS_OK && state != nullptr, "state_create failed: " + last_error());
  states_.push_back(state);
  return state;
}

loom_status Harness::sample_one(const loom_sampling_params& params, loom_sampler_state_t* state,
                                const std::vector<float>& logits, const std::vector<int32_t>& history,
                                int32_t* token, float* logprob, std::vector<float>* out_probs, uint32_t flags) {
  loom_sample_row row;
  std::memset(&row, 0, sizeof(row));
  row.struct_size = sizeof(row);
  row.flags = flags;
  row.params = &params;
  row.state = state;
  row.history = history.empty() ? nullptr : history.data();
  row.n_history = static_cast<uint32_t>(history.size());
  row.logits = logits.data();
  row.token = -1;
  if (out_probs != nullptr) {
    out_probs->assign(logits.size(), -1.0f);
    row.out_probs = out_probs->data();
  }
  const loom_status status = table_->sample(sampler_, &row, 1, static_cast<uint32_t>(logits.size()));
  if (token != nullptr) *token = row.token;
  if (logprob != nullptr) *logprob = row.logprob;
  return status;
}

std::vector<float> Harness::final_distribution(const loom_sampling_params& params, const std::vector<float>& logits,
                                               const std::vector<int32_t>& history) {
  std::vector<float> probs;
  int32_t token = -1;
  const loom_status status = sample_one(params, new_state(1), logits, history, &token, nullptr, &probs);
  require(status == LOOM_STATUS_OK, "sample failed: " + last_error());
  return probs;
}

std::vector<uint64_t> Harness::draw_counts(const loom_sampling_params& params, const std::vector<float>& logits,
                                           const std::vector<int32_t>& history, uint32_t n_draws, uint64_t seed) {
  std::vector<uint64_t> counts(logits.size(), 0);
  loom_sampler_state_t* state = new_state(seed);
  for (uint32_t i = 0; i < n_draws; ++i) {
    int32_t token = -1;
    const loom_status status = sample_one(params, state, logits, history, &token, nullptr, nullptr);
    require(status == LOOM_STATUS_OK, "sample failed: " + last_error());
    require(token >= 0 && static_cast<size_t>(token) < logits.size(),
            "sample returned token " + std::to_string(token) + " outside [0, n_vocab)");
    ++counts[static_cast<size_t>(token)];
  }
  return counts;
}

std::vector<float> make_logits(uint32_t n_vocab, uint64_t seed, float scale) {
  std::vector<float> logits(n_vocab);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  const auto next_unit = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  for (float& x : logits) {
    double sum = 0.0;  // Irwin-Hall(12) - 6: close enough to N(0,1), integer-exact everywhere
    for (int i = 0; i < 12; ++i) sum += next_unit();
    x = static_cast<float>((sum - 6.0) * scale);
  }
  return logits;
}

std::vector<double> softmax(const std::vector<double>& logits) {
  double max = -INFINITY;
  for (double x : logits) max = std::max(max, x);
  std::vector<double> p(logits.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = logits[i] == -INFINITY ? 0.0 : std::exp(logits[i] - max);
  for (double& x : p) x /= total;
  return p;
}

namespace {

// Alive tokens (finite logit) ordered by `before`.
template <class Before>
std::vector<size_t> ordered_alive(const std::vector<double>& l, Before before) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i] != -INFINITY) ids.push_back(i);
  std::sort(ids.begin(), ids.end(), before);
  return ids;
}

void keep_only(std::vector<double>& l, const std::vector<size_t>& ids, size_t n_keep) {
  std::vector<double> out(l.size(), -INFINITY);
  for (size_t i = 0; i < n_keep && i < ids.size(); ++i) out[ids[i]] = l[ids[i]];
  l = out;
}

// Smallest prefix of `ids` whose probability reaches target.
size_t prefix_reaching(const std::vector<size_t>& ids, const std::vector<double>& p, double target) {
  double cumulative = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cumulative += p[ids[i]];
    if (cumulative >= target) return i + 1;
  }
  return ids.size();
}

}  // namespace

std::vector<double> reference_distribution(const loom_sampling_params& params,
                                           const std::vector<loom_sampler_stage>& chain,
                                           const std::vector<float>& logits, const std::vector<int32_t>& history) {
  std::vector<double> l(logits.begin(), logits.end());
  const auto by_logit = [&l](size_t a, size_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  for (loom_sampler_stage stage : chain) {
    switch (stage) {
      case LOOM_SAMPLER_STAGE_PENALTIES: {
        size_t window = params.penalty_last_n < 0 ? history.size()
                                                  : std::min(history.size(), size_t(params.penalty_last_n));
        std::vector<int> counts(l.size(), 0);
        for (size_t i = history.size() - window; i < history.size(); ++i) ++counts[size_t(history[i])];
        for (size_t t = 0; t < l.size(); ++t) {
          if (counts[t] == 0 || l[t] == -INFINITY) continue;
          l[t] = l[t] > 0 ? l[t] / params.repetition_penalty : l[t] * params.repetition_penalty;
          l[t] -= counts[t] * double(params.frequency_penalty) + params.presence_penalty;
        }
        break;
      }
      case LOOM_SAMPLER_STAGE_LOGIT_BIAS:
        for (uint32_t i = 0; i < params.n_logit_bias; ++i) l[size_t(params.logit_bias_tokens[i])] += params.logit_bias_values[i];
        break;
      case LOOM_SAMPLER_STAGE_TOP_K:
        if (params.top_k > 0) keep_only(l, ordered_alive(l, by_logit), size_t(params.top_k));
        break;
      case LOOM_SAMPLER_STAGE_TOP_P:
        if (params.top_p < 1.0f) {
          const std::vector<size_t> ids = ordered_alive(l, by_logit);
          keep_only(l, ids, prefix_reaching(ids, softmax(l), params.top_p));
        }
        break;
      case LOOM_SAMPLER_STAGE_MIN_P:
        if (params.min_p > 0.0f) {
          const std::vector<double> p = softmax(l);
          const double p_max = *std::max_element(p.begin(), p.end());
          for (size_t t = 0; t < l.size(); ++t)
            if (p[t] < params.min_p * p_max) l[t] = -INFINITY;
        }
        break;
      case LOOM_SAMPLER_STAGE_TYPICAL_P:
        if (params.typical_p < 1.0f) {
          const std::vector<double> p = softmax(l);
          double entropy = 0.0;
          for (double x : p)
            if (x > 0) entropy -= x * std::log(x);
          const auto by_typicality = [&](size_t a, size_t b) {
            const double da = std::fabs(-std::log(p[a]) - entropy), db = std::fabs(-std::log(p[b]) - entropy);
            return da < db || (da == db && a < b);
          };
          const std::vector<size_t> ids = ordered_alive(l, by_typicality);
          keep_only(l, ids, prefix_reaching(ids, p, params.typical_p));
        }
        break;
      case LOOM_SAMPLER_STAGE_TEMPERATURE:
        if (params.temperature <= 0.0f) {
          keep_only(l, ordered_alive(l, by_logit), 1);
        } else {
          for (double& x : l) x /= params.temperature;
        }
        break;
      default: require(false, "case bug: unknown stage in reference chain");
    }
  }
  return softmax(l);
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tolerance,
                   const std::string& what) {
  require(got.size() == want.size(), what + ": size mismatch");
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(double(got[i]) - want[i]) <= tolerance)) {
      std::ostringstream out;
      out << what << ": out_probs[" << i << "] = " << got[i] << ", expected " << want[i] << " (tolerance "
          << tolerance << ")";
      require(false, out.str());
    }
  }
}

double chi_square_critical_0001(int df) {
  // Exact table for small df (the approximation is weakest there); Wilson-Hilferty beyond:
  // chi2_q(df) ~= df * (1 - 2/(9 df) + z_q sqrt(2/(9 df)))^3 with z_0.999 = 3.090232, within 0.5% for df > 30.
  static const double table[] = {10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588,
                                 31.264, 32.909, 34.528, 36.123, 37.697, 39.252, 40.790, 42.312, 43.820, 45.315,
                                 46.797, 48.268, 49.728, 51.179, 52.620, 54.052, 55.476, 56.892, 58.301, 59.703};
  if (df >= 1 && df <= 30) return table[df - 1];
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 3.090232 * std::sqrt(a), 3.0);
}

void require_chi_square_fit(const std::vector<uint64_t>& counts, const std::vector<double>& expected_probs,
                            const std::string& what) {
  const uint64_t n = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  struct Bin {
    double expected;
    double observed;
  };
  std::vector<Bin> bins;
  for (size_t t = 0; t < counts.size(); ++t) {
    if (expected_probs[t] <= 0.0) {
      require(counts[t] == 0, what + ": token " + std::to_string(t) + " has probability 0 after the chain but was drawn " +
                                  std::to_string(counts[t]) + " times");
      continue;
    }
    bins.push_back({expected_probs[t] * double(n), double(counts[t])});
  }
  // Pearson's approximation needs expected counts >= 5: merge the smallest bins (ascending) until
  // each merged bin reaches 5; a short remainder joins the last merged bin.
  std::sort(bins.begin(), bins.end(), [](const Bin& a, const Bin& b) { return a.expected < b.expected; });
  std::vector<Bin> merged;
  Bin pending{0.0, 0.0};
  for (const Bin& bin : bins) {
    pending.expected += bin.expected;
    pending.observed += bin.observed;
    if (pending.expected >= 5.0) {
      merged.push_back(pending);
      pending = {0.0, 0.0};
    }
  }
  if (pending.expected > 0.0) {
    if (merged.empty()) {
      merged.push_back(pending);
    } else {
      merged.back().expected += pending.expected;
      merged.back().observed += pending.observed;
    }
  }
  // df = bins - 1: the expected distribution is fully specified (no fitted parameters).
  const int df = static_cast<int>(merged.size()) - 1;
  if (df < 1) return;  // a single outcome: the zero-probability check above is the whole test
  double statistic = 0.0;
  for (const Bin& bin : merged) statistic += (bin.observed - bin.expected) * (bin.observed - bin.expected) / bin.expected;
  const double critical = chi_square_critical_0001(df);
  std::ostringstream out;
  out << what << ": chi-square = " << statistic << " with df = " << df << " exceeds the alpha = 0.001 critical value "
      << critical << " (" << n << " draws)";
  require(statistic <= critical, out.str());
}

}  // namespace loom::conformance::sampler_support
