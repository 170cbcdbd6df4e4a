#include "server/tokenize_api.h"

#include "server/api_error.h"
#include "server/openai_parse.h"

namespace loom::server {

using nlohmann::json;

json tokenize_reply(const Tokenizer& tokenizer, const json& body) {
  const TokenizeParams p = parse_tokenize_request(body);
  json tokens = json::array();
  for (int32_t id : tokenizer.encode(p.content, p.add_special, true)) {
    if (p.with_pieces) tokens.push_back({{"id", id}, {"piece", tokenizer.token_to_piece(id, true)}});
    else tokens.push_back(id);
  }
  return {{"tokens", tokens}};
}

json detokenize_reply(const Tokenizer& tokenizer, const json& body) {
  std::vector<int32_t> tokens;
  for (int64_t id : parse_detokenize_request(body)) {
    if (id < 0 || id >= tokenizer.n_vocab())
      throw invalid_param("tokens", "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(tokenizer.n_vocab() - 1) + ")");
    tokens.push_back(static_cast<int32_t>(id));
  }
  return {{"content", tokenizer.decode(tokens)}};
}

}  // namespace loom::server
