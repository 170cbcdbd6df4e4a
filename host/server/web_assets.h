// The web pages and the assets they share, embedded in the binary (host/server/web/*, by
// host/cmake/embed_web.cmake).
#pragma once

#include <string_view>

namespace loom::server::web {

std::string_view chat_page();    // GET /: chat with the served model
std::string_view engine_page();  // GET /engine: the engine's live state
std::string_view loom_css();     // GET /assets/loom.css: both pages' colours, buttons, top bar, banners, dialog
std::string_view loom_js();      // GET /assets/loom.js: both pages' error banner, API-key prompt and fetch

// The shared assets' ETags: a quoted hash of the bytes, fixed at build time, so a browser's copy is
// reused until the binary changes.
std::string_view loom_css_etag();
std::string_view loom_js_etag();

}  // namespace loom::server::web
