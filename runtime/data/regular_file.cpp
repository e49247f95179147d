#include "runtime/data/regular_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace sublet::data {
namespace {

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Owns a file descriptor of a regular file; `size` is its length when opened.
struct OpenRegularFile {
  int fd = -1;
  std::size_t size = 0;
  ~OpenRegularFile() {
    if (fd >= 0) ::close(fd);
  }
};

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer before fstat could
// tell what it is.
void open_regular(const std::filesystem::path& path, OpenRegularFile& file) {
  file.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (file.fd < 0) {
    const int error = errno;
    if (error == ENOENT) throw IoError(path.string() + ": file not found");
    throw IoError(path.string() + ": cannot open for reading (" + std::strerror(error) + ")");
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) {
    throw IoError(path.string() + ": cannot read the file status (" + std::strerror(errno) + ")");
  }
  if (!S_ISREG(info.st_mode)) {
    throw IoError(path.string() + ": expected a regular file, found " + file_kind(info.st_mode));
  }
  file.size = static_cast<std::size_t>(info.st_size);
}

}  // namespace

std::vector<std::uint8_t> read_regular_file(const std::filesystem::path& path) {
  OpenRegularFile file;
  open_regular(path, file);
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
  OpenRegularFile file;
  open_regular(path, file);
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
