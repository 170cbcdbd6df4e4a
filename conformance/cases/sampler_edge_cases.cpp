// Conformance cases for the sampler kind: greedy, seeds, DISTRIBUTION_ONLY, masks, top logprobs,
// batches with mixed params, invalid input (which must be an error status, never a crash), config.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "conformance_case.h"
#include "sampler_support.h"

namespace loom::conformance::sampler_support {

namespace {

constexpr uint32_t k_vocab = 64;

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<int32_t> draw_sequence(Harness& h, const loom_sampling_params& params, const std::vector<float>& logits,
                                   uint64_t seed, int n) {
  loom_sampler_state_t* state = h.new_state(seed);
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) {
    int32_t token = -1;
    require(h.sample_one(params, state, logits, {}, &token, nullptr, nullptr) == LOOM_STATUS_OK,
            "sample failed: " + h.last_error());
    tokens.push_back(token);
  }
  return tokens;
}

void greedy_is_argmax(CaseContext& ctx) {
  Harness h(ctx);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = make_logits(k_vocab, 100 + seed);
    // Greedy through the default chain (temperature 0 overrides whatever the cuts keep).
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TOP_P,
                                             LOOM_SAMPLER_STAGE_MIN_P, LOOM_SAMPLER_STAGE_TEMPERATURE});
    params.temperature = 0.0f;
    params.top_k = 10;
    params.top_p = 0.8f;
    params.min_p = 0.05f;
    int32_t token = -1;
    float logprob = -1.0f;
    std::vector<float> probs;
    require(h.sample_one(params, h.new_state(seed), logits, {}, &token, &logprob, &probs) == LOOM_STATUS_OK,
            "sample failed: " + h.last_error());
    require(token == argmax(logits), "temperature 0 drew token " + std::to_string(token) + ", argmax is " +
                                         std::to_string(argmax(logits)));
    require(std::fabs(logprob) < 1e-6, "greedy logprob should be log(1) = 0, got " + std::to_string(logprob));
    for (size_t i = 0; i < probs.size(); ++i)
      require(probs[i] == (int32_t(i) == token ? 1.0f : 0.0f), "greedy out_probs is not one-hot at the argmax");
  }
  // Ties go to the lowest token id and masked (-inf) tokens never win. The vocabulary sizes straddle
  // the widths a vectorised argmax would step in, and the ties sit next to each other in the last,
  // partial step, or far apart (the second token and one near the end).
  for (const uint32_t n_vocab : {1u, 7u, 9u, 67u, 2053u}) {
    for (const bool far_apart : {false, true}) {
      std::vector<float> logits = make_logits(n_vocab, 200 + n_vocab);
      const float top = *std::max_element(logits.begin(), logits.end()) + 1.0f;
      const uint32_t first = n_vocab > 2 ? (far_apart ? 1 : n_vocab - 2) : n_vocab - 1;
      const uint32_t second = far_apart && n_vocab > 20 ? n_vocab - 10 : n_vocab - 1;
      logits[first] = top;
      logits[second] = top;
      if (n_vocab > 2) logits[0] = -INFINITY;
      loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE});
      params.temperature = 0.0f;
      params.top_k = 3;
      int32_t token = -1;
      require(h.sample_one(params, h.new_state(1), logits, {}, &token, nullptr, nullptr) == LOOM_STATUS_OK,
              "sample failed: " + h.last_error());
      require(token == static_cast<int32_t>(first), "greedy over " + std::to_string(n_vocab) + " tokens tied at " +
                                                        std::to_string(first) + " and " + std::to_string(second) +
                                                        " drew " + std::to_string(token));
    }
  }
}

