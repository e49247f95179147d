#include "runtime/data/regular_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "core/input_file.h"

namespace sublet::data {
namespace {

// A regular file opened by the one input opener (core/input_file.h: anything else is refused with
// an IoError naming the path); `size` is its length when opened. No size limit: token files are
// mapped, not read into memory.
struct OpenRegularFile {
  io::InputHandle file{nullptr, &std::fclose};
  int fd = -1;
  std::size_t size = 0;
};

OpenRegularFile open_regular(const std::filesystem::path& path) {
  OpenRegularFile opened;
  opened.file = io::open_input(path, {.kind = io::InputKind::regular_file, .max_bytes = SIZE_MAX});
  opened.fd = ::fileno(opened.file.get());
  struct stat info {};
  if (::fstat(opened.fd, &info) != 0) {
    throw IoError(path.string() + ": cannot read the file status (" + std::strerror(errno) + ")");
  }
  opened.size = static_cast<std::size_t>(info.st_size);
  return opened;
}

}  // namespace

std::vector<std::uint8_t> read_regular_file(const std::filesystem::path& path) {
  const OpenRegularFile file = open_regular(path);
  std::vector<std::uint8_t> bytes(file.size);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(file.fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw IoError(path.string() + ": read failed after " + std::to_string(done) + " of " +
                    std::to_string(bytes.size()) + " bytes (" + std::strerror(errno) + ")");
    }
    if (got == 0) {
      throw IoError(path.string() + ": file shrank while being read (" + std::to_string(done) +
                    " of " + std::to_string(bytes.size()) + " bytes)");
    }
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const OpenRegularFile file = open_regular(path);
  size_ = file.size;
  if (size_ == 0) return;  // mmap refuses a zero length; an empty span says the same
  void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapped == MAP_FAILED) {
    throw IoError(path.string() + ": cannot map " + std::to_string(size_) + " bytes (" +
                  std::strerror(errno) + ")");
  }
  data_ = static_cast<const std::uint8_t*>(mapped);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace sublet::data
