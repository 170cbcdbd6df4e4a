// A persistent pool of worker threads (created once per backend instance, not per call).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::cpu {

class ThreadPool {
 public:
  using TaskFn = std::function<void(int64_t task, int thread)>;

  explicit ThreadPool(int n_threads);  // n_threads - 1 workers; the caller is thread 0
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(task, thread) for every task in [0, n_tasks), handing tasks out dynamically; the caller
  // works too. Returns when every task is done; rethrows the first exception a task threw.
  // Not re-entrant: one parallel_for at a time (FastOps serialises callers).
  void parallel_for(int64_t n_tasks, const TaskFn& fn);

 private:
  void worker_main(int thread);
  void run_tasks(int thread);
  // Spins until pred() holds or the spin budget runs out; true if pred() held.
  template <typename Pred>
  static bool spin_until(Pred pred);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};  // bumped once per job (and at shutdown)
  std::atomic<bool> stop_{false};

  // Sleeping is the slow path: a thread that spun for its whole budget registers itself and waits on
  // a condition variable; the other side takes the mutex and notifies only when someone is there.
  std::mutex mutex_;
  std::condition_variable wake_;  // workers: a new generation
  std::condition_variable done_;  // caller: pending_workers_ reached zero
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};

  // The current job.
  const TaskFn* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> pending_workers_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace loom::cpu
