#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/errors.h"

namespace sublet::io {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

class Descriptor {
 public:
  explicit Descriptor(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~Descriptor() {
    if (owned_ && fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void release() const { owned_ = false; }

 private:
  int fd_;
  mutable bool owned_;
};

[[noreturn]] void fail(const std::string& name, const std::string& problem) { throw IoError(name + ": " + problem); }

// O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one.
int open_nonblocking(const std::filesystem::path& path, const std::string& name, struct stat& info) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) fail(name, "file not found");
    if (error == ENXIO) fail(name, "a socket or a device without a driver, expected a regular file");
    fail(name, std::string("cannot open for reading (") + std::strerror(error) + ")");
  }
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    fail(name, std::string("cannot read its status (") + std::strerror(error) + ")");
  }
  return fd;
}

void set_blocking(int fd, const std::string& name) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    fail(name, std::string("cannot switch to blocking reads (") + std::strerror(errno) + ")");
}

}  // namespace

bool input_exists(const std::filesystem::path& path) {
  std::error_code error;
  const bool there = std::filesystem::exists(path, error);
  if (error && error != std::errc::no_such_file_or_directory && error != std::errc::not_a_directory)
    throw IoError(path.string() + ": " + error.message());
  return there;
}

std::string describe_input(const std::filesystem::path& path, const std::string& what) {
  const std::string shown = path == "-" ? std::string("standard input") : path.string();
  return what.empty() ? shown : what + " " + shown;
}

InputHandle open_input(const std::filesystem::path& path, const InputFileOptions& options) {
  const std::string name = describe_input(path, options.what);
  const bool may_stream = options.kind == InputKind::file_or_stream;
  if (path == "-") {
    if (!may_stream) fail(name, "expected a file name; standard input (-) is read only for traces and snapshots");
    const int fd = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
    InputHandle file(fd < 0 ? nullptr : ::fdopen(fd, "rb"), &std::fclose);
    if (!file) fail(name, std::string("cannot read (") + std::strerror(errno) + ")");
    return file;
  }
  struct stat info {};
  const int fd = open_nonblocking(path, name, info);
  const Descriptor owner(fd, true);
  int first = EOF;
  if (S_ISREG(info.st_mode)) {
    const auto size = static_cast<std::size_t>(info.st_size);
    if (size > options.max_bytes)
      fail(name, std::to_string(size) + " bytes, more than the " + std::to_string(options.max_bytes) + "-byte limit for this input");
  } else if (!(may_stream && S_ISFIFO(info.st_mode))) {
    fail(name, "expected a regular file, found " + kind_of(info.st_mode) +
                   (may_stream && !S_ISDIR(info.st_mode) ? " (traces may also come from a pipe, or from - for standard input)"
                                                         : ""));
  } else {
    // A FIFO: an empty read with no writer is end-of-file, so a FIFO nobody writes to is refused;
    // with a writer the read would block (EAGAIN), so the rest is read blocking.
    unsigned char byte = 0;
    const ssize_t got = ::read(fd, &byte, 1);
    if (got == 0) fail(name, "a FIFO with no writer (start the program that writes it first, or pipe into -)");
    if (got < 0 && errno != EAGAIN) fail(name, std::string("read error (") + std::strerror(errno) + ")");
    if (got == 1) first = byte;
  }
  set_blocking(fd, name);
  InputHandle file(::fdopen(fd, "rb"), &std::fclose);
  if (!file) fail(name, std::string("cannot open for reading (") + std::strerror(errno) + ")");
  owner.release();
  if (first != EOF) std::ungetc(first, file.get());
  return file;
}

std::string read_rest(std::FILE* file, std::size_t max_bytes, const std::string& name) {
  std::string out;
  // A regular file's own size is the first read (one byte more, to see its end); a stream's reads
  // grow from 64 KiB. A buffer far larger than the input would cost its zero-filling on every read.
  std::size_t want = std::size_t{64} << 10;
  struct stat info {};
  if (::fstat(::fileno(file), &info) == 0 && S_ISREG(info.st_mode)) {
    const long at = std::ftell(file);
    const auto size = static_cast<std::size_t>(info.st_size);
    if (at >= 0 && static_cast<std::size_t>(at) <= size) want = size - static_cast<std::size_t>(at) + 1;
  }
  constexpr std::size_t kMaxRead = std::size_t{64} << 20;
  for (;;) {
    const std::size_t before = out.size();
    if (before > max_bytes) fail(name, "more than " + std::to_string(max_bytes) + " bytes, the limit for this input");
    want = std::min({want, kMaxRead, max_bytes + 1 - before});
    out.resize(before + want);
    const std::size_t got = std::fread(out.data() + before, 1, want, file);
    out.resize(before + got);
    if (got < want) {
      if (std::ferror(file)) fail(name, std::string("read error (") + std::strerror(errno) + ")");
      if (out.size() > max_bytes) fail(name, "more than " + std::to_string(max_bytes) + " bytes, the limit for this input");
      return out;
    }
    want = std::max(want, out.size());  // grows geometrically
  }
}

std::string read_input_file(const std::filesystem::path& path, const InputFileOptions& options) {
  const InputHandle file = open_input(path, options);
  return read_rest(file.get(), options.max_bytes, describe_input(path, options.what));
}

}  // namespace sublet::io
