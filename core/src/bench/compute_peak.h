// Measures the arithmetic peak of the CPU's vector units the way batched steps use them: several
// threads each running independent multiply-add chains on registers, no memory traffic. `loom bench`
// divides a batched decode step's multiply-adds/s by it, as it divides decode's bytes/s by the
// memory bandwidth.
#pragma once

#include <string>

namespace loom {

struct ComputePeak {
  std::string int8_instructions;  // what the int8 figure ran: "avx512-vnni vpdpbusd", "avx2 vpmaddubsw+vpmaddwd", "scalar"
  double int8_macs_per_s = 0;     // int8 x int8 -> int32 multiply-adds per second, all threads
  double f32_macs_per_s = 0;      // float FMA multiply-adds per second, all threads (0 without FMA)
};

// Runs `threads` threads for about `seconds` per figure; the best of three.
ComputePeak measure_compute_peak(int threads, double seconds = 0.1);

}  // namespace loom