// Greedy through chains where a cut comes before a stage that can change the ranking (typical-p,
// penalties, logit bias): the cut decides what that stage sees, so a sampler that skips cuts for
// greedy requests must only skip the trailing ones. The pick must be the reference chain's.
void greedy_follows_the_chain(CaseContext& ctx) {
  using S = loom_sampler_stage;
  const S pen = LOOM_SAMPLER_STAGE_PENALTIES, bias = LOOM_SAMPLER_STAGE_LOGIT_BIAS, k = LOOM_SAMPLER_STAGE_TOP_K,
          p = LOOM_SAMPLER_STAGE_TOP_P, m = LOOM_SAMPLER_STAGE_MIN_P, typ = LOOM_SAMPLER_STAGE_TYPICAL_P,
          t = LOOM_SAMPLER_STAGE_TEMPERATURE;
  const std::vector<std::vector<S>> chains = {{k, typ, t}, {p, typ, t}, {k, pen, t}, {m, bias, t}, {pen, k, p, m, t}};
  const std::vector<int32_t> history = {0, 1, 1, 2, 2, 2, 3, 5, 8};
  const int32_t bias_tokens[] = {0, 4, 9};
  const float bias_values[] = {-4.0f, 3.0f, 6.0f};
  Harness h(ctx);
  int n_differs_from_argmax = 0;
  for (size_t c = 0; c < chains.size(); ++c) {
    for (uint64_t seed = 0; seed < 10; ++seed) {
      const std::vector<float> logits = make_logits(k_vocab, 300 + seed);
      loom_sampling_params params = h.neutral(chains[c]);
      params.temperature = 0.0f;
      params.top_k = 6;
      params.top_p = 0.7f;
      params.min_p = 0.2f;
      params.typical_p = 0.3f;
      params.repetition_penalty = 3.0f;
      params.penalty_last_n = 9;
      params.n_logit_bias = 3;
      params.logit_bias_tokens = bias_tokens;
      params.logit_bias_values = bias_values;
      const std::vector<double> expected = reference_distribution(params, chains[c], logits, history);
      const int32_t want = int32_t(std::max_element(expected.begin(), expected.end()) - expected.begin());
      int32_t token = -1;
      float logprob = 0.0f;
      require(h.sample_one(params, h.new_state(seed), logits, history, &token, &logprob, nullptr) == LOOM_STATUS_OK,
              "sample failed: " + h.last_error());
      require(token == want, "chain " + std::to_string(c) + ", seed " + std::to_string(seed) + ": greedy picked " +
                                 std::to_string(token) + ", the reference chain keeps " + std::to_string(want));
      n_differs_from_argmax += want != argmax(logits);
    }
  }
  // The chains are chosen so that the plain argmax is often wrong; otherwise this case proves little.
  require(n_differs_from_argmax >= 10, "only " + std::to_string(n_differs_from_argmax) +
                                           " of 50 picks differ from the plain argmax: the case lost its teeth");
}

void seeds_reproduce(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 7, 0.5f);  // flat: sequences differ quickly
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
  const std::vector<int32_t> a = draw_sequence(h, params, logits, 1234, 200);
  const std::vector<int32_t> b = draw_sequence(h, params, logits, 1234, 200);
  const std::vector<int32_t> c = draw_sequence(h, params, logits, 1235, 200);
  require(a == b, "the same seed gave two different token sequences");
  require(a != c, "seeds 1234 and 1235 gave the same 200-token sequence");
  // A second instance must reproduce the first: the stream belongs to the seed, not the instance.
  Harness h2(ctx);
  require(draw_sequence(h2, params, logits, 1234, 200) == a, "a second instance gave another sequence for seed 1234");
}

