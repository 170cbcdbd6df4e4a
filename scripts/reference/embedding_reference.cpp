// Reference output of llama.cpp's embeddings for Loom's embedding tests (built and run by
// scripts/make_embedding_golden.py against a llama.cpp build; not part of Loom's build).
//
// usage: embedding_reference MODEL TEXT...
//        embedding_reference MODEL --rerank QUERY DOCUMENT...
// Prints one JSON object: each text's tokens (llama.cpp's tokenizer, specials added) and its pooled
// embedding (the model's pooling type, not normalised); with --rerank, each (query, document) pair laid
// out as llama-server's rerank does ([BOS] query [EOS] [SEP] document [EOS], each where the vocabulary
// adds it, or the model's rerank template filled in) and its scores (rank pooling: the classifier's
// outputs). CPU, 2 threads.
#include <cstdio>
#include <utility>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL TEXT...\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  auto tokenize = [&](const std::string& text, bool specials) {
    std::vector<llama_token> ids(text.size() + 8);
    const int n = llama_tokenize(vocab, text.c_str(), int32_t(text.size()), ids.data(), int32_t(ids.size()), specials, false);
    ids.resize(size_t(n < 0 ? 0 : n));
    return ids;
  };
  std::vector<std::vector<llama_token>> inputs;
  const bool rerank = std::string(argv[2]) == "--rerank";
  const char* rerank_template = llama_model_chat_template(model, "rerank");
  if (rerank && rerank_template != nullptr) {
    // Qwen3-Reranker's way (llama-server's format_prompt_rerank): the template with the pair filled in,
    // specials parsed, none added.
    for (int i = 4; i < argc; i++) {
      std::string prompt = rerank_template;
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"{query}", argv[3]}, {"{document}", argv[i]}})
        for (size_t at = prompt.find(key); at != std::string::npos; at = prompt.find(key, at + value.size())) prompt.replace(at, key.size(), value);
      std::vector<llama_token> ids(prompt.size() + 8);
      const int n = llama_tokenize(vocab, prompt.c_str(), int32_t(prompt.size()), ids.data(), int32_t(ids.size()), false, true);
      ids.resize(size_t(n < 0 ? 0 : n));
      inputs.push_back(ids);
    }
  } else if (rerank) {
    const std::vector<llama_token> query = tokenize(argv[3], false);
    llama_token eos = llama_vocab_eos(vocab);
    if (eos == LLAMA_TOKEN_NULL) eos = llama_vocab_sep(vocab);
    for (int i = 4; i < argc; i++) {
      std::vector<llama_token> ids;
      if (llama_vocab_get_add_bos(vocab)) ids.push_back(llama_vocab_bos(vocab));
      ids.insert(ids.end(), query.begin(), query.end());
      if (llama_vocab_get_add_eos(vocab)) ids.push_back(eos);
      if (llama_vocab_get_add_sep(vocab)) ids.push_back(llama_vocab_sep(vocab));
      const std::vector<llama_token> doc = tokenize(argv[i], false);
      ids.insert(ids.end(), doc.begin(), doc.end());
      if (llama_vocab_get_add_eos(vocab)) ids.push_back(eos);
      inputs.push_back(ids);
    }
  } else {
    for (int i = 2; i < argc; i++) inputs.push_back(tokenize(argv[i], true));
  }
  // One context and one decode per text (a batch of one sequence): the reference values do not depend
  // on batching, and this llama.cpp aborts reserving a mean-pooled graph for several sequences.
  const int n_embd = rerank ? int(llama_model_n_cls_out(model)) : llama_model_n_embd(model);
  std::printf("{\"inputs\": [");
  for (size_t s = 0; s < inputs.size(); s++) {
    llama_context_params cp = llama_context_default_params();
    cp.embeddings = true;
    cp.n_ctx = uint32_t(inputs[s].size() + 16);
    cp.n_batch = cp.n_ubatch = cp.n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) return 1;
    llama_batch batch = llama_batch_init(int32_t(inputs[s].size()), 0, 1);
    for (size_t i = 0; i < inputs[s].size(); i++) {
      const int32_t at = batch.n_tokens++;
      batch.token[at] = inputs[s][i];
      batch.pos[at] = int32_t(i);
      batch.n_seq_id[at] = 1;
      batch.seq_id[at][0] = 0;
      batch.logits[at] = true;
    }
    const int rc = llama_model_has_encoder(model) && !llama_model_has_decoder(model) ? llama_encode(ctx, batch) : llama_decode(ctx, batch);
    if (rc != 0) return 1;
    std::printf("%s{\"tokens\": [", s ? ", " : "");
    for (size_t i = 0; i < inputs[s].size(); i++) std::printf("%s%d", i ? ", " : "", inputs[s][i]);
    std::printf("], \"embedding\": [");
    const float* e = llama_get_embeddings_seq(ctx, 0);
    if (e == nullptr) return 1;
    for (int j = 0; j < n_embd; j++) std::printf("%s%.9g", j ? ", " : "", double(e[j]));
    std::printf("]}");
    llama_batch_free(batch);
    llama_free(ctx);
  }
  std::printf("]}\n");
  llama_model_free(model);
  return 0;
}
