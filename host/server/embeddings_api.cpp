#include "server/embeddings_api.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "server/api_error.h"

namespace loom::server {

using nlohmann::json;

std::string base64_floats(const std::vector<float>& values) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // x86 and ARM are little-endian, as the API wants
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = uint8_t(bytes[i]), b1 = i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) : 0u,
                   b2 = i + 2 < bytes.size() ? uint8_t(bytes[i + 2]) : 0u;
    const uint32_t triple = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(triple >> 18) & 63];
    out += kAlphabet[(triple >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(triple >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[triple & 63] : '=';
  }
  return out;
}

std::string fill_rerank_template(std::string prompt, const std::string& query, const std::string& document) {
  // As llama-server: every {query}, then every {document} of the result.
  auto replace_all = [](std::string s, const std::string& key, const std::string& value) {
    std::string out;
    size_t at = 0;
    for (size_t hit; (hit = s.find(key, at)) != std::string::npos; at = hit + key.size()) out += s.substr(at, hit - at) + value;
    return out + s.substr(at);
  };
  return replace_all(replace_all(std::move(prompt), "{query}", query), "{document}", document);
}

namespace {

// `input`: a string, an array of strings, an array of token ids, or an array of such arrays.
std::vector<std::vector<int32_t>> read_inputs(const json& input, const Tokenizer& tokenizer, int64_t n_vocab, int64_t max_inputs) {
  if (input.is_null()) throw invalid_param("input", "'input' is required");
  std::vector<std::vector<int32_t>> out;
  auto tokens_of = [&](const json& ids, const std::string& where) {
    std::vector<int32_t> tokens;
    for (size_t j = 0; j < ids.size(); j++) {
      const json& id = ids[j];
      if (!id.is_number_integer()) throw invalid_param(where, "'" + where + "' must hold token ids (integers)");
      const int64_t v = id.get<int64_t>();
      if (v < 0 || v >= n_vocab)
        throw invalid_param(where, "'" + where + "[" + std::to_string(j) + "]' is token id " + std::to_string(v) + ", outside the vocabulary (0.." +
                                       std::to_string(n_vocab - 1) + ")");
      tokens.push_back(int32_t(v));
    }
    if (tokens.empty()) throw invalid_param(where, "'" + where + "' is empty");
    return tokens;
  };
  auto text_of = [&](const json& text, const std::string& where) {
    const std::string s = text.get<std::string>();
    if (s.empty()) throw invalid_param(where, "'" + where + "' is an empty string");
    return tokenizer.encode(s, /*add_special=*/true, /*parse_special=*/false);
  };
  if (input.is_string()) {
    out.push_back(text_of(input, "input"));
  } else if (input.is_array()) {
    if (input.empty()) throw invalid_param("input", "'input' is an empty array");
    if (int64_t(input.size()) > max_inputs)
      throw invalid_param("input", "'input' holds " + std::to_string(input.size()) + " inputs, more than the " + std::to_string(max_inputs) +
                                       " one request may send ([server] max_embedding_inputs)");
    if (input[0].is_number()) {
      out.push_back(tokens_of(input, "input"));
    } else {
      for (size_t i = 0; i < input.size(); i++) {
        const std::string where = "input[" + std::to_string(i) + "]";
        if (input[i].is_string()) out.push_back(text_of(input[i], where));
        else if (input[i].is_array()) out.push_back(tokens_of(input[i], where));
        else throw invalid_param("input", "'" + where + "' must be a string or an array of token ids");
      }
    }
  } else {
    throw invalid_param("input", "'input' must be a string, an array of strings, or token ids");
  }
  return out;
}

}  // namespace

json EmbeddingService::embeddings(const json& request) {
  if (!request.is_object()) throw invalid_param("body", "the request body must be a JSON object");
  const embed::TextEncoderInfo& m = encoder_.info();
  if (is_reranker())
    throw ApiError(400, "model '" + model_name_ + "' is a reranker (task: rerank); it serves POST /v1/rerank, not /v1/embeddings", "model",
                   "invalid_request_error", "model_not_supported");
  if (request.contains("model") && request["model"].is_string() && request["model"].get<std::string>() != model_name_)
    throw ApiError(404, "model '" + request["model"].get<std::string>() + "' is not served here (this server serves '" + model_name_ + "')",
                   "model", "invalid_request_error", "model_not_found");
  const std::string format = request.value("encoding_format", std::string("float"));
  if (format != "float" && format != "base64")
    throw invalid_param("encoding_format", "'encoding_format' must be \"float\" or \"base64\", not \"" + format + "\"");
  int64_t dimensions = m.pooled_dim;
  if (request.contains("dimensions") && !request["dimensions"].is_null()) {
    if (!request["dimensions"].is_number_integer()) throw invalid_param("dimensions", "'dimensions' must be an integer");
    dimensions = request["dimensions"].get<int64_t>();
    if (dimensions < 1 || dimensions > m.pooled_dim)
      throw invalid_param("dimensions", "'dimensions' is " + std::to_string(dimensions) + "; this model's embeddings have 1 to " + std::to_string(m.pooled_dim));
  }
  std::vector<std::vector<int32_t>> inputs = read_inputs(request.value("input", json()), tokenizer_, m.n_vocab, limits_.max_inputs);
  const int64_t longest = std::min(m.n_ctx_train, encoder_.max_tokens());
  // vLLM's truncate_prompt_tokens: keep the last k tokens of a longer input (-1: as many as fit).
  if (request.contains("truncate_prompt_tokens") && !request["truncate_prompt_tokens"].is_null()) {
    if (!request["truncate_prompt_tokens"].is_number_integer()) throw invalid_param("truncate_prompt_tokens", "'truncate_prompt_tokens' must be an integer");
    int64_t keep = request["truncate_prompt_tokens"].get<int64_t>();
    if (keep == -1) keep = longest;
    if (keep < 1 || keep > longest)
      throw invalid_param("truncate_prompt_tokens", "'truncate_prompt_tokens' is " + std::to_string(keep) + "; it must be -1 or 1 to " + std::to_string(longest));
    for (std::vector<int32_t>& tokens : inputs)
      if (int64_t(tokens.size()) > keep) tokens.erase(tokens.begin(), tokens.end() - keep);
  }
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < inputs.size(); i++) {
    prompt_tokens += int64_t(inputs[i].size());
    if (int64_t(inputs[i].size()) > longest)
      throw invalid_param("input", "input " + std::to_string(i) + " is " + std::to_string(inputs[i].size()) + " tokens, more than the " +
                                       std::to_string(longest) + " this model takes (send truncate_prompt_tokens to cut it)");
  }
  std::vector<std::vector<float>> vectors = batcher_.embed(inputs, /*normalize=*/true);
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); i++) {
    std::vector<float>& e = vectors[i];
    if (dimensions < m.pooled_dim) {  // Matryoshka: the leading values, renormalised
      e.resize(size_t(dimensions));
      double norm = 0;
      for (float v : e) norm += double(v) * v;
      if (norm > 0)
        for (float& v : e) v = float(v / std::sqrt(norm));
    }
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64") item["embedding"] = base64_floats(e);
    else item["embedding"] = e;
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model_name_},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

