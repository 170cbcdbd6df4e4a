#include "server/openai_parse.h"

#include <cmath>
#include <limits>

#include "engine/image_prompt.h"
#include "server/api_error.h"

namespace loom::server {

namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

ApiError wrong_type(const std::string& field, const char* expected, const json& got) {
  return invalid_param(field, "'" + field + "' must be " + expected + ", got " + type_name(got));
}

// A present, non-null field; JSON null is treated as absent (clients send "stop": null and the like).
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> get_bool(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

std::optional<double> get_number(const json& body, const char* name, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw invalid_param(name, "'" + std::string(name) + "' must be between " + nlohmann::json(lo).dump() + " and " +
                                  nlohmann::json(hi).dump() + ", got " + v->dump());
  }
  return d;
}

std::optional<int64_t> get_int(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  // 5.0 is accepted as 5 (some clients serialise every number as a float); 5.5 is not.
  int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      value = std::numeric_limits<int64_t>::max();
    } else {
      value = v->get<int64_t>();
    }
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e18) {
    value = static_cast<int64_t>(v->get<double>());
  } else {
    throw wrong_type(name, "an integer", *v);
  }
  if (value < lo || value > hi) {
    throw invalid_param(name, "'" + std::string(name) + "' must be between " + std::to_string(lo) + " and " +
                                  std::to_string(hi) + ", got " + std::to_string(value));
  }
  return value;
}

std::optional<std::string> get_string(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw wrong_type(name, "a string", *v);
  return v->get<std::string>();
}

constexpr int64_t kMaxTokensLimit = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxChoices = 128;
constexpr int64_t kMaxTopLogprobs = 20;
constexpr size_t kMaxStops = 16;

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) throw wrong_type("stop", "a string or an array of strings", *v);
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw wrong_type("stop", "a string or an array of strings", *v);
  }
  if (stops.size() > kMaxStops) throw invalid_param("stop", "'stop' holds at most " + std::to_string(kMaxStops) + " strings");
  for (const auto& s : stops) {
    if (s.empty()) throw invalid_param("stop", "'stop' strings must not be empty");
  }
  return stops;
}

// Fields both endpoints share.
void parse_common(const json& body, GenerationParams& p) {
  if (auto model = get_string(body, "model")) p.model = *model;
  p.max_tokens = get_int(body, "max_tokens", std::numeric_limits<int64_t>::min(), kMaxTokensLimit);
  if (p.max_tokens && *p.max_tokens < 1) {
    throw invalid_param("max_tokens", "'max_tokens' must be at least 1, got " + std::to_string(*p.max_tokens));
  }
  p.temperature = get_number(body, "temperature", 0.0, 2.0);
  p.top_p = get_number(body, "top_p", 0.0, 1.0);
  if (p.top_p && *p.top_p <= 0.0) throw invalid_param("top_p", "'top_p' must be greater than 0");
  p.min_p = get_number(body, "min_p", 0.0, 1.0);
  p.top_k = get_int(body, "top_k", -1, std::numeric_limits<int32_t>::max());
  p.presence_penalty = get_number(body, "presence_penalty", -2.0, 2.0);
  p.frequency_penalty = get_number(body, "frequency_penalty", -2.0, 2.0);
  p.repetition_penalty = get_number(body, "repetition_penalty", 0.0, 10.0);
  if (p.repetition_penalty && *p.repetition_penalty <= 0.0) {
    throw invalid_param("repetition_penalty", "'repetition_penalty' must be greater than 0");
  }
  p.seed = get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  p.stop = parse_stop(body);
  p.n_indent = get_int(body, "n_indent", 0, 1 << 16).value_or(0);
  p.n = get_int(body, "n", 1, kMaxChoices).value_or(1);
  p.stream = get_bool(body, "stream").value_or(false);
  if (const json* opts = field(body, "stream_options")) {
    if (!opts->is_object()) throw wrong_type("stream_options", "an object", *opts);
    p.include_usage = get_bool(*opts, "include_usage").value_or(false);
  }
  p.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  p.tuned = parse_tuned_sampling(body);
  p.tokens_as_ids = get_bool(body, "return_tokens_as_token_ids").value_or(false);
  // tools / tool_choice: parse_tool_request (chat), on the body in key order.
  // response_format / structured_outputs / guided_*: parse_structured_output, on the body in key order.
}

std::vector<int32_t> token_array(const json& v, const char* name) {
  std::vector<int32_t> tokens;
  tokens.reserve(v.size());
  for (const json& t : v) {
    if (!t.is_number_integer()) throw wrong_type(name, "a string, an array of strings or an array of token ids", v);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      throw invalid_param(name, "token id " + std::to_string(id) + " in '" + name + "' is out of range");
    }
    tokens.push_back(static_cast<int32_t>(id));
  }
  return tokens;
}

