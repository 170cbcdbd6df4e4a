#include "engine/image_prompt.h"

#include <cstdio>
#include <random>
#include <string>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace loom {

std::vector<int32_t> image_placeholder_tokens(uint64_t image_hash, uint32_t n_rows, int32_t n_vocab) {
  std::vector<int32_t> ids(n_rows);
  for (uint32_t i = 0; i < n_rows; ++i) {
    // SplitMix64 of (hash, row): well spread, so two images share a row's id only by chance (1/n_vocab).
    uint64_t z = image_hash + 0x9e3779b97f4a7c15ull * (uint64_t(i) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    ids[i] = static_cast<int32_t>((z ^ (z >> 31)) % static_cast<uint64_t>(n_vocab));
  }
  return ids;
}

std::string_view private_image_marker() {
  static const std::string marker = [] {
    std::random_device device;
    const uint64_t tag = (uint64_t(device()) << 32) ^ device();
    char buf[48];
    std::snprintf(buf, sizeof buf, "<__media_%016llx__>", static_cast<unsigned long long>(tag));
    return std::string(buf);
  }();
  return marker;
}

namespace {

// `n_rows` rows as one piece of the prompt, its placeholder ids drawn from `hash`.
void place_rows(ImagePrompt& out, std::shared_ptr<const std::vector<float>> rows, uint32_t n_rows, uint64_t hash, int32_t n_vocab,
                bool non_causal) {
  PromptImage placed;
  placed.first = static_cast<uint32_t>(out.tokens.size());
  placed.n_rows = n_rows;
  placed.rows = std::move(rows);
  placed.non_causal = non_causal;
  const std::vector<int32_t> ids = image_placeholder_tokens(hash, n_rows, n_vocab);
  out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
  out.images.push_back(std::move(placed));
}

// mtmd's layout of a tiled image: each tile after its "row, column" text, a row end between rows of
// tiles, then the overview between its markers. Each tile (and the overview) is its own piece of rows.
void place_tiled_image(const Tokenizer& tokenizer, const EncodedImage& image, const ImagePromptFormat& format, ImagePrompt& out) {
  const uint32_t n_parts = image.tile_columns * image.tile_rows + 1;
  if (image.n_rows % n_parts != 0) throw Error("a tiled image's rows do not divide into its " + std::to_string(n_parts) + " parts");
  const uint32_t part_rows = image.n_rows / n_parts;
  const size_t width = image.rows->size() / image.n_rows;
  auto part = [&](uint32_t index) {
    const auto first = image.rows->begin() + static_cast<std::ptrdiff_t>(size_t(index) * part_rows * width);
    const uint64_t hash = image.hash ^ (0x9e3779b97f4a7c15ull * (uint64_t(index) + 1));  // each part its own ids
    place_rows(out, std::make_shared<const std::vector<float>>(first, first + static_cast<std::ptrdiff_t>(size_t(part_rows) * width)),
               part_rows, hash, tokenizer.n_vocab(), format.non_causal);
  };
  for (uint32_t y = 0; y < image.tile_rows; y++) {
    for (uint32_t x = 0; x < image.tile_columns; x++) {
      std::string prefix = format.tile_prefix;  // its two "%d": the tile's row, then its column
      for (const uint32_t value : {y + 1, x + 1}) {
        const size_t slot = prefix.find("%d");
        if (slot != std::string::npos) prefix.replace(slot, 2, std::to_string(value));
      }
      const std::vector<int32_t> tokens = tokenizer.encode(prefix, false, true);
      out.tokens.insert(out.tokens.end(), tokens.begin(), tokens.end());
      part(y * image.tile_columns + x);
    }
    if (y + 1 < image.tile_rows) out.tokens.insert(out.tokens.end(), format.row_end.begin(), format.row_end.end());
  }
  out.tokens.insert(out.tokens.end(), format.overview_begin.begin(), format.overview_begin.end());
  part(n_parts - 1);
  out.tokens.insert(out.tokens.end(), format.overview_end.begin(), format.overview_end.end());
}

}  // namespace

ImagePrompt build_image_prompt(const Tokenizer& tokenizer, std::string_view text, const std::vector<EncodedImage>& images,
                               const ImagePromptFormat& format, std::string_view marker_text) {
  ImagePrompt out;
  size_t next_image = 0, at = 0;
  while (true) {
    const size_t marker = text.find(marker_text, at);
    const std::string_view piece = text.substr(at, marker == std::string_view::npos ? std::string_view::npos : marker - at);
    const std::vector<int32_t> tokens = tokenizer.encode(piece, false, true);
    out.tokens.insert(out.tokens.end(), tokens.begin(), tokens.end());
    if (marker == std::string_view::npos) break;
    if (next_image >= images.size())
      throw Error("the prompt holds more image markers than the " + std::to_string(images.size()) + " images sent");
    const EncodedImage& image = images[next_image++];
    if (format.begin_token >= 0) out.tokens.push_back(format.begin_token);
    if (image.tile_columns > 0) {
      place_tiled_image(tokenizer, image, format, out);
    } else {
      place_rows(out, image.rows, image.n_rows, image.hash, tokenizer.n_vocab(), format.non_causal);
      out.images.back().grid_columns = image.grid_columns;
      out.images.back().grid_rows = image.grid_rows;
    }
    if (format.end_token >= 0) out.tokens.push_back(format.end_token);
    at = marker + marker_text.size();
  }
  if (next_image != images.size())
    throw Error(std::to_string(images.size()) + " images were sent but the prompt places " + std::to_string(next_image) +
                " (the chat template dropped an image part)");
  // The template writes BOS itself when the model wants it; add one only if it did not.
  if (tokenizer.add_bos() && tokenizer.bos_id() >= 0 && (out.tokens.empty() || out.tokens.front() != tokenizer.bos_id())) {
    out.tokens.insert(out.tokens.begin(), tokenizer.bos_id());
    for (PromptImage& image : out.images) image.first += 1;
  }
  return out;
}

}  // namespace loom