json EmbeddingService::rerank(const json& request) {
  if (!request.is_object()) throw invalid_param("body", "the request body must be a JSON object");
  if (!is_reranker())
    throw ApiError(400, "model '" + model_name_ + "' is an embedding model (task: embedding); it serves POST /v1/embeddings, not rerank", "model",
                   "invalid_request_error", "model_not_supported");
  if (request.contains("model") && request["model"].is_string() && request["model"].get<std::string>() != model_name_)
    throw ApiError(404, "model '" + request["model"].get<std::string>() + "' is not served here (this server serves '" + model_name_ + "')",
                   "model", "invalid_request_error", "model_not_found");
  if (!request.contains("query") || !request["query"].is_string() || request["query"].get<std::string>().empty())
    throw invalid_param("query", "'query' must be a non-empty string");
  const json documents = request.value("documents", json());
  if (!documents.is_array() || documents.empty()) throw invalid_param("documents", "'documents' must be a non-empty array");
  if (int64_t(documents.size()) > limits_.max_inputs)
    throw invalid_param("documents", "'documents' holds " + std::to_string(documents.size()) + ", more than the " +
                                         std::to_string(limits_.max_inputs) + " one request may send ([server] max_embedding_inputs)");
  int64_t top_n = int64_t(documents.size());
  if (request.contains("top_n") && !request["top_n"].is_null()) {
    if (!request["top_n"].is_number_integer() || request["top_n"].get<int64_t>() < 1)
      throw invalid_param("top_n", "'top_n' must be a positive integer");
    top_n = std::min(top_n, request["top_n"].get<int64_t>());
  }
  const bool return_documents = request.value("return_documents", true);
  std::vector<std::string> texts;
  for (size_t i = 0; i < documents.size(); i++) {
    const std::string where = "documents[" + std::to_string(i) + "]";
    const json& d = documents[i];
    const json& text = d.is_object() ? d.value("text", json()) : d;
    if (!text.is_string() || text.get<std::string>().empty()) throw invalid_param(where, "'" + where + "' must be a non-empty string (or {\"text\": ...})");
    texts.push_back(text.get<std::string>());
  }
  int64_t total = 0;
  const std::vector<float> scores = score_pairs({request["query"].get<std::string>()}, texts, "documents", total);
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  json results = json::array();
  for (int64_t r = 0; r < top_n; r++) {
    const size_t i = order[size_t(r)];
    json item = {{"index", i}, {"relevance_score", scores[i]}};
    if (return_documents) item["document"] = {{"text", texts[i]}};
    results.push_back(std::move(item));
  }
  return {{"object", "list"}, {"model", model_name_}, {"results", std::move(results)}, {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}};
}

