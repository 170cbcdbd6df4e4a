// The bodies of /tokenize and /detokenize (llama-server's shapes), shared by the chat and the
// embedding server: {"content", "add_special", "with_pieces"} -> {"tokens"}; {"tokens"} -> {"content"}.
#pragma once

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace loom::server {

// The content's ids (specials in the text parsed), or {"id", "piece"} objects with with_pieces.
// ApiError (400) naming the field for a bad body.
nlohmann::json tokenize_reply(const Tokenizer& tokenizer, const nlohmann::json& body);
// The text of the ids; ApiError (400) naming an id outside the vocabulary.
nlohmann::json detokenize_reply(const Tokenizer& tokenizer, const nlohmann::json& body);

}  // namespace loom::server