// Contract (docs/samplers.md): DISTRIBUTION_ONLY fills out_probs and does not touch the RNG.
void distribution_only(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 8);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE});
  params.top_k = 20;
  params.temperature = 0.9f;
  loom_sampler_state_t* state = h.new_state(77);
  std::vector<float> probs;
  for (int i = 0; i < 5; ++i)
    require(h.sample_one(params, state, logits, {}, nullptr, nullptr, &probs, LOOM_SAMPLE_DISTRIBUTION_ONLY) ==
                LOOM_STATUS_OK,
            "DISTRIBUTION_ONLY failed: " + h.last_error());
  double total = 0.0;
  for (float x : probs) {
    require(x >= 0.0f && x <= 1.0f, "out_probs entry outside [0, 1]");
    total += x;
  }
  require(std::fabs(total - 1.0) < 1e-5, "out_probs sums to " + std::to_string(total));
  require_close(probs, reference_distribution(params, {LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE}, logits, {}),
                2e-5, "DISTRIBUTION_ONLY");
  std::vector<int32_t> after;
  for (int i = 0; i < 50; ++i) {
    int32_t token = -1;
    require(h.sample_one(params, state, logits, {}, &token, nullptr, nullptr) == LOOM_STATUS_OK, h.last_error());
    after.push_back(token);
  }
  require(after == draw_sequence(h, params, logits, 77, 50), "DISTRIBUTION_ONLY advanced the random stream");
}

void masked_tokens(CaseContext& ctx) {
  Harness h(ctx);
  std::vector<float> logits = make_logits(k_vocab, 9, 0.3f);
  for (size_t i = 0; i < logits.size(); i += 2) logits[i] = -INFINITY;
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
  const std::vector<double> expected = reference_distribution(params, {LOOM_SAMPLER_STAGE_TEMPERATURE}, logits, {});
  require_close(h.final_distribution(params, logits), expected, 2e-5, "-inf masked tokens");
  require_chi_square_fit(h.draw_counts(params, logits, {}, 4000, 5), expected, "-inf masked tokens");
}

void top_logprobs(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 10);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE});
  params.top_k = 3;
  params.temperature = 0.5f;  // top logprobs ignore the chain: they come from the raw logits
  params.n_top_logprobs = 5;
  std::vector<int32_t> tokens(5, -7);
  std::vector<float> logprobs(5, 1.0f);
  loom_sample_row row;
  std::memset(&row, 0, sizeof(row));
  row.struct_size = sizeof(row);
  row.params = &params;
  row.state = h.new_state(3);
  row.logits = logits.data();
  row.top_tokens = tokens.data();
  row.top_logprobs = logprobs.data();
  require(h.table().sample(h.sampler(), &row, 1, k_vocab) == LOOM_STATUS_OK, "sample failed: " + h.last_error());
  const std::vector<double> p = softmax(std::vector<double>(logits.begin(), logits.end()));
  std::vector<size_t> order(k_vocab);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  for (int i = 0; i < 5; ++i) {
    require(tokens[i] == int32_t(order[i]), "top_tokens[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) +
                                                ", expected " + std::to_string(order[i]));
    require(std::fabs(logprobs[i] - std::log(p[order[i]])) < 1e-4,
            "top_logprobs[" + std::to_string(i) + "] is not the log-softmax of the raw logits");
  }
  require(std::fabs(row.logprob - std::log(reference_distribution(params, {LOOM_SAMPLER_STAGE_TOP_K,
                                                                            LOOM_SAMPLER_STAGE_TEMPERATURE},
                                                                   logits, {})[size_t(row.token)])) < 1e-4,
          "logprob is not the log of the chosen token's final probability");
}

