// llama.cpp's POST /infill, which editor plugins (llama.vim, llama.vscode) send for code completion
// at the cursor: input_prefix, input_suffix, input_extra (other files of the project), prompt. The
// prompt is laid out with the model's fill-in-the-middle tokens (fill_in_middle.h) and the answer
// comes in llama.cpp's completion shape ({"content", "stop", "tokens_predicted", ...}), whole or as
// server-sent events without OpenAI's [DONE].
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/generation.h"
#include "server/model_registry.h"

namespace loom::server {

void add_infill_route(httplib::Server& http, ModelRegistry& models);

// One streamed event in llama.cpp's shape; `stop` true on the choice's last event.
nlohmann::json llama_completion_chunk(GenerationJob& job, const ChoiceEvent& event);

}  // namespace loom::server