std::vector<PromptInput> parse_prompts(const json& body) {
  const json* v = field(body, "prompt");
  if (!v) throw invalid_param("prompt", "'prompt' is required");
  const char* expected = "a string, an array of strings or an array of token ids";
  std::vector<PromptInput> prompts;
  if (v->is_string()) {
    prompts.push_back({v->get<std::string>(), {}, false});
  } else if (v->is_array()) {
    if (v->empty()) throw invalid_param("prompt", "'prompt' must not be empty");
    if ((*v)[0].is_number_integer()) {
      prompts.push_back({"", token_array(*v, "prompt"), true});
    } else {
      for (const json& item : *v) {
        if (item.is_string()) {
          prompts.push_back({item.get<std::string>(), {}, false});
        } else if (item.is_array()) {
          prompts.push_back({"", token_array(item, "prompt"), true});
        } else {
          throw wrong_type("prompt", expected, *v);
        }
      }
    }
  } else {
    throw wrong_type("prompt", expected, *v);
  }
  return prompts;
}

// An image part's URL: {"image_url": {"url": "..."}} (OpenAI chat), {"image_url": "..."} (Responses'
// input_image and some clients).
std::string image_part_url(const json& part, const std::string& where) {
  const json* image = field(part, "image_url");
  if (image && image->is_object()) image = field(*image, "url");
  if (!image || !image->is_string())
    throw invalid_param(where, where + ": an image content part needs 'image_url': {\"url\": \"data:image/...;base64,...\"}");
  return image->get<std::string>();
}

std::string message_content(const json& message, size_t index, std::vector<ImageInput>* images) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return "";  // e.g. an assistant turn that only called tools
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw wrong_type(where, "a string or an array of content parts", *it);
  std::string text;
  for (size_t p = 0; p < it->size(); ++p) {
    const json& part = (*it)[p];
    const std::string part_where = where + "[" + std::to_string(p) + "]";
    if (!part.is_object()) throw wrong_type(part_where, "a content part object", part);
    const auto type = get_string(part, "type");
    if (type == "image_url" || type == "input_image" || type == "image") {
      // The template sees a marker where the image goes; the generation job checks the model takes
      // images and puts the encoder's rows there (never dropped silently).
      if (images == nullptr) throw invalid_param(part_where, part_where + ": image parts belong to user messages");
      images->push_back({part_where, image_part_url(part, part_where)});
      text += private_image_marker();
      continue;
    }
    if (type != "text") {
      throw invalid_param(part_where, "content parts of type '" + type.value_or("?") + "' are not supported (only 'text')");
    }
    const json* t = field(part, "text");
    if (!t || !t->is_string()) throw invalid_param(part_where, "a text content part needs a string 'text'");
    text += t->get<std::string>();
  }
  return text;
}

std::vector<chat::ChatMessage> parse_messages(const json& body, std::vector<ImageInput>* images) {
  const json* v = field(body, "messages");
  if (!v) throw invalid_param("messages", "'messages' is required");
  if (!v->is_array()) throw wrong_type("messages", "an array of messages", *v);
  if (v->empty()) throw invalid_param("messages", "'messages' must hold at least one message");
  std::vector<chat::ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw wrong_type(where, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) throw invalid_param(where + ".role", where + " needs a string 'role'");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      throw invalid_param(where + ".role", "unknown role '" + r + "' (allowed: system, developer, user, assistant, tool)");
    }
    messages.push_back({r, message_content(m, i, r == "user" ? images : nullptr)});
  }
  return messages;
}

}  // namespace

nlohmann::json parse_json_body(const std::string& body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::parse_error& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

GenerationParams parse_completion_request(const nlohmann::json& body) {
  GenerationParams p;
  p.endpoint = Endpoint::completions;
  parse_common(body, p);
  p.prompts = parse_prompts(body);
  // Legacy completions: `logprobs` is the number of alternatives (0 = only the chosen token's).
  if (auto n = get_int(body, "logprobs", 0, kMaxTopLogprobs)) {
    p.logprobs = true;
    p.top_logprobs = *n;
  }
  p.echo = get_bool(body, "echo").value_or(false);
  if (p.echo && p.stream) throw invalid_param("echo", "'echo' cannot be combined with 'stream'");
  // OpenAI's insertion: the completion goes between the prompt and the suffix (fill-in-the-middle).
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) {
    for (const PromptInput& prompt : p.prompts) {
      if (prompt.is_tokens) throw invalid_param("suffix", "'suffix' needs the prompt as text, not token ids");
    }
    if (p.echo) throw invalid_param("suffix", "'suffix' cannot be combined with 'echo'");
    p.suffix = *suffix;
  }
  if (auto best_of = get_int(body, "best_of", 1, kMaxChoices); best_of && *best_of != p.n) {
    throw invalid_param("best_of", "'best_of' other than n is not supported by this server");
  }
  return p;
}

