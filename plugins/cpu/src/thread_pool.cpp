#include "thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace loom::cpu {

namespace {

// How long a thread busy-waits for the next job (workers) or for the workers to finish (caller)
// before it sleeps. Decode issues an op every few to a few hundred microseconds, and both a
// condition-variable wake-up and a sched_yield() cost microseconds on a VM: the earlier loop, which
// yielded every 64 polls, spent most of a small matmul's time in the scheduler (perf on a stream
// of 4 KB matmuls: ~57% of samples in sched_yield and the kernel's scheduler). Spinning on a shared
// cache line with a pause costs nothing the other thread needs. After half a millisecond idle the
// thread sleeps: shorter would put the worker to sleep while the engine samples between tokens;
// longer would keep a second backend instance's idle worker (a draft model's) competing for a core.
constexpr auto kSpinBudget = std::chrono::microseconds(500);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

template <typename Pred>
bool ThreadPool::spin_until(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  while (true) {
    for (int i = 0; i < 256; i++) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int t = 1; t < n_threads_; t++) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks(int thread) {
  for (int64_t task = next_task_.fetch_add(1); task < n_tasks_; task = next_task_.fetch_add(1)) {
    try {
      (*fn_)(task, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      next_task_.store(n_tasks_);  // stop handing out work
    }
  }
}

void ThreadPool::worker_main(int thread) {
  uint64_t seen = 0;
  while (true) {
    const auto new_job = [&] { return generation_.load() != seen; };
    if (!spin_until(new_job)) {
      // Registering before the last check under the mutex pairs with parallel_for's bump-then-look:
      // either it sees this sleeper and notifies, or this check sees its new generation.
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_workers_.fetch_add(1);
      wake_.wait(lock, new_job);
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    run_tasks(thread);
    if (pending_workers_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n_tasks, const TaskFn& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int64_t t = 0; t < n_tasks; t++) fn(t, 0);
    return;
  }
  fn_ = &fn;
  n_tasks_ = n_tasks;
  error_ = nullptr;
  next_task_.store(0);
  pending_workers_.store(n_threads_ - 1);
  generation_.fetch_add(1);  // publishes the job to spinning workers
  if (sleeping_workers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_.notify_all();
  }
  run_tasks(0);
  const auto all_done = [&] { return pending_workers_.load() == 0; };
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_sleeping_.store(true);
    done_.wait(lock, all_done);
    caller_sleeping_.store(false);
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace loom::cpu
