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
    PromptImage placed;
    placed.first = static_cast<uint32_t>(out.tokens.size());
    placed.n_rows = image.n_rows;
    placed.rows = image.rows;
    placed.non_causal = format.non_causal;
    const std::vector<int32_t> ids = image_placeholder_tokens(image.hash, image.n_rows, tokenizer.n_vocab());
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.images.push_back(std::move(placed));
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
