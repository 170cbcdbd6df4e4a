// `loom bench --image FILE`: the vision encoder's time per image and the time to first token of a
// prompt holding the image (bench_image.cpp).
#pragma once

#include <filesystem>
#include <string>

#include "config/config.h"

namespace loom::host {

// Prints the figures (and writes them as JSON to json_path when given); returns the exit code.
int run_image_bench(Config config, const std::filesystem::path& model_path, const std::string& image_path, int rounds,
                    const std::string& json_path);

}  // namespace loom::host