std::vector<int32_t> EmbeddingService::plain_pair(const std::string& first, const std::string& second, int32_t eos) const {
  std::vector<int32_t> ids;
  if (tokenizer_.add_bos() && tokenizer_.bos_id() >= 0) ids.push_back(tokenizer_.bos_id());
  const std::vector<int32_t> a = tokenizer_.encode(first, false, false);
  ids.insert(ids.end(), a.begin(), a.end());
  if (tokenizer_.add_eos() && eos >= 0) ids.push_back(eos);
  if (tokenizer_.add_sep() && tokenizer_.sep_id() >= 0) ids.push_back(tokenizer_.sep_id());
  const std::vector<int32_t> b = tokenizer_.encode(second, false, false);
  ids.insert(ids.end(), b.begin(), b.end());
  if (tokenizer_.add_eos() && eos >= 0) ids.push_back(eos);
  return ids;
}

std::vector<float> EmbeddingService::score_pairs(const std::vector<std::string>& firsts, const std::vector<std::string>& seconds,
                                                 const std::string& where, int64_t& total_tokens) {
  const embed::TextEncoderInfo& m = encoder_.info();
  const int64_t longest = std::min(m.n_ctx_train, encoder_.max_tokens());
  const int32_t eos = tokenizer_.eos_id() >= 0 ? tokenizer_.eos_id() : tokenizer_.sep_id();
  std::vector<std::vector<int32_t>> inputs;
  total_tokens = 0;
  for (size_t i = 0; i < seconds.size(); i++) {
    const std::string& query = firsts[firsts.size() == 1 ? 0 : i];
    std::vector<int32_t> ids;
    if (!limits_.rerank_template.empty()) {
      ids = tokenizer_.encode(fill_rerank_template(limits_.rerank_template, query, seconds[i]), /*add_special=*/false, /*parse_special=*/true);
    } else {
      ids = plain_pair(query, seconds[i], eos);
    }
    const std::string name = where + "[" + std::to_string(i) + "]";
    if (int64_t(ids.size()) > longest)
      throw invalid_param(name, "the pair of '" + name + "' is " + std::to_string(ids.size()) + " tokens, more than the " + std::to_string(longest) +
                                    " this model takes");
    total_tokens += int64_t(ids.size());
    inputs.push_back(std::move(ids));
  }
  const std::vector<std::vector<float>> out = batcher_.embed(inputs, false);
  std::vector<float> scores;
  for (const std::vector<float>& s : out) scores.push_back(s[0]);
  return scores;
}

json EmbeddingService::score(const json& request) {
  if (!request.is_object()) throw invalid_param("body", "the request body must be a JSON object");
  if (!is_reranker())
    throw ApiError(400, "model '" + model_name_ + "' is an embedding model (task: embedding); it serves POST /v1/embeddings, not score", "model",
                   "invalid_request_error", "model_not_supported");
  auto texts = [&](const char* field) {
    const json v = request.value(field, json());
    std::vector<std::string> out;
    if (v.is_string()) out.push_back(v.get<std::string>());
    else if (v.is_array())
      for (const json& t : v) {
        if (!t.is_string()) throw invalid_param(field, std::string("'") + field + "' must hold strings");
        out.push_back(t.get<std::string>());
      }
    else throw invalid_param(field, std::string("'") + field + "' must be a string or an array of strings");
    if (out.empty()) throw invalid_param(field, std::string("'") + field + "' is empty");
    for (const std::string& t : out)
      if (t.empty()) throw invalid_param(field, std::string("'") + field + "' holds an empty string");
    if (int64_t(out.size()) > limits_.max_inputs)
      throw invalid_param(field, std::string("'") + field + "' holds more than the " + std::to_string(limits_.max_inputs) + " texts one request may send");
    return out;
  };
  const std::vector<std::string> first = texts("text_1"), second = texts("text_2");
  if (first.size() != 1 && first.size() != second.size())
    throw invalid_param("text_1", "'text_1' holds " + std::to_string(first.size()) + " texts; it must hold one, or as many as 'text_2' (" +
                                      std::to_string(second.size()) + ")");
  int64_t total = 0;
  const std::vector<float> scores = score_pairs(first, second, "text_2", total);
  json data = json::array();
  for (size_t i = 0; i < scores.size(); i++) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  return {{"object", "list"}, {"model", model_name_}, {"data", std::move(data)}, {"usage", {{"prompt_tokens", total}, {"total_tokens", total}}}};
}

}  // namespace loom::server
