// llama.cpp's token ids for a vocab suite's texts (the .inp files of its models/ggml-vocab-*), for
// vocabularies whose suite has no .out of ids (nomic-bert-moe: XLM-RoBERTa's unigram model). Not part
// of Loom's build; built against a llama.cpp tree as scripts/check_convert_with_llama_cpp.py builds
// logits_reference.cpp.
//
// usage: tokenize_reference VOCAB.gguf TEXTS.inp
// Prints one line per text: its ids (no BOS or EOS; special tokens parsed), space-separated.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenize_reference VOCAB.gguf TEXTS.inp\n");
    return 2;
  }
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  const std::string texts = all.str(), separator = "\n__ggml_vocab_test__\n";
  for (size_t begin = 0, end; (end = texts.find(separator, begin)) != std::string::npos; begin = end + separator.size()) {
    const std::string text = texts.substr(begin, end - begin);
    std::vector<llama_token> ids(text.size() * 4 + 16);
    const int n = llama_tokenize(vocab, text.data(), int(text.size()), ids.data(), int(ids.size()), false, true);
    for (int i = 0; i < n; i++) std::printf("%s%d", i > 0 ? " " : "", ids[size_t(i)]);
    std::printf("\n");
  }
  llama_model_free(model);
  return 0;
}
