// PrefixDiskTier on its own: blocks written asynchronously come back byte for byte, survive a new
// instance (a restart), stay within the capacity by dropping the least recently used, and a file that
// is corrupt, truncated or another model's is never handed out.
#include <catch2/catch.hpp>

#include <fstream>

#include "engine/prefix_disk_tier.h"
#include "test_paths.h"

namespace {

using loom::DiskBlockKey;
using loom::PrefixDiskTier;

constexpr uint64_t kBlockBytes = 4096;

std::vector<uint8_t> payload_of(uint32_t seed) {
  std::vector<uint8_t> bytes(kBlockBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 31 + seed * 7) & 0xff);
  return bytes;
}

DiskBlockKey key_of(const DiskBlockKey& parent, int32_t token) { return loom::chain_block_key(parent, &token, 1); }

struct Warnings {
  std::vector<std::string> lines;
  PrefixDiskTier::Warn sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
};

std::filesystem::path only_file_of(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  return files[0];
}

}  // namespace

TEST_CASE("block keys chain: equal prefixes give equal keys, any earlier difference changes every later key", "[disk_tier]") {
  const DiskBlockKey model_a = loom::fingerprint_of("model a"), model_b = loom::fingerprint_of("model b");
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  const DiskBlockKey a1 = loom::chain_block_key(model_a, tokens.data(), 4);
  CHECK(loom::chain_block_key(model_a, tokens.data(), 4) == a1);
  CHECK_FALSE(loom::chain_block_key(model_b, tokens.data(), 4) == a1);  // another model
  const DiskBlockKey a2 = loom::chain_block_key(a1, tokens.data(), 4);
  const DiskBlockKey other_first = loom::chain_block_key(model_a, tokens.data(), 3);
  CHECK_FALSE(loom::chain_block_key(other_first, tokens.data(), 4) == a2);
  CHECK(a1.hex().size() == 32);
}

TEST_CASE("the disk tier returns what was written, also to a new instance over the same folder", "[disk_tier]") {
  const auto folder = loom::test::scratch_dir("disk-tier-restart");
  const DiskBlockKey model = loom::fingerprint_of("model");
  const DiskBlockKey k1 = key_of(model, 1), k2 = key_of(k1, 2);
  {
    PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes});
    tier.write_async(k1, payload_of(1));
    tier.write_async(k2, payload_of(2));
    tier.write_async(k2, payload_of(2));  // queued already: written once
    CHECK(tier.contains(k1));
    tier.flush();
    const auto s = tier.stats();
    CHECK(s.blocks_written == 2);
    CHECK(s.files == 2);
    CHECK(s.bytes == 2 * (kBlockBytes + 64));
    std::vector<uint8_t> back(kBlockBytes);
    REQUIRE(tier.read(k2, back.data(), kBlockBytes));
    CHECK(back == payload_of(2));
  }
  PrefixDiskTier restarted(folder, 1 << 20, model, {kBlockBytes});
  CHECK(restarted.stats().files == 2);
  std::vector<uint8_t> back(kBlockBytes);
  REQUIRE(restarted.read(k1, back.data(), kBlockBytes));
  CHECK(back == payload_of(1));
  CHECK_FALSE(restarted.read(key_of(k2, 3), back.data(), kBlockBytes));
  CHECK(restarted.stats().blocks_read == 1);
  CHECK(restarted.stats().bytes_read == kBlockBytes);
}

