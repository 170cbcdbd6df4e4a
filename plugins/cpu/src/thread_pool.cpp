#include "thread_pool.h"

namespace loom::cpu {

namespace {
// Workers spin this many polls before sleeping: decode issues a matmul every few tens of
// microseconds, and a condition-variable wake-up per op would cost as much as the op.
constexpr int kSpinPolls = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int t = 1; t < n_threads_; t++) workers_.emplace_back([this, t] { worker_main(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
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
    bool woke = false;
    for (int i = 0; i < kSpinPolls && !woke; i++) {
      woke = generation_.load(std::memory_order_acquire) != seen;
      if (!woke && (i & 63) == 63) std::this_thread::yield();
    }
    if (!woke) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    run_tasks(thread);
    if (pending_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_tasks(0);
  for (int i = 0; i < kSpinPolls && pending_workers_.load(std::memory_order_acquire) != 0; i++)
    if ((i & 63) == 63) std::this_thread::yield();
  if (pending_workers_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_workers_.load(std::memory_order_acquire) == 0; });
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace loom::cpu
