#include "gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.h"

namespace loom::gguf {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  const std::string name = path.string();
  FdGuard guard{::open(name.c_str(), O_RDONLY | O_CLOEXEC)};
  if (guard.fd < 0) throw Error(name + ": cannot open: " + errno_text());
  struct stat info {};
  if (::fstat(guard.fd, &info) != 0) throw Error(name + ": cannot stat: " + errno_text());
  if (!S_ISREG(info.st_mode)) throw Error(name + ": not a regular file");
  if (info.st_size == 0) throw Error(name + ": file is empty (0 bytes)");
  const auto size = static_cast<uint64_t>(info.st_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (mapping == MAP_FAILED) throw Error(name + ": cannot mmap " + std::to_string(size) + " bytes: " + errno_text());
  data_ = static_cast<const uint8_t*>(mapping);
  size_ = size;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::drop_pages(uint64_t offset, uint64_t size) const {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (offset + page - 1) / page * page;
  const uint64_t end = std::min(offset + size, size_) / page * page;
  if (data_ == nullptr || end <= begin) return;
  // Advice only: a failure leaves the pages resident, which is what happens without it.
  (void)::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

void MappedFile::reset() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace loom::gguf
