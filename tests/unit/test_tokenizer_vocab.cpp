// llama.cpp's tokenizer reference suites (../shared/testdata/vocab): every case must match id for id.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// NAME.gguf.inp: cases separated by "\n__ggml_vocab_test__\n" (the file ends with one, so a case may
// itself be "" or "\n"). NAME.gguf.out: one line of space-separated ids per case.
struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<VocabCase> read_cases(const std::filesystem::path& inp, const std::filesystem::path& out) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string inputs = read_all(inp);
  std::vector<VocabCase> cases;
  for (size_t pos = 0; pos < inputs.size();) {
    size_t next = inputs.find(sep, pos);
    if (next == std::string::npos) next = inputs.size();
    cases.push_back({inputs.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(read_all(out));
  std::string line;
  for (auto& c : cases) {
    REQUIRE(std::getline(lines, line));
    std::istringstream ids(line);
    int32_t id = 0;
    while (ids >> id) c.ids.push_back(id);
  }
  return cases;
}

void run_suite(const std::string& name) {
  const auto testdata = loom::test::shared_testdata();
  if (!testdata) {
    WARN("../shared/testdata is absent: skipping the " << name << " vocabulary suite");
    return;
  }
  const auto dir = *testdata / "vocab";
  const auto gguf_path = dir / ("ggml-vocab-" + name + ".gguf");
  if (!std::filesystem::exists(gguf_path)) {
    WARN(gguf_path.string() << " is absent: skipping");
    return;
  }
  const auto file = loom::gguf::GgufFile::open(gguf_path);
  const auto tokenizer = loom::Tokenizer::from_gguf(file);
  const auto cases = read_cases(dir / ("ggml-vocab-" + name + ".gguf.inp"), dir / ("ggml-vocab-" + name + ".gguf.out"));
  REQUIRE(cases.size() > 10);
  size_t n_pass = 0;
  for (const auto& c : cases) {
    INFO("suite " << name << ", text: '" << c.text << "'");
    const auto ids = tokenizer->encode(c.text, false, false);
    CHECK(ids == c.ids);
    if (ids == c.ids) ++n_pass;
    // Decoding gives the text back for these vocabularies (SPM drops its added leading space).
    if (tokenizer->kind() == loom::tokenizer::VocabKind::bpe) CHECK(tokenizer->decode(ids) == c.text);
  }
  WARN(name << ": " << n_pass << "/" << cases.size() << " reference cases pass");
}

}  // namespace

TEST_CASE("vocab suite: llama-spm (SentencePiece)", "[tokenizer]") { run_suite("llama-spm"); }
TEST_CASE("vocab suite: gpt-2 (byte-level BPE)", "[tokenizer]") { run_suite("gpt-2"); }
TEST_CASE("vocab suite: starcoder (BPE, digits split)", "[tokenizer]") { run_suite("starcoder"); }
