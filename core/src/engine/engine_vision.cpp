// The engine's vision encoder ([model] mmproj): images in requests become embedding rows in prompts.
// The encoder runs on its own instance of the engine's backend plugin, so a caller's thread can encode
// while the engine loop steps (a stream is used by one thread at a time). Rows are cached by image
// content (a second turn with the same image does not encode it again), within kImageCacheBytes.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <xxhash.h>

#include "backend/backend.h"
#include "common/error.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "plugin/plugin_registry.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_encoder.h"

namespace loom {

namespace {

constexpr uint64_t kImageCacheBytes = 128ull << 20;  // about 50 Gemma 3 4B images

// [model] mmproj, else the one mmproj*.gguf beside the model (llama.cpp's download layout), else none.
std::filesystem::path find_mmproj(const Config& config, const std::filesystem::path& model_path) {
  if (!config.model.mmproj.empty()) return config.model.mmproj;
  std::filesystem::path found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(model_path.parent_path().empty() ? "." : model_path.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec) || !name.starts_with("mmproj") || entry.path().extension() != ".gguf") continue;
    if (!found.empty()) return {};  // several: which one is meant is for the config to say
    found = entry.path();
  }
  return found;
}

// A hash of the projector file: its size and its first and last 64 KiB (metadata, the first and last
// tensors). Mixed into every image's hash, so rows from another projector are never taken for these,
// in the encoder's cache or (through the placeholder ids) in the prefix cache and its disk tier.
uint64_t projector_fingerprint(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  std::vector<char> head(std::min<uint64_t>(size, 64u << 10)), tail(head.size());
  in.seekg(0);
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  in.seekg(static_cast<std::streamoff>(size - tail.size()));
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &size, sizeof size);
  XXH3_64bits_update(state, head.data(), head.size());
  XXH3_64bits_update(state, tail.data(), tail.size());
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

}  // namespace

// Read before the KV pool is planned (its rings must take an image at once); 0 without a projector,
// or with one open_vision will refuse or skip (it says why there).
int64_t Engine::largest_image_rows(const Config& config, const std::filesystem::path& model_path) {
  const std::filesystem::path mmproj = find_mmproj(config, model_path);
  if (mmproj.empty()) return 0;
  try {
    return vision::read_mmproj_info(gguf::GgufFile::open(mmproj)).largest_part_rows();
  } catch (const Error&) {
    return 0;
  }
}

// A projector found beside the model that does not fit it (another model's, a type Loom does not run)
// is skipped with a warning, and the model serves text as before; one named in the config is an error.
void Engine::open_vision(const Config& config, const std::filesystem::path& model_path) {
  const std::filesystem::path mmproj = find_mmproj(config, model_path);
  if (mmproj.empty()) return;
  try {
    load_vision(config, mmproj);
  } catch (const Error& e) {
    if (!config.model.mmproj.empty()) throw;
    vision_.reset();
    vision_backend_.reset();
    image_format_ = {};
    info_.mmproj_path.clear();
    info_.image_rows = 0;
    info_.projector.clear();
    std::fprintf(stderr, "loom: warning: not using %s found beside the model (it takes no images): %s\n", mmproj.string().c_str(), e.what());
  }
}

