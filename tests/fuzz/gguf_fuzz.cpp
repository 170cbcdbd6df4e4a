// libFuzzer target: any byte string must parse or throw loom::Error, never crash or read out of
// bounds (built with ASan + UBSan). Parsed files are also walked through every accessor.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = loom::gguf::GgufFile::from_memory(std::span<const uint8_t>(data, size), "fuzz");
    for (const auto& entry : file.metadata()) {
      (void)file.value_to_string(entry.value, 4);
      try {
        (void)file.get_float(entry.key);
      } catch (const loom::Error&) {
      }
      try {
        (void)file.get_string_array(entry.key);
      } catch (const loom::Error&) {
      }
      try {
        (void)file.get_int_array(entry.key);
      } catch (const loom::Error&) {
      }
    }
    for (const auto& tensor : file.tensors()) {
      const auto bytes = file.tensor_data(tensor);
      if (!bytes.empty()) {
        volatile uint8_t sink = bytes[bytes.size() - 1];  // touch the last byte: it must be in bounds
        (void)sink;
      }
    }
  } catch (const loom::Error&) {
  }
  return 0;
}
