// Hugging Face folders: safetensors parsing refuses every malformed file by name, a GgufFile over
// external tensor data reads them in place, and a folder Loom cannot map says why. (The real model,
// all-MiniLM-L6-v2, is checked end to end by tests/server/test_hf_embeddings.py.)
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string>

#include "common/error.h"
#include "gguf/gguf_writer.h"
#include "hf/hf_checkpoint.h"
#include "hf/safetensors_file.h"
#include "test_model_helpers.h"

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
  std::ofstream(dir / "config.json") << R"({"model_type": "llama"})";
  CHECK(hf::is_checkpoint_dir(dir));
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("model_type 'llama' is not one Loom reads from a Hugging Face folder yet"));
  std::ofstream(dir / "config.json") << R"({"model_type": "bert", "num_hidden_layers": 1})";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("no model.safetensors or model.safetensors.index.json"));
  std::ofstream(dir / "config.json") << "{not json";
  CHECK_THROWS_WITH(hf::open_checkpoint(dir), Catch::Contains("config.json: not JSON"));
}