void batch_mixed_params(CaseContext& ctx) {
  Harness h(ctx);
  constexpr int n_rows = 4;
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<float>> probs(n_rows, std::vector<float>(k_vocab, -1.0f));
  std::vector<loom_sampling_params> params(n_rows);
  std::vector<std::vector<loom_sampler_stage>> chains = {
      {LOOM_SAMPLER_STAGE_TEMPERATURE},
      {LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE},
      {LOOM_SAMPLER_STAGE_MIN_P, LOOM_SAMPLER_STAGE_TEMPERATURE},
      {LOOM_SAMPLER_STAGE_PENALTIES, LOOM_SAMPLER_STAGE_TOP_P}};
  for (int r = 0; r < n_rows; ++r) {
    logits.push_back(make_logits(k_vocab, 200 + r));
    params[r] = h.neutral(chains[r]);
  }
  params[0].temperature = 0.0f;
  params[1].top_k = 4;
  params[1].temperature = 1.3f;
  params[2].min_p = 0.2f;
  params[2].temperature = 0.6f;
  params[3].repetition_penalty = 2.0f;
  params[3].top_p = 0.5f;
  const std::vector<int32_t> history = {int32_t(argmax(logits[3])), 1, 2};
  std::vector<loom_sample_row> rows(n_rows);
  for (int r = 0; r < n_rows; ++r) {
    std::memset(&rows[r], 0, sizeof(loom_sample_row));
    rows[r].struct_size = sizeof(loom_sample_row);
    rows[r].params = &params[r];
    rows[r].state = h.new_state(900 + r);
    rows[r].logits = logits[r].data();
    rows[r].out_probs = probs[r].data();
    if (r == 3) {
      rows[r].history = history.data();
      rows[r].n_history = 3;
    }
  }
  require(h.table().sample(h.sampler(), rows.data(), n_rows, k_vocab) == LOOM_STATUS_OK,
          "batched sample failed: " + h.last_error());
  require(rows[0].token == argmax(logits[0]), "row 0 (greedy) did not pick the argmax");
  for (int r = 0; r < n_rows; ++r) {
    const std::vector<double> expected =
        reference_distribution(params[r], chains[r], logits[r], r == 3 ? history : std::vector<int32_t>{});
    require_close(probs[r], expected, 2e-5, "batch row " + std::to_string(r));
    require(expected[size_t(rows[r].token)] > 0.0, "batch row " + std::to_string(r) + " drew a removed token");
  }
}

// Status of sampling `logits` with `params`; must not crash.
loom_status try_sample(Harness& h, const loom_sampling_params& params, const std::vector<float>& logits) {
  int32_t token = -1;
  std::vector<float> probs;
  return h.sample_one(params, h.new_state(1), logits, {}, &token, nullptr, logits.empty() ? nullptr : &probs);
}

void rejects_bad_logits(CaseContext& ctx) {
  Harness h(ctx);
  // Sampled and greedy: a sampler may take a shortcut for greedy, but not past the checks.
  for (const float temperature : {1.0f, 0.0f}) {
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TEMPERATURE});
    params.temperature = temperature;
    const std::string at = " (temperature " + std::to_string(temperature) + ")";
    std::vector<float> logits = make_logits(k_vocab, 11);
    logits[13] = std::numeric_limits<float>::quiet_NaN();
    require(try_sample(h, params, logits) != LOOM_STATUS_OK, "a NaN logit was accepted" + at);
    require(!h.last_error().empty(), "no message for a NaN logit" + at);
    logits[13] = INFINITY;
    require(try_sample(h, params, logits) != LOOM_STATUS_OK, "a +inf logit was accepted" + at);
    logits[13] = 0.0f;
    logits[k_vocab - 1] = std::numeric_limits<float>::quiet_NaN();  // after the argmax, in the last lane
    require(try_sample(h, params, logits) != LOOM_STATUS_OK, "a NaN in the last logit was accepted" + at);
    std::fill(logits.begin(), logits.end(), -INFINITY);
    require(try_sample(h, params, logits) != LOOM_STATUS_OK, "an all -inf row was accepted" + at);
    require(try_sample(h, params, {}) != LOOM_STATUS_OK, "n_vocab = 0 was accepted" + at);
  }
}

void top_k_beyond_vocab(CaseContext& ctx) {
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 12);
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K});
  params.top_k = 1000;
  std::vector<float> probs;
  const loom_status status = h.sample_one(params, h.new_state(1), logits, {}, nullptr, nullptr, &probs);
  if (status != LOOM_STATUS_OK) return;  // rejecting is allowed; clamping must keep every token
  require_close(probs, softmax(std::vector<double>(logits.begin(), logits.end())), 2e-5, "top_k > n_vocab");
}

struct BadParam {
  const char* field;
  void (*spoil)(loom_sampling_params&);
  bool may_clamp;  // loom/sampler.h calls top_k <= 0 and top_p >= 1 neutral: refusing or clamping both pass
};