TEST_CASE("the disk tier never loads a corrupt, truncated or foreign block file", "[disk_tier]") {
  const auto folder = loom::test::scratch_dir("disk-tier-reject");
  const DiskBlockKey model = loom::fingerprint_of("model");
  const DiskBlockKey key = key_of(model, 1);
  auto write_one = [&](const DiskBlockKey& fingerprint) {
    PrefixDiskTier tier(folder, 1 << 20, fingerprint, {kBlockBytes});
    tier.write_async(key_of(fingerprint, 1), payload_of(1));
    tier.flush();
  };
  std::vector<uint8_t> back(kBlockBytes);

  SECTION("a flipped payload byte fails the checksum: skipped with a warning and deleted") {
    write_one(model);
    const auto file = only_file_of(folder);
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(64 + 1000);
      f.put(static_cast<char>(0x5a));
    }
    Warnings warnings;
    PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes}, warnings.sink());
    CHECK(tier.contains(key));
    CHECK_FALSE(tier.read(key, back.data(), kBlockBytes));
    CHECK_FALSE(tier.contains(key));
    CHECK_FALSE(std::filesystem::exists(file));
    CHECK(tier.stats().files_rejected == 1);
    REQUIRE(warnings.lines.size() == 1);
    CHECK_THAT(warnings.lines[0], Catch::Contains("checksum"));
  }
  SECTION("a truncated file is skipped when the folder is indexed") {
    write_one(model);
    const auto file = only_file_of(folder);
    std::filesystem::resize_file(file, 64 + kBlockBytes / 2);
    Warnings warnings;
    PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes}, warnings.sink());
    CHECK_FALSE(tier.contains(key));
    CHECK_FALSE(tier.read(key, back.data(), kBlockBytes));
    CHECK(tier.stats().files_rejected == 1);
    CHECK(tier.stats().files == 0);
    REQUIRE(warnings.lines.size() == 1);
    CHECK_THAT(warnings.lines[0], Catch::Contains("truncated"));
  }
  SECTION("another model's file is skipped and left in place") {
    const DiskBlockKey other = loom::fingerprint_of("another model");
    write_one(other);
    const auto file = only_file_of(folder);
    Warnings warnings;
    PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes}, warnings.sink());
    CHECK(tier.stats().files == 0);
    CHECK(tier.stats().files_rejected == 1);
    CHECK_FALSE(tier.read(key_of(other, 1), back.data(), kBlockBytes));
    CHECK(std::filesystem::exists(file));
    REQUIRE(warnings.lines.size() == 1);
    CHECK_THAT(warnings.lines[0], Catch::Contains("another model"));
  }
  SECTION("a file with another block size (another KV type) is skipped") {
    {
      PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes * 2});
      tier.write_async(key, std::vector<uint8_t>(kBlockBytes * 2, 1));
      tier.flush();
    }
    PrefixDiskTier tier(folder, 1 << 20, model, {kBlockBytes}, [](const std::string&) {});
    CHECK_FALSE(tier.contains(key));
    CHECK(tier.stats().files_rejected == 1);
  }
}

TEST_CASE("the disk tier stays within its capacity, dropping the least recently used block", "[disk_tier]") {
  const auto folder = loom::test::scratch_dir("disk-tier-capacity");
  const DiskBlockKey model = loom::fingerprint_of("model");
  const uint64_t file_bytes = kBlockBytes + 64;
  PrefixDiskTier tier(folder, 3 * file_bytes, model, {kBlockBytes});
  std::vector<DiskBlockKey> keys;
  for (int32_t i = 0; i < 3; ++i) {
    keys.push_back(key_of(model, i));
    tier.write_async(keys.back(), payload_of(uint32_t(i)));
    tier.flush();
  }
  std::vector<uint8_t> back(kBlockBytes);
  REQUIRE(tier.read(keys[0], back.data(), kBlockBytes));  // now the most recently used
  keys.push_back(key_of(model, 3));
  tier.write_async(keys.back(), payload_of(3));
  tier.flush();
  const auto s = tier.stats();
  CHECK(s.files == 3);
  CHECK(s.bytes <= 3 * file_bytes);
  CHECK(s.evictions == 1);
  CHECK(tier.contains(keys[0]));
  CHECK_FALSE(tier.contains(keys[1]));  // the least recently used
  CHECK(tier.contains(keys[3]));
  uint64_t on_disk = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder)) on_disk += e.file_size();
  CHECK(on_disk == s.bytes);
}
