// tokenizer.json's byte-level pre-tokenizers named as llama.cpp names them, by what they do: the
// published forms of the common ones, the forms written differently that split alike, and what Loom
// refuses, by name. (Real vocabularies end to end: tests/server/test_hf_tokenizers.py.)
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include <fstream>

#include "common/error.h"
#include "hf/hf_checkpoint.h"
#include "hf/pre_tokenizer_match.h"
#include "test_model_helpers.h"

using namespace loom;
using nlohmann::json;

namespace {

std::string name_of(const json& pre, bool ignore_merges = false) {
  return hf::matching_pre_tokenizer(hf::byte_level_split_patterns(pre, "tokenizer.json"), ignore_merges, "tokenizer.json");
}

json split_then_bytes(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

const char* kQwen2 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kLlama3 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

TEST_CASE("hf: byte-level pre-tokenizers are named by the pieces they make", "[hf]") {
  CHECK(name_of({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}) == "gpt-2");
  CHECK(name_of(split_then_bytes(kQwen2)) == "qwen2");
  CHECK(name_of(split_then_bytes(kLlama3), true) == "llama-bpe");
  // The same split without Llama 3's ignore_merges is another vocabulary's (llama.cpp's smaug/dbrx kind).
  CHECK(name_of(split_then_bytes(kLlama3), false) != "llama-bpe");
  const json digits_then_bytes = {{"type", "Sequence"},
                                  {"pretokenizers",
                                   {{{"type", "Digits"}, {"individual_digits", true}},
                                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  CHECK(name_of(digits_then_bytes) == "starcoder");
  // Written without the case-insensitive group, as llama.cpp's own table spells Qwen2's: the same name.
  CHECK(name_of(split_then_bytes(R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")) ==
        "qwen2");
}

TEST_CASE("hf: a pre-tokenizer Loom cannot name or run is refused saying what it is", "[hf]") {
  CHECK_THROWS_WITH(name_of(split_then_bytes(R"(\p{L}+|\s+|.)")), Catch::Contains("tokenizer.json: its pre-tokenizer (") &&
                                                                       Catch::Contains("is none of the") && Catch::Contains("llama.cpp names"));
  CHECK_THROWS_WITH(name_of({{"type", "Whitespace"}}), Catch::Contains("pre-tokenizer 'Whitespace' in a byte-level BPE tokenizer"));
  CHECK_THROWS_WITH(name_of({{"type", "ByteLevel"}, {"add_prefix_space", true}}), Catch::Contains("add_prefix_space"));
  CHECK_THROWS_WITH(name_of({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}}), Catch::Contains("behavior 'Removed'"));
  CHECK_THROWS_WITH(name_of(nullptr), Catch::Contains("without a pre_tokenizer"));
}

TEST_CASE("hf: a config.json value of the wrong type is an error naming the folder", "[hf]") {
  const auto dir = test::scratch_dir("hf-wrong-type");
  std::ofstream(dir / "config.json") << R"({"model_type": ["qwen2"]})";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains(dir.string() + ": a value of the wrong type in its JSON files"));
  std::ofstream(dir / "config.json") << R"({"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 1, "intermediate_size": 128,
                                           "num_attention_heads": 4, "rms_norm_eps": 1e-6, "vocab_size": 10, "hidden_act": 7})";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("a value of the wrong type") && Catch::Contains("type must be string"));
}
