// The web pages embedded in the binary (host/server/web/*.html, by host/cmake/embed_web.cmake).
#pragma once

#include <string_view>

namespace loom::server::web {

std::string_view chat_page();    // GET /: chat with the served model
std::string_view engine_page();  // GET /engine: the engine's live state

}  // namespace loom::server::web
