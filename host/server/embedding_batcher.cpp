#include "server/embedding_batcher.h"

#include <algorithm>
#include <stdexcept>

namespace loom::server {

std::vector<std::vector<float>> EmbeddingBatcher::embed(const std::vector<std::vector<int32_t>>& inputs, bool normalize) {
  Job job;
  job.inputs = &inputs;
  job.normalize = normalize;
  std::unique_lock lock(mutex_);
  queue_.push_back(&job);
  while (!job.done) {
    if (running_) {
      done_.wait(lock);
      continue;
    }
    // The embedder is idle: this request runs everything queued that shares the first one's
    // normalisation (its own job among them, or it leads again on the next turn).
    std::vector<Job*> jobs;
    try {
      jobs.reserve(queue_.size());
    } catch (...) {  // nothing taken yet: leave the queue as it was, without this request's job
      queue_.erase(std::find(queue_.begin(), queue_.end(), &job));
      throw;
    }
    running_ = true;
    const bool first_normalize = queue_.front()->normalize;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->normalize == first_normalize) {
        jobs.push_back(*it);  // within the reserved capacity: cannot throw
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    run(jobs);  // never throws: every failure is a job's error
    lock.lock();
    for (Job* j : jobs) j->done = true;
    stats_.runs++;
    stats_.requests += int64_t(jobs.size());
    running_ = false;
    done_.notify_all();
  }
  if (job.error) std::rethrow_exception(job.error);
  return std::move(job.out);
}

EmbeddingBatcher::Stats EmbeddingBatcher::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void EmbeddingBatcher::run(const std::vector<Job*>& jobs) noexcept {
  auto alone = [this](Job& job) {
    try {
      job.out = embedder_.embed(*job.inputs, job.normalize);
      if (job.out.size() != job.inputs->size()) throw std::logic_error("the embedder returned a vector count other than its inputs'");
    } catch (...) {
      job.error = std::current_exception();
    }
  };
  if (jobs.size() == 1) return alone(*jobs[0]);
  try {
    std::vector<std::vector<int32_t>> all;
    for (const Job* job : jobs) all.insert(all.end(), job->inputs->begin(), job->inputs->end());
    std::vector<std::vector<float>> out = embedder_.embed(all, jobs[0]->normalize);
    if (out.size() != all.size()) throw std::logic_error("the embedder returned a vector count other than its inputs'");
    size_t next = 0;
    for (Job* job : jobs) {
      job->out.assign(std::make_move_iterator(out.begin() + std::ptrdiff_t(next)),
                      std::make_move_iterator(out.begin() + std::ptrdiff_t(next + job->inputs->size())));
      next += job->inputs->size();
    }
  } catch (...) {
    // An error names an input by its place in the combined list: each request alone names its own.
    for (Job* job : jobs) {
      job->out.clear();
      alone(*job);
    }
  }
}

}  // namespace loom::server