void rejects_bad_params(CaseContext& ctx) {
  Harness h(ctx);
  const BadParam bad[] = {
      {"temperature", [](loom_sampling_params& p) { p.temperature = -0.5f; }, false},
      {"temperature", [](loom_sampling_params& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }, false},
      {"top_k", [](loom_sampling_params& p) { p.top_k = -3; }, true},
      {"top_p", [](loom_sampling_params& p) { p.top_p = 0.0f; }, false},
      {"top_p", [](loom_sampling_params& p) { p.top_p = 1.5f; }, true},
      {"min_p", [](loom_sampling_params& p) { p.min_p = -0.1f; }, false},
      {"min_p", [](loom_sampling_params& p) { p.min_p = 1.5f; }, false},
      {"typical_p", [](loom_sampling_params& p) { p.typical_p = 0.0f; }, false},
      {"repetition_penalty", [](loom_sampling_params& p) { p.repetition_penalty = 0.0f; }, false},
      {"stages", [](loom_sampling_params& p) { p.stages[0] = 99; }, false},
      {"n_stages", [](loom_sampling_params& p) { p.n_stages = LOOM_SAMPLER_MAX_STAGES + 1; }, false},
  };
  const std::vector<float> logits = make_logits(k_vocab, 13);
  for (const BadParam& b : bad) {
    loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE});
    b.spoil(params);
    // Whatever validate_params says, sample() must refuse too (a host may skip validation).
    const bool sample_refused = try_sample(h, params, logits) != LOOM_STATUS_OK;
    require(sample_refused || b.may_clamp, std::string("sample accepted a bad ") + b.field);
    if (h.table().validate_params == nullptr) continue;
    const bool validate_refused = h.table().validate_params(h.sampler(), &params) != LOOM_STATUS_OK;
    require(validate_refused == sample_refused,
            std::string("validate_params and sample disagree about a bad ") + b.field);
    if (!validate_refused) continue;
    require(h.last_error().find(b.field) != std::string::npos,
            std::string("the message for a bad ") + b.field + " does not name it: " + h.last_error());
  }
  if (h.table().validate_params == nullptr) not_supported("validate_params slot is NULL (sample() refusals checked)");
  loom_sampling_params good = h.neutral({LOOM_SAMPLER_STAGE_TOP_P});
  good.top_p = 1.0f;
  require(h.table().validate_params(h.sampler(), &good) == LOOM_STATUS_OK, "validate_params refused top_p = 1");
}

void default_params_are_valid(CaseContext& ctx) {
  Harness h(ctx);
  if (h.table().default_params == nullptr) not_supported("default_params slot is NULL");
  loom_sampling_params params;
  std::memset(&params, 0, sizeof(params));
  params.struct_size = sizeof(params);
  require(h.table().default_params(h.sampler(), &params) == LOOM_STATUS_OK, "default_params failed");
  require(params.struct_size == sizeof(params), "default_params overwrote struct_size");
  const std::vector<float> logits = make_logits(k_vocab, 14);
  int32_t token = -1;
  require(h.sample_one(params, h.new_state(5), logits, {}, &token, nullptr, nullptr) == LOOM_STATUS_OK,
          "sampling with the default params failed: " + h.last_error());
  if (h.table().validate_params != nullptr)
    require(h.table().validate_params(h.sampler(), &params) == LOOM_STATUS_OK, "default params do not validate");
}

void config_validation(CaseContext& ctx) {
  const loom_sampler_i* table = ctx.plugin->sampler();
  require(table != nullptr && table->create != nullptr, "no create slot");
  const char* bad[] = {"{\"top_p\": 1.5}", "{\"temperature\": -1}", "{\"no_such_key\": 1}",
                       "{\"chain\": [\"top_k\", \"no_such_stage\"]}", "not json"};
  for (const char* config : bad) {
    char error[LOOM_ERROR_BUFFER_SIZE] = {0};
    loom_sampler_t* sampler = nullptr;
    const loom_status status = table->create(ctx.host, config, &sampler, error, sizeof(error));
    if (status == LOOM_STATUS_OK) table->destroy(sampler);
    require(status != LOOM_STATUS_OK, std::string("create accepted config ") + config);
    require(error[0] != '\0', std::string("create gave no message for config ") + config);
  }
}

}  // namespace