GenerationParams parse_infill_request(const nlohmann::json& body) {
  GenerationParams p;
  p.endpoint = Endpoint::completions;
  parse_common(body, p);
  if (auto n_predict = get_int(body, "n_predict", -1, kMaxTokensLimit); n_predict && *n_predict > 0 && !p.max_tokens) p.max_tokens = *n_predict;
  for (const char* key : {"input_prefix", "input_suffix"}) {
    const json* v = field(body, key);
    if (v == nullptr) throw invalid_param(key, std::string("'") + key + "' is required");
    if (!v->is_string()) throw wrong_type(key, "a string", *v);
  }
  p.prompts.push_back({body["input_prefix"].get<std::string>(), {}, false});
  p.suffix = body["input_suffix"].get<std::string>();
  if (auto prompt = get_string(body, "prompt")) p.infill_prompt = *prompt;
  if (const json* extra = field(body, "input_extra")) {
    if (!extra->is_array()) throw wrong_type("input_extra", "an array of {\"filename\": string, \"text\": string}", *extra);
    for (size_t i = 0; i < extra->size(); ++i) {
      const json& chunk = (*extra)[i];
      const std::string where = "input_extra[" + std::to_string(i) + "]";
      if (!chunk.is_object() || !chunk.contains("text") || !chunk["text"].is_string())
        throw invalid_param("input_extra", "'" + where + "' must be an object with a string 'text'");
      if (chunk.contains("filename") && !chunk["filename"].is_string())
        throw invalid_param("input_extra", "'" + where + ".filename' must be a string");
      p.infill_files.push_back({chunk.value("filename", std::string()), chunk["text"].get<std::string>()});
    }
  }
  return p;
}

GenerationParams parse_chat_request(const nlohmann::json& body) {
  GenerationParams p;
  p.endpoint = Endpoint::chat;
  parse_common(body, p);
  // The newer name wins over the deprecated one, as in OpenAI's API.
  if (auto m = get_int(body, "max_completion_tokens", std::numeric_limits<int64_t>::min(), kMaxTokensLimit)) {
    if (*m < 1) throw invalid_param("max_completion_tokens", "'max_completion_tokens' must be at least 1, got " + std::to_string(*m));
    p.max_tokens = *m;
  }
  p.messages = parse_messages(body, &p.images);
  p.logprobs = get_bool(body, "logprobs").value_or(false);
  if (auto n = get_int(body, "top_logprobs", 0, kMaxTopLogprobs)) {
    if (!p.logprobs && *n > 0) throw invalid_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p.top_logprobs = *n;
  }
  return p;
}

TokenizeParams parse_tokenize_request(const nlohmann::json& body) {
  TokenizeParams p;
  const json* v = field(body, "content");
  if (!v) throw invalid_param("content", "'content' is required");
  if (!v->is_string()) throw wrong_type("content", "a string", *v);
  p.content = v->get<std::string>();
  p.add_special = get_bool(body, "add_special").value_or(true);
  p.with_pieces = get_bool(body, "with_pieces").value_or(false);
  return p;
}

std::vector<int64_t> parse_detokenize_request(const nlohmann::json& body) {
  const json* v = field(body, "tokens");
  if (!v) throw invalid_param("tokens", "'tokens' is required");
  if (!v->is_array()) throw wrong_type("tokens", "an array of token ids", *v);
  std::vector<int64_t> ids;
  for (const json& t : *v) {
    if (!t.is_number_integer()) throw wrong_type("tokens", "an array of token ids", *v);
    ids.push_back(t.is_number_unsigned() && t.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                      ? std::numeric_limits<int64_t>::max()
                      : t.get<int64_t>());
  }
  return ids;
}

const std::vector<std::string>& extension_fields() {
  static const std::vector<std::string> fields = {
      "top_k", "min_p", "seed", "ignore_eos", "repetition_penalty", "presence_penalty", "frequency_penalty", "logit_bias",
      "top_n_sigma", "xtc_probability", "xtc_threshold", "dry_multiplier", "dry_base", "dry_allowed_length",
      "dry_penalty_last_n", "dry_sequence_breakers", "mirostat", "mirostat_tau", "mirostat_eta", "structured_outputs",
      "guided_json", "guided_json_object", "guided_regex", "guided_choice", "guided_grammar", "chat_template_kwargs"};
  return fields;
}

GenerationParams parse_generation_request(const std::string& raw_body, Endpoint endpoint) {
  const json body = parse_json_body(raw_body);
  GenerationParams params = endpoint == Endpoint::chat ? parse_chat_request(body) : parse_completion_request(body);
  const auto ordered = nlohmann::ordered_json::parse(raw_body);
  params.structured = parse_structured_output(ordered);
  if (endpoint == Endpoint::chat) {
    params.tools = parse_tool_request(ordered);
    params.chat_context = template_context(ordered, params.tools);
    // vLLM's chat_template_kwargs: extra template variables such as enable_thinking.
    if (auto kwargs = ordered.find("chat_template_kwargs"); kwargs != ordered.end() && !kwargs->is_null()) {
      if (!kwargs->is_object()) throw invalid_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      for (const auto& [key, value] : kwargs->items()) {
        if (key == "messages" || key == "tools") continue;  // the request's own
        params.chat_context[key] = value;
      }
    }
  } else if (ordered.contains("tools") && !ordered["tools"].is_null()) {
    throw invalid_param("tools", "'tools' belongs to /v1/chat/completions");
  }
  return params;
}

}  // namespace loom::server
