// llama.cpp's next-token log-probabilities for a prompt of token ids, for checking the GGUF files
// `loom convert` writes (scripts/check_convert_with_llama_cpp.py builds and runs it against a
// llama.cpp build; not part of Loom's build).
//
// usage: logits_reference MODEL [--lora ADAPTER SCALE] ID...
// With --lora, a LoRA adapter (llama.cpp's GGUF adapter format) applied at that scale.
// Prints one JSON object: the 20 highest log-softmax values after the whole prompt, [[id, logprob],
// ...] best first, and 8 greedy continuation tokens. CPU, 2 threads, the prompt in one batch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <vector>

#include "llama.h"

namespace {

std::vector<std::pair<int, float>> top_logprobs(const float* logits, int n_vocab, int n_top) {
  const float max = *std::max_element(logits, logits + n_vocab);
  double total = 0;
  for (int i = 0; i < n_vocab; i++) total += std::exp(double(logits[i] - max));
  std::vector<int> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<std::pair<int, float>> top;
  for (int i = 0; i < n_top; i++) top.emplace_back(ids[size_t(i)], float(double(logits[ids[size_t(i)]] - max) - std::log(total)));
  return top;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL ID...\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) return 1;
  int first_id = 2;
  llama_adapter_lora* adapter = nullptr;
  float adapter_scale = 1.0f;
  if (argc > 4 && std::string_view(argv[2]) == "--lora") {
    adapter = llama_adapter_lora_init(model, argv[3]);
    if (adapter == nullptr) return 1;
    adapter_scale = float(std::atof(argv[4]));
    first_id = 5;
  }
  std::vector<llama_token> prompt;
  for (int i = first_id; i < argc; i++) prompt.push_back(llama_token(std::atoi(argv[i])));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 0;  // the model's own context, as `loom serve` runs it (Phi-3 picks LongRoPE's long or short factors by it)
  cp.n_batch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx != nullptr && adapter != nullptr && llama_set_adapters_lora(ctx, &adapter, 1, &adapter_scale) != 0) return 1;
  if (ctx == nullptr || llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const auto top = top_logprobs(llama_get_logits_ith(ctx, -1), n_vocab, std::min(20, n_vocab));
  std::vector<llama_token> greedy;
  llama_token next = top[0].first;
  for (int i = 0; i < 8; i++) {
    greedy.push_back(next);
    if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) return 1;
    const float* logits = llama_get_logits_ith(ctx, -1);
    next = llama_token(std::max_element(logits, logits + n_vocab) - logits);
  }
  std::printf("{\"top\": [");
  for (size_t i = 0; i < top.size(); i++) std::printf("%s[%d, %.7g]", i ? ", " : "", top[i].first, double(top[i].second));
  std::printf("], \"greedy\": [");
  for (size_t i = 0; i < greedy.size(); i++) std::printf("%s%d", i ? ", " : "", greedy[i]);
  std::printf("]}\n");
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
