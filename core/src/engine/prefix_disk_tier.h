// PrefixDiskTier — the prefix cache's second tier: full KV blocks kept in files of a bounded folder on
// local disk ([kv] disk_cache_path, disk_cache_bytes), so a prompt whose blocks left the memory pool,
// or a server that restarted, loads them back instead of recomputing (LMCache, llama-server's slot
// save/restore).
//
// A block is named by a 128-bit key chained over everything its K/V depends on: the model, KV type and
// layout (the fingerprint) and every token up to the block's end; a hybrid model's recurrent state at
// a block's end is a second kind of payload, of its own size, under a key of its own (state_key_of).
// Each file holds one payload: a header
// (magic, fingerprint, key, sizes) and the payload with its checksum. Writes run on a thread of their
// own, through a temporary name renamed into place, so a crash leaves no half-written block under a
// real name; a read checks the header and the checksum and never hands out bytes that fail them.
// Files of another model or KV type are left alone and not counted; the folder keeps within its size
// by deleting the least recently used of this model's files.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace loom {

struct DiskBlockKey {
  uint64_t lo = 0, hi = 0;
  bool operator==(const DiskBlockKey& o) const { return lo == o.lo && hi == o.hi; }
  std::string hex() const;
};

// The key of the block after `parent` holding `tokens`; the first block's parent is the fingerprint.
DiskBlockKey chain_block_key(const DiskBlockKey& parent, const int32_t* tokens, uint32_t n_tokens);
// The key of the recurrent state at the end of the block named `block` (no block's key: tokens are
// never negative).
DiskBlockKey state_key_of(const DiskBlockKey& block);
// A fingerprint from any bytes that identify what the blocks' contents depend on.
DiskBlockKey fingerprint_of(const std::string& identity);

struct DiskTierStats {
  uint64_t files = 0;             // blocks on disk (this model's)
  uint64_t bytes = 0;             // their size
  uint64_t capacity_bytes = 0;
  uint64_t blocks_read = 0;       // blocks loaded back
  uint64_t bytes_read = 0;
  double read_seconds = 0;        // reading and checking them
  uint64_t blocks_written = 0;
  uint64_t bytes_written = 0;
  uint64_t writes_dropped = 0;    // not written: the queue was full or the disk refused
  uint64_t evictions = 0;         // files deleted to stay within capacity_bytes
  uint64_t files_rejected = 0;    // corrupt, truncated or foreign files never loaded
};

class PrefixDiskTier {
 public:
  using Warn = std::function<void(const std::string&)>;
  // Creates `folder` if needed and indexes this fingerprint's files in it (oldest first by their
  // modification time, which each hit refreshes). Files that fail their header are reported through
  // `warn` and never loaded; loom::Error when the folder cannot be created or read.
  // `payload_sizes`: the sizes a payload may have (a block's, and a recurrent state's where there is one).
  PrefixDiskTier(std::filesystem::path folder, uint64_t capacity_bytes, DiskBlockKey fingerprint,
                 std::vector<uint64_t> payload_sizes, Warn warn = {});
  ~PrefixDiskTier();  // writes what is queued first
  PrefixDiskTier(const PrefixDiskTier&) = delete;
  PrefixDiskTier& operator=(const PrefixDiskTier&) = delete;

  // On disk or queued for writing.
  bool contains(const DiskBlockKey& key) const;
  // The payload of `bytes` bytes into `out`. False when it is not there, or its file fails the header,
  // size or checksum: that file is deleted, with a warning, and the key forgotten.
  bool read(const DiskBlockKey& key, void* out, uint64_t bytes);
  // Queue the block for writing (nothing when it is already there or queued). Dropped, and counted,
  // when the queue already holds 256 MiB (or the capacity): the engine never waits for the disk.
  void write_async(const DiskBlockKey& key, std::vector<uint8_t> payload);
  // Wait until every queued write has reached the disk.
  void flush();
  DiskTierStats stats() const;

 private:
  struct Entry {
    uint64_t bytes = 0;
    std::list<DiskBlockKey>::iterator lru;  // position in lru_ (front = least recently used)
  };
  struct KeyHash {
    size_t operator()(const DiskBlockKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ull)); }
  };
  struct PendingWrite {
    DiskBlockKey key;
    std::vector<uint8_t> payload;
  };

  std::filesystem::path path_of(const DiskBlockKey& key) const;
  void scan_folder();
  void writer_loop();
  bool write_file(const PendingWrite& write);
  void insert_locked(const DiskBlockKey& key, uint64_t bytes);
  void forget_locked(const DiskBlockKey& key);
  void evict_locked(uint64_t incoming_bytes);
  void warn(const std::string& message) const;

  const std::filesystem::path folder_;
  const uint64_t capacity_bytes_;
  const DiskBlockKey fingerprint_;
  const std::vector<uint64_t> payload_sizes_;
  bool allowed_size(uint64_t bytes) const;
  Warn warn_;

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_, written_;
  std::unordered_map<DiskBlockKey, Entry, KeyHash> index_;
  std::list<DiskBlockKey> lru_;
  std::unordered_map<DiskBlockKey, bool, KeyHash> queued_;
  std::deque<PendingWrite> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false;
  bool stopping_ = false;
  DiskTierStats stats_;
  std::thread writer_;
};

}  // namespace loom
