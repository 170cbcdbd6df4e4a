#include "plugin/host_services.h"

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace loom {

namespace {

std::atomic<int> g_log_level{-1};

int initial_log_level() {
  const char* env = std::getenv("LOOM_LOG");
  if (env == nullptr) return LOOM_LOG_WARN;
  if (std::strcmp(env, "debug") == 0) return LOOM_LOG_DEBUG;
  if (std::strcmp(env, "info") == 0) return LOOM_LOG_INFO;
  if (std::strcmp(env, "error") == 0) return LOOM_LOG_ERROR;
  return LOOM_LOG_WARN;
}

int current_level() {
  int level = g_log_level.load();
  if (level < 0) {
    level = initial_log_level();
    g_log_level.store(level);
  }
  return level;
}

void host_log(void*, loom_log_level level, const char* plugin, const char* message) {
  if (level < current_level()) return;
  static std::mutex mutex;  // keep lines from different threads whole
  static const char* names[] = {"debug", "info", "warn", "error"};
  const char* name = level >= 0 && level <= 3 ? names[level] : "log";
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[%s] %s: %s\n", name, plugin ? plugin : "?", message ? message : "");
}

void* host_alloc(void*, uint64_t size, uint64_t alignment) {
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  uint64_t rounded = (size + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
}

void host_free(void*, void* ptr) { std::free(ptr); }

}  // namespace

const loom_host_services* default_host_services() {
  static const loom_host_services services = [] {
    loom_host_services s{};
    s.struct_size = sizeof(loom_host_services);
    s.abi_major = LOOM_ABI_MAJOR;
    s.abi_minor = LOOM_ABI_MINOR;
    s.log = host_log;
    s.alloc = host_alloc;
    s.free = host_free;
    return s;
  }();
  return &services;
}

void set_log_level(loom_log_level level) { g_log_level.store(level); }

}  // namespace loom