// ABI 1.3: allowed_tokens. Greedy picks the best allowed token, draws follow the allowed tokens'
// renormalised distribution (chi-square), out_probs and top logprobs leave the others out, and a
// mask that allows nothing is an error, not a crash.
void allowed_tokens(CaseContext& ctx) {
  if (ctx.plugin->desc().abi_minor < 3) not_supported("allowed_tokens is ABI 1.3; the plugin speaks 1." + std::to_string(ctx.plugin->desc().abi_minor));
  Harness h(ctx);
  const std::vector<float> logits = make_logits(k_vocab, 4242);
  std::vector<uint32_t> mask((k_vocab + 31) / 32, 0);
  std::vector<bool> allowed(k_vocab, false);
  for (uint32_t t = 0; t < k_vocab; t += 3) {  // every third token, the argmax's neighbours decide
    mask[t / 32] |= 1u << (t % 32);
    allowed[t] = true;
  }
  loom_sampling_params params = h.neutral({LOOM_SAMPLER_STAGE_TOP_K, LOOM_SAMPLER_STAGE_TEMPERATURE});
  params.allowed_tokens = mask.data();
  // Greedy: the best allowed token.
  params.temperature = 0.0f;
  int32_t best = -1;
  for (uint32_t t = 0; t < k_vocab; ++t) {
    if (allowed[t] && (best < 0 || logits[t] > logits[size_t(best)])) best = int32_t(t);
  }
  int32_t token = -1;
  require(h.sample_one(params, h.new_state(1), logits, {}, &token, nullptr, nullptr) == LOOM_STATUS_OK, "sample failed: " + h.last_error());
  require(token == best, "greedy with a mask drew " + std::to_string(token) + ", the best allowed token is " + std::to_string(best));
  // Temperature 1: the allowed tokens' softmax, nothing else.
  params.temperature = 1.0f;
  std::vector<double> masked(k_vocab);
  for (uint32_t t = 0; t < k_vocab; ++t) masked[t] = allowed[t] ? logits[t] : -std::numeric_limits<double>::infinity();
  const std::vector<double> expected = softmax(masked);
  require_close(h.final_distribution(params, logits), expected, 1e-5, "masked out_probs");
  require_chi_square_fit(h.draw_counts(params, logits, {}, 20000, 7), expected, "masked draws");
  // Nothing allowed: an error status with a message.
  std::vector<uint32_t> none(mask.size(), 0);
  params.allowed_tokens = none.data();
  require(h.sample_one(params, h.new_state(2), logits, {}, &token, nullptr, nullptr) != LOOM_STATUS_OK,
          "a mask that allows no token must be refused");
}

std::vector<Case> sampler_edge_cases() {
  const loom_plugin_kind kind = LOOM_PLUGIN_KIND_SAMPLER;
  return {
      {"sampler.greedy_is_argmax", kind, greedy_is_argmax},
      {"sampler.greedy_follows_the_chain", kind, greedy_follows_the_chain},
      {"sampler.seeds_reproduce", kind, seeds_reproduce},
      {"sampler.distribution_only", kind, distribution_only},
      {"sampler.masked_tokens", kind, masked_tokens},
      {"sampler.allowed_tokens", kind, allowed_tokens},
      {"sampler.top_logprobs", kind, top_logprobs},
      {"sampler.batch_mixed_params", kind, batch_mixed_params},
      {"sampler.rejects_bad_logits", kind, rejects_bad_logits},
      {"sampler.top_k_beyond_vocab", kind, top_k_beyond_vocab},
      {"sampler.rejects_bad_params", kind, rejects_bad_params},
      {"sampler.default_params_are_valid", kind, default_params_are_valid},
      {"sampler.config_validation", kind, config_validation},
  };
}

}  // namespace loom::conformance::sampler_support
