#include "engine/prefix_disk_tier.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <system_error>
#include <unistd.h>

#include "common/error.h"

namespace loom {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'K', 'V', 'B', '1'};
constexpr uint32_t kVersion = 1;
constexpr const char* kExtension = ".kvb";
// Host memory the write queue may hold; past it the engine outruns the disk and blocks are dropped.
constexpr uint64_t kMaxQueuedBytes = 256ull << 20;

// The fixed head of every block file; the payload follows it.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t fingerprint_lo, fingerprint_hi;
  uint64_t key_lo, key_hi;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // XXH3-64 of the payload
};
static_assert(sizeof(FileHeader) == 64);

bool read_header(std::ifstream& in, FileHeader& header) {
  in.read(reinterpret_cast<char*>(&header), sizeof(header));
  return in.gcount() == sizeof(header) && std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0 &&
         header.version == kVersion && header.header_bytes == sizeof(FileHeader);
}

DiskBlockKey to_key(XXH128_hash_t h) { return {h.low64, h.high64}; }

}  // namespace

std::string DiskBlockKey::hex() const {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(hi), static_cast<unsigned long long>(lo));
  return text;
}

DiskBlockKey chain_block_key(const DiskBlockKey& parent, const int32_t* tokens, uint32_t n_tokens) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, &parent, sizeof(parent));
  XXH3_128bits_update(state, tokens, sizeof(int32_t) * n_tokens);
  const DiskBlockKey key = to_key(XXH3_128bits_digest(state));
  XXH3_freeState(state);
  return key;
}

DiskBlockKey state_key_of(const DiskBlockKey& block) {
  const int32_t marker = -1;
  return chain_block_key(block, &marker, 1);
}

DiskBlockKey fingerprint_of(const std::string& identity) { return to_key(XXH3_128bits(identity.data(), identity.size())); }

PrefixDiskTier::PrefixDiskTier(std::filesystem::path folder, uint64_t capacity_bytes, DiskBlockKey fingerprint,
                               std::vector<uint64_t> payload_sizes, Warn warn)
    : folder_(std::move(folder)), capacity_bytes_(capacity_bytes), fingerprint_(fingerprint),
      payload_sizes_(std::move(payload_sizes)), warn_(std::move(warn)) {
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec || !fs::is_directory(folder_)) {
    throw Error("[kv] disk_cache_path '" + folder_.string() + "' is not a folder that can be created: " + ec.message());
  }
  stats_.capacity_bytes = capacity_bytes_;
  scan_folder();
  writer_ = std::thread([this] { writer_loop(); });
}

PrefixDiskTier::~PrefixDiskTier() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_writer_.notify_all();
  writer_.join();
}

bool PrefixDiskTier::allowed_size(uint64_t bytes) const {
  return bytes > 0 && std::find(payload_sizes_.begin(), payload_sizes_.end(), bytes) != payload_sizes_.end();
}

void PrefixDiskTier::warn(const std::string& message) const {
  if (warn_) {
    warn_(message);
  } else {
    std::cerr << "loom: warning: disk cache " << folder_.string() << ": " << message << "\n";
  }
}

std::filesystem::path PrefixDiskTier::path_of(const DiskBlockKey& key) const { return folder_ / (key.hex() + kExtension); }

// Index this model's blocks, oldest use first. A file of ours that is truncated or names another key
// than its own is deleted; a file of another model or KV type is someone else's and stays.
void PrefixDiskTier::scan_folder() {
  struct Found {
    DiskBlockKey key;
    uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Found> found;
  uint64_t foreign = 0, broken = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const fs::path& path = entry.path();
    // A temporary name left by a crash mid-write; a live writer's is younger than a minute.
    if (path.string().find(std::string(kExtension) + ".tmp") != std::string::npos) {
      if (entry.last_write_time(ec) < fs::file_time_type::clock::now() - std::chrono::minutes(1)) fs::remove(path, ec);
      continue;
    }
    if (path.extension() != kExtension) continue;
    std::ifstream in(path, std::ios::binary);
    FileHeader header{};
    if (!read_header(in, header)) {
      ++broken;
      continue;  // not a block file this version of Loom wrote: left alone
    }
    if (header.fingerprint_lo != fingerprint_.lo || header.fingerprint_hi != fingerprint_.hi) {
      ++foreign;
      continue;
    }
    const DiskBlockKey key{header.key_lo, header.key_hi};
    const uint64_t size = entry.file_size(ec);
    if (!allowed_size(header.payload_bytes) || size != sizeof(FileHeader) + header.payload_bytes ||
        path.filename() != path_of(key).filename()) {
      ++broken;
      in.close();
      fs::remove(path, ec);
      continue;
    }
    found.push_back({key, size, entry.last_write_time(ec)});
  }
  if (ec) throw Error("[kv] disk_cache_path '" + folder_.string() + "' cannot be read: " + ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.used < b.used; });
  std::lock_guard lock(mutex_);
  for (const Found& f : found) insert_locked(f.key, f.bytes);
  evict_locked(0);
  stats_.files_rejected += foreign + broken;
  if (foreign > 0) warn(std::to_string(foreign) + " block files of another model, KV type or layout skipped (left in place)");
  if (broken > 0) warn(std::to_string(broken) + " truncated or unreadable block files skipped");
}

