// Hugging Face folders: safetensors parsing refuses every malformed file by name, a GgufFile over
// external tensor data reads them in place, and a folder Loom cannot map says why. (The real model,
// all-MiniLM-L6-v2, is checked end to end by tests/server/test_hf_embeddings.py.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "common/error.h"
#include "embed/text_encoder.h"
#include "gguf/gguf_writer.h"
#include "hf/hf_checkpoint.h"
#include "hf/safetensors_file.h"
#include "test_model_helpers.h"
#include "tokenizer/tokenizer.h"

using namespace loom;

namespace {

// A safetensors file: the 8-byte header length, the header, then `data`.
std::vector<uint8_t> safetensors(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string refusal(const std::vector<uint8_t>& bytes) {
  try {
    hf::SafetensorsFile::from_memory(bytes, "t.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("safetensors: tensors are read in place, and malformed files are refused naming the fault", "[hf]") {
  std::vector<uint8_t> data(24);
  for (size_t i = 0; i < data.size(); i++) data[i] = uint8_t(i);
  const auto good = safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"F16","shape":[4],"data_offsets":[16,24]},"__metadata__":{"format":"pt"}})", data);
  const hf::SafetensorsFile file = hf::SafetensorsFile::from_memory(good, "t.safetensors");
  REQUIRE(file.tensors().size() == 2);
  const hf::SafeTensor* b = file.find("b");
  REQUIRE(b != nullptr);
  CHECK(b->shape == std::vector<int64_t>{4});
  CHECK(b->data.size() == 8);
  CHECK(b->data[0] == 16);
  CHECK(hf::safetensors_dtype(b->dtype) == LOOM_DTYPE_F16);
  CHECK(hf::safetensors_dtype("I64") == -1);

  CHECK_THAT(refusal({1, 2, 3}), Catch::Contains("truncated"));
  CHECK_THAT(refusal(safetensors("{\"a\":", {})), Catch::Contains("not JSON"));
  std::vector<uint8_t> long_header = good;
  long_header[0] = 0xff, long_header[1] = 0xff;
  CHECK_THAT(refusal(long_header), Catch::Contains("the header claims"));
  CHECK_THAT(refusal(safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,40]}})", data)), Catch::Contains("tensor 'a' spans bytes 0..40"));
  CHECK_THAT(refusal(safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data)), Catch::Contains("need 12"));
  CHECK_THAT(refusal(safetensors(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,2]}})", data)), Catch::Contains("dtype 'Q4'"));
  CHECK_THAT(refusal(safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data)),
             Catch::Contains("overlap"));
  CHECK_THAT(refusal(safetensors(R"({"a":{"dtype":"F32","shape":[2]}})", data)), Catch::Contains("needs dtype, shape and data_offsets"));
  // A number the JSON parser cannot hold (found by fuzz.safetensors_parser) is an error like the others.
  CHECK_THAT(refusal(safetensors(R"({"w":{"dtype":9000001335842E0334}})", data)), Catch::Contains("not JSON"));
}

TEST_CASE("gguf: a file over external tensor data returns those bytes and checks their sizes", "[hf]") {
  gguf::GgufWriter writer;
  writer.set_string("general.architecture", "bert");
  writer.add_tensor_info("x", LOOM_DTYPE_F32, {2, 3});
  writer.add_tensor_info("y", LOOM_DTYPE_F16, {4});
  CHECK_THROWS_WITH(writer.to_bytes(), Catch::Contains("has no data"));
  std::vector<uint8_t> x(24, 7), y(8, 9);
  const gguf::GgufFile file = gguf::GgufFile::with_external_data(writer.to_header_bytes(), {x, y}, nullptr, "ext");
  CHECK(file.get_string("general.architecture") == "bert");
  const gguf::TensorInfo* t = file.find_tensor("y");
  REQUIRE(t != nullptr);
  CHECK(file.tensor_data(*t).data() == y.data());  // in place: no copy
  gguf::TensorInfo stranger = *t;
  CHECK_THROWS_WITH(file.tensor_data(stranger), Catch::Contains("is not one of this model's"));
  CHECK_THROWS_WITH(gguf::GgufFile::with_external_data(writer.to_header_bytes(), {x}, nullptr, "ext"), Catch::Contains("1 tensor data spans for 2 tensors"));
  CHECK_THROWS_WITH(gguf::GgufFile::with_external_data(writer.to_header_bytes(), {x, x}, nullptr, "ext"), Catch::Contains("tensor 'y': 24 data bytes"));
}

