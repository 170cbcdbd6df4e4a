// Opt-in per-op timing for the CPU backend: with LOOM_CPU_PROFILE=1 in the environment, every op's
// wall time is summed by (op, src[0] type and shape, one token or more) and printed to stderr as a table
// when the backend is destroyed. Off, it costs one branch per op.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <tuple>

#include "cpu_tensor.h"

namespace loom::cpu {

class OpProfile {
 public:
  static bool enabled_by_environment();

  void add(const OpArgs& op, std::chrono::steady_clock::duration elapsed);
  void print() const;  // to stderr, largest total first

 private:
  // op, src[0] dtype, src[0] ne0 x ne1 (MATMUL: the weight matrix; others 0 x 0), more than one token
  using Key = std::tuple<loom_op_type, loom_dtype, int64_t, int64_t, bool>;
  struct Totals {
    uint64_t calls = 0;
    double seconds = 0;
  };
  std::map<Key, Totals> totals_;
};

}  // namespace loom::cpu