bool PrefixDiskTier::contains(const DiskBlockKey& key) const {
  std::lock_guard lock(mutex_);
  return index_.count(key) > 0 || queued_.count(key) > 0;
}

bool PrefixDiskTier::read(const DiskBlockKey& key, void* out, uint64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    if (!index_.count(key)) return false;
  }
  const auto start = std::chrono::steady_clock::now();
  const fs::path path = path_of(key);
  std::string problem;
  {
    std::ifstream in(path, std::ios::binary);
    FileHeader header{};
    if (!in) {
      problem = "it can no longer be opened";
    } else if (!read_header(in, header) || header.fingerprint_lo != fingerprint_.lo ||
               header.fingerprint_hi != fingerprint_.hi || header.key_lo != key.lo || header.key_hi != key.hi) {
      problem = "its header does not belong to this block";
    } else if (header.payload_bytes != bytes) {
      problem = "its payload has the wrong size";
    } else {
      in.read(static_cast<char*>(out), static_cast<std::streamsize>(bytes));
      if (static_cast<uint64_t>(in.gcount()) != bytes) {
        problem = "it is truncated";
      } else if (XXH3_64bits(out, bytes) != header.payload_checksum) {
        problem = "its checksum does not match";
      }
    }
  }
  std::error_code ec;
  std::lock_guard lock(mutex_);
  if (!problem.empty()) {
    warn("block file " + path.filename().string() + " skipped and deleted: " + problem);
    ++stats_.files_rejected;
    forget_locked(key);
    fs::remove(path, ec);
    return false;
  }
  auto it = index_.find(key);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // survives a restart as the LRU order
  ++stats_.blocks_read;
  stats_.bytes_read += bytes;
  stats_.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

void PrefixDiskTier::write_async(const DiskBlockKey& key, std::vector<uint8_t> payload) {
  {
    std::lock_guard lock(mutex_);
    if (index_.count(key) || queued_.count(key)) return;
    if (!allowed_size(payload.size()) || payload.size() > capacity_bytes_ || queued_bytes_ + payload.size() > std::min(capacity_bytes_, kMaxQueuedBytes)) {
      ++stats_.writes_dropped;
      return;
    }
    queued_[key] = true;
    queued_bytes_ += payload.size();
    queue_.push_back({key, std::move(payload)});
  }
  wake_writer_.notify_one();
}

void PrefixDiskTier::flush() {
  std::unique_lock lock(mutex_);
  written_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

DiskTierStats PrefixDiskTier::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void PrefixDiskTier::writer_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_writer_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, with everything written
    PendingWrite write = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    const bool ok = write_file(write);
    lock.lock();
    writing_ = false;
    queued_.erase(write.key);
    queued_bytes_ -= write.payload.size();
    if (ok) {
      evict_locked(sizeof(FileHeader) + write.payload.size());
      insert_locked(write.key, sizeof(FileHeader) + write.payload.size());
      ++stats_.blocks_written;
      stats_.bytes_written += sizeof(FileHeader) + write.payload.size();
    } else {
      ++stats_.writes_dropped;
    }
    written_.notify_all();
  }
  written_.notify_all();
}

// Written under a temporary name and renamed, so a block file is whole or absent.
bool PrefixDiskTier::write_file(const PendingWrite& write) {
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.header_bytes = sizeof(FileHeader);
  header.fingerprint_lo = fingerprint_.lo;
  header.fingerprint_hi = fingerprint_.hi;
  header.key_lo = write.key.lo;
  header.key_hi = write.key.hi;
  header.payload_bytes = write.payload.size();
  header.payload_checksum = XXH3_64bits(write.payload.data(), write.payload.size());
  const fs::path target = path_of(write.key);
  const fs::path temporary = target.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(reinterpret_cast<const char*>(write.payload.data()), static_cast<std::streamsize>(write.payload.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(temporary, ec);
      std::lock_guard lock(mutex_);
      warn("cannot write " + target.filename().string() + " (disk full or not writable?)");
      return false;
    }
  }
  std::error_code ec;
  fs::rename(temporary, target, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return false;
  }
  return true;
}

void PrefixDiskTier::insert_locked(const DiskBlockKey& key, uint64_t bytes) {
  if (index_.count(key)) return;
  lru_.push_back(key);
  index_[key] = {bytes, std::prev(lru_.end())};
  ++stats_.files;
  stats_.bytes += bytes;
}

void PrefixDiskTier::forget_locked(const DiskBlockKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  lru_.erase(it->second.lru);
  --stats_.files;
  stats_.bytes -= it->second.bytes;
  index_.erase(it);
}

// Delete least recently used files until `incoming_bytes` more fit the capacity.
void PrefixDiskTier::evict_locked(uint64_t incoming_bytes) {
  while (!lru_.empty() && stats_.bytes + incoming_bytes > capacity_bytes_) {
    const DiskBlockKey victim = lru_.front();
    forget_locked(victim);
    std::error_code ec;
    fs::remove(path_of(victim), ec);
    ++stats_.evictions;
  }
}

}  // namespace loom
