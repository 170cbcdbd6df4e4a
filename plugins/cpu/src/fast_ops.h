// The fast layer (the default): a persistent thread pool plus SIMD kernels chosen at runtime.
#pragma once

#include <memory>
#include <string>
#include <mutex>

#include "cpu_tensor.h"
#include "moe_ops.h"

namespace loom::cpu {

class ThreadPool;
struct Kernels;

class FastOps {
 public:
  // n_threads >= 1. simd: "auto" (the best kernels this CPU runs), or exactly "avx512", "avx2" or
  // "scalar" (to test each); std::invalid_argument for an unknown or unavailable level.
  // batch_invariant: a token's results do not depend on the other tokens of its ops (Kernels::tiles_only).
  FastOps(int n_threads, const std::string& simd, bool batch_invariant = false);
  ~FastOps();
  FastOps(const FastOps&) = delete;
  FastOps& operator=(const FastOps&) = delete;

  // Runs one validated op. Thread-safe: calls from several threads take turns on the pool.
  void run(const OpArgs& a);
  // Runs ops[0..n) together when they are decode matmuls of one activation row (q, k and v; gate
  // and up), else one by one; returns how many of them it ran together (at least 1). Same
  // thread-safety as run.
  int run_group(const OpArgs* const* ops, int n);
  static constexpr int kMaxGroup = 4;

  int n_threads() const;
  const char* isa_name() const;  // "avx512", "avx2" or "scalar"
  bool batch_invariant() const;
  MoeCounters moe_counters() {
    std::lock_guard<std::mutex> lock(mutex_);
    return moe_counters_;
  }

 private:
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Kernels> invariant_table_;  // the chosen table with tiles_only set, when asked for
  const Kernels* kernels_;
  std::mutex mutex_;
  MoeCounters moe_counters_;  // guarded by mutex_
};

}  // namespace loom::cpu
