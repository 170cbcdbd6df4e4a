// OpenAI response bodies and streaming chunks, built from a GenerationJob's choices.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation.h"

namespace loom::server {

// JSON text that never throws on invalid UTF-8 (a token piece may be half a character): such bytes
// become U+FFFD.
std::string dump_json(const nlohmann::json& value);

nlohmann::json usage_json(const Usage& usage);

// Non-streaming bodies, once every choice has finished.
nlohmann::json completion_response(GenerationJob& job);
nlohmann::json chat_response(GenerationJob& job);

// Streaming: the chunks one engine event produces (possibly none), in order.
std::vector<nlohmann::json> stream_chunks(GenerationJob& job, const ChoiceEvent& event);
// The usage-only chunk sent last with stream_options.include_usage.
nlohmann::json usage_chunk(GenerationJob& job);

}  // namespace loom::server
