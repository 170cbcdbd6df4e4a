// MappedFile — a read-only POSIX memory map of a whole file, unmapped on destruction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace loom::gguf {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws loom::Error naming the path when the file cannot be opened, is not a regular file or is empty.
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Let the kernel drop the resident pages of [offset, offset + size) (whole pages inside it): they
  // stay readable, faulted in from the file again if touched.
  void drop_pages(uint64_t offset, uint64_t size) const;

 private:
  void reset() noexcept;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace loom::gguf
