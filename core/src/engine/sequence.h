// One request's state inside the engine: its tokens, how many have KV, and where it is in its life.
#pragma once

#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar_constraint.h"
#include "engine/prefix_disk_tier.h"
#include "engine/request.h"
#include "engine/stop_matcher.h"
#include "tokenizer/streaming_decoder.h"

namespace loom {

enum class SequenceStatus { waiting, running, finished };

struct Sequence {
  RequestId id = 0;
  Request request;
  std::vector<int32_t> tokens;  // prompt + generated
  uint32_t n_prompt = 0;
  uint32_t n_computed = 0;      // tokens whose KV is in the cache
  uint32_t n_kv_tokens = 0;     // tokens the KV allocator holds slots for
  uint32_t n_cached = 0;        // of the prompt, reused from the prefix cache (first admission)
  // Hybrid models: the block boundary where the recurrent state is checkpointed for prefix reuse
  // (the prompt's last full block before its final token); prefill chunks end there. 0 = none.
  uint32_t state_checkpoint_at = 0;
  bool has_kv = false;          // the KV allocator holds this sequence
  // The prefix cache's disk tier: the keys of this sequence's full blocks so far, and how many leading
  // blocks need no writing (written already, or reused from memory, where a window ring no longer
  // holds them whole).
  std::vector<DiskBlockKey> disk_keys;
  uint32_t n_disk_blocks = 0;
  // The request's adapter: its model slot (-1: none) and the key of its prefix cache (0: the base model's).
  int32_t lora_slot = -1;
  uint64_t lora_cache_key = 0;
  SequenceStatus status = SequenceStatus::waiting;
  bool cancel_requested = false;
  uint32_t n_preemptions = 0;
  loom_sampler_state_t* sampler_state = nullptr;
  std::unique_ptr<StreamingDecoder> decoder;
  std::unique_ptr<StopMatcher> stop;  // holds back text that may be the start of a stop string
  std::unique_ptr<ConstraintMatcher> constraint;  // structured output: masks each step's logits
  Clock::time_point arrival;
  Clock::time_point first_scheduled;
  Clock::time_point first_token;
  Clock::time_point last_token;
  bool got_first_token = false;
  // Speculative decoding: this step's proposals (verified and cleared within the step), their q
  // when the drafter reports one, and the stream of uniforms for acceptance (seeded per request).
  std::vector<int32_t> draft;
  std::vector<float> draft_probs;  // [draft.size(), n_vocab] or empty (one-hot proposals)
  std::mt19937_64 spec_rng;
  std::vector<int32_t> text_history;  // penalty_history's buffer

  // What the sampler's penalties read: `tokens`, or for a prompt holding images its tokens without the
  // image rows. Their placeholder ids are hashes, not text: counting them would push random words of
  // the vocabulary down (llama-server leaves media positions out of its penalties the same way).
  std::span<const int32_t> penalty_history() {
    if (request.images.empty()) return tokens;
    text_history.clear();
    size_t at = 0;
    for (const PromptImage& image : request.images) {
      text_history.insert(text_history.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.begin() + image.first);
      at = size_t(image.first) + image.n_rows;
    }
    text_history.insert(text_history.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at), tokens.end());
    return text_history;
  }

  uint32_t n_generated() const { return static_cast<uint32_t>(tokens.size()) - n_prompt; }
  // Tokens that still need a forward pass before the next token can be sampled.
  uint32_t n_uncomputed() const { return static_cast<uint32_t>(tokens.size()) - n_computed; }
};

}  // namespace loom