void Engine::load_vision(const Config& config, const std::filesystem::path& mmproj) {
  vision_backend_ = Backend::create(find_backend_plugin(config, config.backend.name), backend_config_json(config));
  vision_ = vision::VisionEncoder::load(mmproj, *vision_backend_);
  const vision::MmprojInfo& v = vision_->info();
  const ModelInfo& m = model_->info();
  const std::string where = mmproj.string() + ": ";
  if (v.n_embd_text != m.dim)
    throw Error(where + "the projector's rows have " + std::to_string(v.n_embd_text) + " values, but the text model " +
                info_.model_name + " takes " + std::to_string(m.dim));
  if (int64_t(v.deepstack_layers.size()) != m.n_deepstack)
    throw Error(where + "the projector has " + std::to_string(v.deepstack_layers.size()) + " deepstack layers, but the text model " +
                info_.model_name + " takes " + std::to_string(m.n_deepstack));
  if (v.projector == vision::ProjectorType::gemma3) {
    image_format_.begin_token = tokenizer_->find_token("<start_of_image>");
    image_format_.end_token = tokenizer_->find_token("<end_of_image>");
    if (image_format_.begin_token < 0 || image_format_.end_token < 0)
      throw Error(where + "a gemma3 projector needs the text model's <start_of_image> and <end_of_image> tokens");
    image_format_.non_causal = true;
  } else if (v.projector == vision::ProjectorType::gemma4v) {
    image_format_.begin_token = tokenizer_->find_token("<|image>");
    image_format_.end_token = tokenizer_->find_token("<image|>");
    if (image_format_.begin_token < 0 || image_format_.end_token < 0)
      throw Error(where + "a gemma4v projector needs the text model's <|image> and <image|> tokens");
    // As mtmd decodes them: all image rows see each other, except in E2B and E4B (widths 1536, 2560).
    image_format_.non_causal = m.dim != 1536 && m.dim != 2560;
  } else if (v.projector == vision::ProjectorType::qwen25vl || v.projector == vision::ProjectorType::qwen3vl) {
    const std::string type = vision::projector_type_name(v.projector);
    image_format_.begin_token = tokenizer_->find_token("<|vision_start|>");
    image_format_.end_token = tokenizer_->find_token("<|vision_end|>");
    if (image_format_.begin_token < 0 || image_format_.end_token < 0)
      throw Error(where + "a " + type + " projector needs the text model's <|vision_start|> and <|vision_end|> tokens");
    // Its rows turn by their place in the image (mtmd's M-RoPE positions): the text model must be M-RoPE.
    if (!m.mrope)
      throw Error(where + "a " + type + " projector needs a text model with M-RoPE (architecture " +
                  (v.projector == vision::ProjectorType::qwen3vl ? "qwen3vl" : "qwen2vl") + "), not " + m.arch_name);
  } else if (v.projector == vision::ProjectorType::pixtral) {
    image_format_.end_token = tokenizer_->find_token("[IMG_END]");  // mtmd's layout: the rows, then [IMG_END]
    if (image_format_.end_token < 0) throw Error(where + "a pixtral projector needs the text model's [IMG_END] token");
  } else if (v.projector == vision::ProjectorType::idefics3) {
    // mtmd's idefics3 layout (transformers' Idefics3Processor): tiles after "<fake_token_around_image>
    // <row_Y_col_X>", "\n" between rows of tiles, then "\n\n<fake_token_around_image><global-img>", the
    // overview and "<fake_token_around_image>". mtmd looks the single tokens up by their text.
    auto by_piece = [&](const std::string& text) {
      for (int32_t id = 0; id < tokenizer_->n_vocab(); ++id)
        if (tokenizer_->token_to_piece(id, true) == text) return id;
      std::string shown;
      for (const char ch : text) shown += ch == '\n' ? std::string("\\n") : std::string(1, ch);
      throw Error(where + "an idefics3 projector needs a token '" + shown + "' in the text model's vocabulary");
    };
    const int32_t around = by_piece("<fake_token_around_image>");
    image_format_.tile_prefix = "<fake_token_around_image><row_%d_col_%d>";
    image_format_.row_end = {by_piece("\n")};
    image_format_.overview_begin = {by_piece("\n\n"), around, by_piece("<global-img>")};
    image_format_.overview_end = {around};
  }
  if (image_format_.non_causal && !model_->supports_non_causal())
    throw Error(where + "the " + std::string(vision::projector_type_name(v.projector)) + " projector's images are decoded non-causally, which backend '" +
                backend_->name() + "' cannot do (ABI 1.9 LOOM_SEQ_NON_CAUSAL)");
  // An image's rows go in one chunk (a tiled image's, each tile's): the scheduler must be able to take
  // them at once. (Projectors of any size are checked for their largest square image; a longer one is
  // refused per request.)
  const auto rows = static_cast<uint64_t>(v.largest_part_rows());
  if (rows > static_cast<uint64_t>(config.scheduler.max_batched_tokens))
    throw Error(where + "an image is " + std::to_string(rows) + " rows, more than [scheduler] max_batched_tokens = " +
                std::to_string(config.scheduler.max_batched_tokens) + "; raise it to at least " + std::to_string(rows));
  if (window_rows_ > 0 && rows + draft_k_ > window_rows_)
    throw Error(where + "an image is " + std::to_string(rows) + " rows, more than a sliding-window ring lets one sequence run per step (" +
                std::to_string(window_rows_) + "); raise [kv] window_chunk_tokens");
  info_.mmproj_path = mmproj.string();
  info_.image_rows = static_cast<uint32_t>(v.square_image_rows());
  info_.projector = vision::projector_type_name(v.projector);
  projector_hash_ = projector_fingerprint(mmproj);
}

EncodedImage Engine::encode_image(const vision::RgbImage& image, bool use_cache) {
  if (!vision_) throw Error("this model takes no images (text-only: no vision encoder is loaded)");
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &projector_hash_, sizeof projector_hash_);
  const uint32_t dims[2] = {image.width, image.height};
  XXH3_64bits_update(state, dims, sizeof dims);
  XXH3_64bits_update(state, image.pixels.data(), image.pixels.size());
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);

  std::lock_guard lock(vision_mutex_);
  for (auto it = image_cache_.begin(); use_cache && it != image_cache_.end(); ++it) {
    if (it->hash != hash) continue;
    image_cache_.splice(image_cache_.begin(), image_cache_, it);  // most recently used first
    std::lock_guard stats_lock(mutex_);
    ++stats_.image_cache_hits;
    return image_cache_.front();
  }
  const auto start = std::chrono::steady_clock::now();
  EncodedImage encoded;
  encoded.hash = hash;
  encoded.rows = std::make_shared<const std::vector<float>>(vision_->encode(image));
  encoded.n_rows = static_cast<uint32_t>(encoded.rows->size() / static_cast<size_t>(vision_->info().row_width()));
  const vision::TileGrid tiles = vision::tile_grid(vision_->info().preprocess, image.width, image.height);
  encoded.tile_columns = tiles.columns;
  encoded.tile_rows = tiles.rows;
  if (model_->info().mrope) {  // the merged grid the rows fill, row by row
    const vision::MmprojInfo& v = vision_->info();
    const vision::ImageSize size = vision::target_size(v.preprocess, image.width, image.height);
    encoded.grid_columns = size.width / v.patch_size / v.merge;
    encoded.grid_rows = size.height / v.patch_size / v.merge;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  image_cache_.push_front(encoded);
  image_cache_bytes_ += encoded.rows->size() * sizeof(float);
  while (image_cache_bytes_ > kImageCacheBytes && image_cache_.size() > 1) {
    image_cache_bytes_ -= image_cache_.back().rows->size() * sizeof(float);
    image_cache_.pop_back();
  }
  std::lock_guard stats_lock(mutex_);
  ++stats_.images_encoded;
  stats_.encoder_seconds += seconds;
  return encoded;
}

}  // namespace loom
