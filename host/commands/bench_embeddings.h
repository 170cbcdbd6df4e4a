// `loom bench --embeddings`: embedded tokens per second of a text encoder (bench_embeddings.cpp).
#pragma once

#include <filesystem>
#include <string>

#include "config/config.h"

namespace loom::host {

// Embeds 256 inputs of 16 to 256 tokens in batches of [scheduler] max_batched_tokens rows, --rounds
// times, and prints the median tokens/s (JSON to json_path when given). Without a model path, a
// synthetic bert of all-MiniLM-L6's shape. Returns the exit code.
int run_embedding_bench(const Config& config, const std::filesystem::path& model_path, int rounds, const std::string& json_path);

}  // namespace loom::host
