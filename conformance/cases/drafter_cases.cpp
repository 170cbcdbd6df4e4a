// Conformance cases for the drafter kind: proposals are valid token ids (at most max_draft of them),
// reported distributions are distributions, proposals are reproducible, unknown sequences and
// garbage requests are refused or ignored cleanly, and a host without model services is handled.
//
// A drafter that cannot start with the conformance host (e.g. draft_model, which needs the host's
// model_* services) makes the cases that need an instance "not supported", with its message.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conformance_case.h"
#include "loom/drafter.h"

namespace loom::conformance {

namespace {

constexpr uint32_t kVocab = 256;
constexpr int32_t kGuard = -777;  // written past every output buffer; must survive

struct DrafterInstance {
  const loom_drafter_i* table = nullptr;
  loom_drafter_t* handle = nullptr;
  DrafterInstance() = default;
  DrafterInstance(const DrafterInstance&) = delete;
  DrafterInstance& operator=(const DrafterInstance&) = delete;
  ~DrafterInstance() {
    if (handle != nullptr) table->destroy(handle);
  }
  std::string error() const {
    const char* e = table->last_error(handle);
    return e != nullptr ? e : "(no message)";
  }
};

std::unique_ptr<DrafterInstance> create_drafter(const CaseContext& c, const loom_host_services* host = nullptr) {
  auto instance = std::make_unique<DrafterInstance>();
  instance->table = c.plugin->drafter();
  require(instance->table != nullptr, "plugin has no drafter table");
  char error[LOOM_ERROR_BUFFER_SIZE] = {};
  loom_status status = instance->table->create(host != nullptr ? host : c.host, c.plugin_config_json.c_str(),
                                               &instance->handle, error, sizeof(error));
  if (status == LOOM_STATUS_UNSUPPORTED) not_supported(std::string("the drafter cannot start with this host: ") + error);
  require(status == LOOM_STATUS_OK, "create failed with status " + std::to_string(status) + ": " + error);
  require(instance->handle != nullptr, "create returned OK but no handle");
  return instance;
}

// Sequences a drafter sees in practice: repetitive text (n-gram matches), random text, a single
// token, one token repeated.
std::vector<std::vector<int32_t>> sample_inputs() {
  std::vector<std::vector<int32_t>> inputs;
  std::mt19937 rng(5);
  std::vector<int32_t> passage;
  for (int i = 0; i < 24; ++i) passage.push_back(static_cast<int32_t>(rng() % kVocab));
  std::vector<int32_t> repeated = passage;
  repeated.insert(repeated.end(), passage.begin(), passage.begin() + 10);
  inputs.push_back(repeated);
  std::vector<int32_t> random_text;
  for (int i = 0; i < 40; ++i) random_text.push_back(static_cast<int32_t>(rng() % kVocab));
  inputs.push_back(random_text);
  inputs.push_back({7});
  inputs.push_back(std::vector<int32_t>(12, 3));
  return inputs;
}

struct Proposal {
  loom_status status = LOOM_STATUS_OK;
  std::vector<int32_t> tokens;  // max_draft + guard
  std::vector<float> probs;     // [max_draft, kVocab] + guard
  uint32_t n_drafted = 0;
  uint32_t has_probs = 0;
};

Proposal propose(DrafterInstance& d, uint64_t seq_id, const std::vector<int32_t>& tokens, uint32_t max_draft) {
  Proposal p;
  p.tokens.assign(max_draft + 4, kGuard);
  p.probs.assign(static_cast<size_t>(max_draft) * kVocab + 4, -1.0f);
  loom_draft_request r{};
  r.struct_size = sizeof(r);
  r.max_draft = max_draft;
  r.seq_id = seq_id;
  r.tokens = tokens.data();
  r.n_tokens = static_cast<uint32_t>(tokens.size());
  r.n_vocab = kVocab;
  r.out_tokens = p.tokens.data();
  r.out_probs = p.probs.data();
  r.n_drafted = 12345;
  r.has_probs = 7;
  p.status = d.table->propose(d.handle, &r, 1);
  p.n_drafted = r.n_drafted;
  p.has_probs = r.has_probs;
  return p;
}

void check_proposal(const Proposal& p, uint32_t max_draft, const std::string& what) {
  require(p.n_drafted <= max_draft, what + ": n_drafted " + std::to_string(p.n_drafted) + " > max_draft " +
                                        std::to_string(max_draft));
  require(p.has_probs <= 1, what + ": has_probs is " + std::to_string(p.has_probs) + " (must be 0 or 1)");
  for (uint32_t i = 0; i < p.n_drafted; ++i) {
    require(p.tokens[i] >= 0 && p.tokens[i] < static_cast<int32_t>(kVocab),
            what + ": proposal " + std::to_string(i) + " is token " + std::to_string(p.tokens[i]) +
                ", outside the vocabulary of " + std::to_string(kVocab));
  }
  for (size_t i = max_draft; i < p.tokens.size(); ++i) require(p.tokens[i] == kGuard, what + ": wrote past out_tokens[max_draft]");
  for (size_t i = size_t(max_draft) * kVocab; i < p.probs.size(); ++i) {
    require(p.probs[i] == -1.0f, what + ": wrote past out_probs[max_draft, n_vocab]");
  }
  if (p.has_probs == 0) return;
  for (uint32_t i = 0; i < p.n_drafted; ++i) {
    const float* row = p.probs.data() + size_t(i) * kVocab;
    double total = 0.0;
    for (uint32_t t = 0; t < kVocab; ++t) {
      require(std::isfinite(row[t]) && row[t] >= 0.0f, what + ": q row " + std::to_string(i) + " has a negative or non-finite entry");
      total += row[t];
    }
    require(std::fabs(total - 1.0) < 1e-3, what + ": q row " + std::to_string(i) + " sums to " + std::to_string(total));
    require(row[p.tokens[i]] > 0.0f, what + ": proposal " + std::to_string(i) + " has probability 0 under its own q");
  }
}

std::vector<Case> build() {
  std::vector<Case> cases;
  const loom_plugin_kind kind = LOOM_PLUGIN_KIND_DRAFTER;

  cases.push_back({"drafter.proposals_are_valid", kind, [](CaseContext& c) {
                     auto d = create_drafter(c);
                     const auto inputs = sample_inputs();
                     uint64_t seq_id = 1;
                     for (size_t i = 0; i < inputs.size(); ++i) {
                       for (uint32_t max_draft : {1u, 3u, 8u}) {
                         const std::string what = "input " + std::to_string(i) + ", max_draft " + std::to_string(max_draft);
                         Proposal p = propose(*d, seq_id++, inputs[i], max_draft);
                         require(p.status == LOOM_STATUS_OK, what + ": propose failed (status " +
                                                                 std::to_string(p.status) + "): " + d->error());
                         check_proposal(p, max_draft, what);
                       }
                     }
                   }});

  cases.push_back({"drafter.max_draft_zero_proposes_nothing", kind, [](CaseContext& c) {
                     auto d = create_drafter(c);
                     Proposal p = propose(*d, 1, sample_inputs()[0], 0);
                     require(p.status == LOOM_STATUS_OK, "propose with max_draft 0 failed: " + d->error());
                     require(p.n_drafted == 0, "max_draft 0 gave " + std::to_string(p.n_drafted) + " proposals");
                   }});

  cases.push_back({"drafter.deterministic_for_the_same_input", kind, [](CaseContext& c) {
                     // Two fresh instances see the same history for the same sequence id.
                     auto a = create_drafter(c);
                     auto b = create_drafter(c);
                     for (const auto& input : sample_inputs()) {
                       Proposal pa = propose(*a, 42, input, 5);
                       Proposal pb = propose(*b, 42, input, 5);
                       require(pa.status == LOOM_STATUS_OK && pb.status == LOOM_STATUS_OK, "propose failed: " + a->error());
                       require(pa.n_drafted == pb.n_drafted && pa.has_probs == pb.has_probs,
                               "two instances proposed different counts for the same input");
                       for (uint32_t i = 0; i < pa.n_drafted; ++i) {
                         require(pa.tokens[i] == pb.tokens[i], "two instances proposed different tokens for the same input");
                       }
                     }
                   }});

  cases.push_back({"drafter.batch_matches_single_requests", kind, [](CaseContext& c) {
                     // Proposals for several sequences in one call equal those made one by one.
                     auto batched = create_drafter(c);
                     auto single = create_drafter(c);
                     const auto inputs = sample_inputs();
                     std::vector<std::vector<int32_t>> out(inputs.size(), std::vector<int32_t>(4, kGuard));
                     std::vector<std::vector<float>> probs(inputs.size(), std::vector<float>(4 * kVocab));
                     std::vector<loom_draft_request> requests(inputs.size());
                     for (size_t i = 0; i < inputs.size(); ++i) {
                       auto& r = requests[i];
                       r.struct_size = sizeof(r);
                       r.max_draft = 4;
                       r.seq_id = 100 + i;
                       r.tokens = inputs[i].data();
                       r.n_tokens = static_cast<uint32_t>(inputs[i].size());
                       r.n_vocab = kVocab;
                       r.out_tokens = out[i].data();
                       r.out_probs = probs[i].data();
                     }
                     loom_status status = batched->table->propose(batched->handle, requests.data(),
                                                                  static_cast<uint32_t>(requests.size()));
                     require(status == LOOM_STATUS_OK, "batched propose failed: " + batched->error());
                     for (size_t i = 0; i < inputs.size(); ++i) {
                       Proposal p = propose(*single, 100 + i, inputs[i], 4);
                       require(p.status == LOOM_STATUS_OK, "propose failed: " + single->error());
                       require(p.n_drafted == requests[i].n_drafted, "request " + std::to_string(i) +
                                                                         ": batched and single proposal counts differ");
                       for (uint32_t t = 0; t < p.n_drafted; ++t) {
                         require(p.tokens[t] == out[i][t], "request " + std::to_string(i) + ": batched and single proposals differ");
                       }
                     }
                   }});

  cases.push_back({"drafter.unknown_sequences", kind, [](CaseContext& c) {
                     auto d = create_drafter(c);
                     if (d->table->accepted != nullptr) {
                       loom_status status = d->table->accepted(d->handle, 987654321, 3);
                       require(status == LOOM_STATUS_OK || status == LOOM_STATUS_NOT_FOUND,
                               "accepted() of an unknown sequence returned status " + std::to_string(status));
                     }
                     if (d->table->release != nullptr) {
                       d->table->release(d->handle, 987654321);
                       d->table->release(d->handle, 987654321);
                     }
                     // Still usable afterwards, and a released sequence can come back.
                     Proposal p = propose(*d, 987654321, sample_inputs()[0], 3);
                     require(p.status == LOOM_STATUS_OK, "propose after releasing an unknown sequence failed: " + d->error());
                     check_proposal(p, 3, "after release");
                   }});

  cases.push_back({"drafter.rollback_then_propose", kind, [](CaseContext& c) {
                     // The decode loop: propose, keep part of the draft plus a correction, propose
                     // again; release. The result must equal a fresh instance given the same history.
                     auto d = create_drafter(c);
                     std::vector<int32_t> tokens = sample_inputs()[0];
                     for (int round = 0; round < 4; ++round) {
                       Proposal p = propose(*d, 9, tokens, 4);
                       require(p.status == LOOM_STATUS_OK, "propose failed: " + d->error());
                       check_proposal(p, 4, "round " + std::to_string(round));
                       const uint32_t keep = p.n_drafted / 2;
                       tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.begin() + keep);
                       tokens.push_back(static_cast<int32_t>((round * 37 + 11) % kVocab));
                       if (d->table->accepted != nullptr) {
                         loom_status status = d->table->accepted(d->handle, 9, static_cast<uint32_t>(tokens.size()));
                         require(status == LOOM_STATUS_OK, "accepted() failed: " + d->error());
                       }
                     }
                     auto fresh = create_drafter(c);
                     Proposal p1 = propose(*d, 9, tokens, 4);
                     Proposal p2 = propose(*fresh, 9, tokens, 4);
                     require(p1.status == LOOM_STATUS_OK && p2.status == LOOM_STATUS_OK, "propose failed");
                     if (p1.has_probs == 0) {
                       require(p1.n_drafted == p2.n_drafted, "after rollbacks the proposal count differs from a fresh instance's");
                       for (uint32_t i = 0; i < p1.n_drafted; ++i) {
                         require(p1.tokens[i] == p2.tokens[i], "after rollbacks the proposals differ from a fresh instance's");
                       }
                     }
                     if (d->table->release != nullptr) d->table->release(d->handle, 9);
                   }});

