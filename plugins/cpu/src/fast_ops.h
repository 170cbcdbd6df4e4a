// The fast layer (the default): a persistent thread pool plus SIMD kernels chosen at runtime.
#pragma once

#include <memory>
#include <mutex>

#include "cpu_tensor.h"

namespace loom::cpu {

class ThreadPool;
struct Kernels;

class FastOps {
 public:
  // n_threads >= 1. allow_simd = false forces the portable scalar kernels (for testing them).
  FastOps(int n_threads, bool allow_simd);
  ~FastOps();
  FastOps(const FastOps&) = delete;
  FastOps& operator=(const FastOps&) = delete;

  // Runs one validated op. Thread-safe: calls from several threads take turns on the pool.
  void run(const OpArgs& a);

  int n_threads() const;
  const char* isa_name() const;  // "avx2" or "scalar"

 private:
  std::unique_ptr<ThreadPool> pool_;
  const Kernels* kernels_;
  std::mutex mutex_;
};

}  // namespace loom::cpu