TEST_CASE("hf: a folder Loom cannot map is refused naming the file and the reason", "[hf]") {
  const auto dir = test::scratch_dir("hf-refusals");
  CHECK_FALSE(hf::is_checkpoint_dir(dir));
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("not a Hugging Face model folder (no config.json)"));
  std::ofstream(dir / "config.json") << R"({"model_type": "t5"})";
  CHECK(hf::is_checkpoint_dir(dir));
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("model_type 't5' is not one Loom reads from a Hugging Face folder yet") &&
                                                  Catch::Contains("qwen3_moe") && Catch::Contains("gemma3_text"));
  std::ofstream(dir / "config.json") << R"({"model_type": "bert", "num_hidden_layers": 1})";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("config.json: 'max_position_embeddings' is missing"));
  std::ofstream(dir / "config.json") << "{not json";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("config.json: not JSON"));
}

namespace {

// A tiny bert folder as Hugging Face lays one out: config.json, tokenizer.json (WordPiece), weights in
// one model.safetensors or in two shards named by model.safetensors.index.json.
void write_tiny_bert(const std::filesystem::path& dir, bool sharded) {
  std::filesystem::create_directories(dir);
  const int64_t hidden = 16, ff = 32, layers = 2, positions = 16;
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "cat", "sat", "##s", "!"};
  const auto n_vocab = int64_t(vocab.size());
  std::ofstream(dir / "config.json") << "{\"model_type\": \"bert\", \"hidden_size\": " << hidden << ", \"num_hidden_layers\": " << layers
                                     << ", \"num_attention_heads\": 2, \"intermediate_size\": " << ff << ", \"max_position_embeddings\": " << positions
                                     << ", \"vocab_size\": " << n_vocab << ", \"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\"}";
  std::string tok = R"({"model": {"type": "WordPiece", "vocab": {)";
  for (size_t i = 0; i < vocab.size(); i++) tok += (i ? ", \"" : "\"") + vocab[i] + "\": " + std::to_string(i);
  tok += R"(}}, "added_tokens": [)";
  for (int i = 0; i < 5; i++) tok += std::string(i ? ", " : "") + "{\"id\": " + std::to_string(i) + ", \"content\": \"" + vocab[size_t(i)] + "\", \"special\": true}";
  std::ofstream(dir / "tokenizer.json") << tok << "]}";
  // Tensors as PyTorch shapes them ([out, in]), deterministic values.
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
      {"embeddings.word_embeddings.weight", {n_vocab, hidden}}, {"embeddings.position_embeddings.weight", {positions, hidden}},
      {"embeddings.token_type_embeddings.weight", {2, hidden}}, {"embeddings.LayerNorm.weight", {hidden}}, {"embeddings.LayerNorm.bias", {hidden}}};
  for (int il = 0; il < layers; il++) {
    const std::string p = "encoder.layer." + std::to_string(il) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"})
      tensors.push_back({p + m + ".weight", {hidden, hidden}}), tensors.push_back({p + m + ".bias", {hidden}});
    tensors.push_back({p + "intermediate.dense.weight", {ff, hidden}}), tensors.push_back({p + "intermediate.dense.bias", {ff}});
    tensors.push_back({p + "output.dense.weight", {hidden, ff}}), tensors.push_back({p + "output.dense.bias", {hidden}});
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"})
      tensors.push_back({p + n + ".weight", {hidden}}), tensors.push_back({p + n + ".bias", {hidden}});
  }
  // Shard 1: the embeddings and layer 0; shard 2: layer 1 (or everything in one file).
  std::vector<std::string> shard_of(tensors.size());
  std::map<std::string, std::pair<std::string, std::vector<uint8_t>>> files;  // file -> (header, data)
  uint32_t seed = 1;
  for (size_t i = 0; i < tensors.size(); i++) {
    const auto& [name, shape] = tensors[i];
    const std::string file = !sharded ? "model.safetensors" : name.find("layer.1.") != std::string::npos ? "model-00002-of-00002.safetensors"
                                                                                                          : "model-00001-of-00002.safetensors";
    shard_of[i] = file;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    auto& [header, data] = files[file];
    const size_t begin = data.size();
    for (int64_t k = 0; k < count; k++) {
      seed = seed * 1664525u + 1013904223u;
      const float v = name.find("LayerNorm.weight") != std::string::npos ? 1.0f + float(seed >> 8) / float(1 << 24) * 0.2f - 0.1f
                                                                         : float(seed >> 8) / float(1 << 24) - 0.5f;
      const auto* b = reinterpret_cast<const uint8_t*>(&v);
      data.insert(data.end(), b, b + 4);
    }
    std::string dims;
    for (int64_t d : shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    header += (header.empty() ? "" : ",") + std::string("\"") + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  for (const auto& [file, content] : files) {
    const std::vector<uint8_t> bytes = safetensors("{" + content.first + "}", content.second);
    std::ofstream(dir / file, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  if (sharded) {
    std::string map;
    for (size_t i = 0; i < tensors.size(); i++) map += (i ? ",\"" : "\"") + tensors[i].first + "\":\"" + shard_of[i] + "\"";
    std::ofstream(dir / "model.safetensors.index.json") << "{\"metadata\": {}, \"weight_map\": {" << map << "}}";
  }
}

}  // namespace

TEST_CASE("hf: a bert folder's shards read as its single file does, and its WordPiece vocabulary tokenizes", "[hf]") {
  const auto whole = test::scratch_dir("hf-tiny-bert-whole"), sharded = test::scratch_dir("hf-tiny-bert-sharded");
  write_tiny_bert(whole, false);
  write_tiny_bert(sharded, true);
  const gguf::GgufFile a = hf::open_checkpoint(whole), b = hf::open_checkpoint(sharded);
  CHECK(a.get_uint("bert.pooling_type") == 2u);  // no sentence-transformers pooling: the [CLS] row
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); i++) {
    CHECK(a.tensors()[i].name == b.tensors()[i].name);
    const auto x = a.tensor_data(a.tensors()[i]), y = b.tensor_data(b.tensors()[i]);
    CHECK(std::equal(x.begin(), x.end(), y.begin(), y.end()));
  }
  // [CLS] the cat ##s sat [SEP], pieces in the converter's layout.
  const auto tokenizer = Tokenizer::from_gguf(b);
  CHECK(tokenizer->encode("The cats sat!", true, false) == std::vector<int32_t>{2, 7, 8, 10, 9, 11, 3});
  auto backend = test::cpu_backend();
  auto ea = embed::TextEncoder::load(a, *backend, 16), eb = embed::TextEncoder::load(b, *backend, 16);
  CHECK(ea->embed({{2, 5, 6, 3}}, true) == eb->embed({{2, 5, 6, 3}}, true));
  // A shard the index names but the folder lacks; no weights at all.
  std::filesystem::remove(sharded / "model-00002-of-00002.safetensors");
  CHECK_THROWS_WITH(hf::open_checkpoint(sharded), Catch::Contains("model-00002-of-00002.safetensors"));
  std::filesystem::remove(sharded / "model.safetensors.index.json");
  CHECK_THROWS_WITH(hf::open_checkpoint(sharded), Catch::Contains("no model.safetensors or model.safetensors.index.json"));
}

TEST_CASE("hf: a model's name is its file's stem, or its folder's whole name", "[hf]") {
  const auto dir = test::scratch_dir("hf-names") / "bge-small-en-v1.5";
  std::filesystem::create_directories(dir);
  CHECK(hf::model_name_of(dir) == "bge-small-en-v1.5");
  CHECK(hf::model_name_of(dir.string() + "/") == "bge-small-en-v1.5");
  CHECK(hf::model_name_of(dir / ".") == "bge-small-en-v1.5");
  CHECK(hf::model_name_of("/models/qwen2.5-0.5b-q4_k_m.gguf") == "qwen2.5-0.5b-q4_k_m");
}
