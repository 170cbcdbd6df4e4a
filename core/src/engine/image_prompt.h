// Prompts with images: a template's text holding one marker per image (mtmd's "<__media__>") becomes
// tokens with each image's rows in place, wrapped as the projector's text model expects (Gemma 3:
// <start_of_image> rows <end_of_image>, mtmd's layout: no newlines added).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"

namespace loom {

class Tokenizer;

// mtmd's marker, for prompt text Loom writes itself (tests, `loom bench --image`).
inline constexpr std::string_view kImageMarker = "<__media__>";
// A marker no user's text holds: mtmd's with a random per-process tag inside. Chat messages put it
// where an image part goes, so a user who writes "<__media__>" gets those characters as text, not an
// image slot (nor a "more markers than images" refusal).
std::string_view private_image_marker();

// An image through the encoder: its rows and the hash of its pixels (the cache's and the prefix
// cache's key).
struct EncodedImage {
  uint64_t hash = 0;
  std::shared_ptr<const std::vector<float>> rows;  // [n_rows][the model's embd_row_width()]
  uint32_t n_rows = 0;
  // A tiled image (idefics3): columns x rows tiles of equal rows, row by row, then the overview's.
  uint32_t tile_columns = 0, tile_rows = 0;
  // The rows as a grid (M-RoPE projectors, PromptImage::grid_columns): 0 otherwise.
  uint32_t grid_columns = 0, grid_rows = 0;
};

// Where an image's rows go: the wrapper tokens (-1: none) and whether they are decoded non-causally.
// Tiled images (idefics3, mtmd's layout): before each tile the text `tile_prefix` with its 1-based row
// and column in place of its two "%d" (special tokens parsed), `row_end` after each row of tiles but the
// last, then `overview_begin`, the overview's rows and `overview_end`.
struct ImagePromptFormat {
  int32_t begin_token = -1;
  int32_t end_token = -1;
  bool non_causal = false;
  std::string tile_prefix;
  std::vector<int32_t> row_end, overview_begin, overview_end;
};

struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<PromptImage> images;
};

// The placeholder ids of an image's rows: a hash of (image hash, row) in [0, n_vocab). Different
// images give different ids (the prefix cache keys blocks by ids); the model never reads them.
std::vector<int32_t> image_placeholder_tokens(uint64_t image_hash, uint32_t n_rows, int32_t n_vocab);

// `text` split at each `marker`; each piece tokenized with special tokens parsed (and BOS first when
// the tokenizer adds one and the text does not start with it), each marker replaced by the next image.
// loom::Error when the markers and the images differ in number.
ImagePrompt build_image_prompt(const Tokenizer& tokenizer, std::string_view text, const std::vector<EncodedImage>& images,
                               const ImagePromptFormat& format, std::string_view marker = kImageMarker);

}  // namespace loom
