// A chat request's images, from their URLs to the encoder's rows: data: URLs (base64, as OpenAI's API
// sends them) and file:// URLs inside [server] allowed_local_media_path; Loom fetches nothing over the
// network. Every failure is an ApiError 400 naming the part (messages[i].content[j]) and the limit.
#pragma once

#include <vector>

#include "config/config.h"
#include "engine/engine.h"
#include "server/openai_parse.h"

namespace loom::server {

std::vector<EncodedImage> resolve_images(Engine& engine, const ServerSettings& settings, const std::vector<ImageInput>& images);

}  // namespace loom::server
