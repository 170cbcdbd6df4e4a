// libFuzzer target: any byte string must parse as a safetensors file or throw loom::Error, never crash,
// leak or read out of bounds (built with ASan + UBSan); every tensor it accepts lies inside the bytes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "hf/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = loom::hf::SafetensorsFile::from_memory(std::span<const uint8_t>(data, size), "fuzz");
    for (const auto& t : file.tensors()) {
      if (t.data.data() < data || t.data.data() + t.data.size() > data + size) __builtin_trap();
      if (!t.data.empty()) {
        volatile uint8_t sink = t.data.back();
        (void)sink;
      }
    }
  } catch (const loom::Error&) {
  }
  return 0;
}