  cases.push_back({"drafter.garbage_requests_are_errors", kind, [](CaseContext& c) {
                     auto d = create_drafter(c);
                     int32_t out[4] = {};
                     const int32_t tokens[3] = {1, 2, 3};
                     auto expect_error = [&](loom_draft_request* requests, uint32_t n, const std::string& what) {
                       loom_status status = d->table->propose(d->handle, requests, n);
                       require(status != LOOM_STATUS_OK, what + " was accepted");
                       require(!d->error().empty() && d->error() != "(no message)", what + ": failed without a message");
                     };
                     loom_draft_request r{};
                     r.struct_size = sizeof(r);
                     r.max_draft = 4;
                     r.seq_id = 1;
                     r.n_vocab = kVocab;
                     r.out_tokens = out;
                     r.tokens = tokens;
                     r.n_tokens = 0;
                     expect_error(&r, 1, "n_tokens = 0");
                     r.tokens = nullptr;
                     r.n_tokens = 5;
                     expect_error(&r, 1, "tokens = NULL with n_tokens = 5");
                     r.tokens = tokens;
                     r.n_tokens = 3;
                     r.out_tokens = nullptr;
                     expect_error(&r, 1, "out_tokens = NULL with max_draft = 4");
                     r.out_tokens = out;
                     r.struct_size = 8;
                     expect_error(&r, 1, "struct_size = 8");
                     expect_error(nullptr, 2, "requests = NULL with n_requests = 2");
                     require(d->table->propose(d->handle, nullptr, 0) == LOOM_STATUS_OK, "an empty batch was refused");
                     // Still works after all that.
                     Proposal p = propose(*d, 2, sample_inputs()[0], 2);
                     require(p.status == LOOM_STATUS_OK, "propose after garbage requests failed: " + d->error());
                   }});

  cases.push_back({"drafter.host_without_model_services", kind, [](CaseContext& c) {
                     // An older host whose table ends before model_open: a drafter either works
                     // without models or refuses to start with a message; it never reads past the end.
                     loom_host_services older = *c.host;
                     older.struct_size = static_cast<uint32_t>(offsetof(loom_host_services, model_open));
                     const loom_drafter_i* table = c.plugin->drafter();
                     loom_drafter_t* handle = nullptr;
                     char error[LOOM_ERROR_BUFFER_SIZE] = {};
                     loom_status status = table->create(&older, c.plugin_config_json.c_str(), &handle, error, sizeof(error));
                     if (status == LOOM_STATUS_OK) {
                       require(handle != nullptr, "create returned OK but no handle");
                       table->destroy(handle);
                       return;
                     }
                     require(handle == nullptr, "a failed create left a handle");
                     require(std::strlen(error) > 0, "create failed (status " + std::to_string(status) + ") without a message");
                   }});
  return cases;
}

}  // namespace

std::vector<Case> drafter_cases() { return build(); }

}  // namespace loom::conformance
