#include "runtime/io/atomic_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "memory/errors.h"

namespace sublet::io {
namespace {

std::string errno_text() { return std::strerror(errno); }

// A name no concurrent writer of the same target can pick: pid plus a process-wide counter.
std::filesystem::path temporary_name_for(const std::filesystem::path& target) {
  static std::atomic<unsigned long> counter{0};
  std::filesystem::path temporary = target;
  temporary += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  return temporary;
}

void fsync_directory_of(const std::filesystem::path& target) {
  std::filesystem::path directory = target.parent_path();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    throw IoError(directory.string() + ": cannot open directory to make the rename of " +
                  target.filename().string() + " durable (" + errno_text() + ")");
  }
  const int rc = ::fsync(fd);
  const std::string error = rc == 0 ? "" : errno_text();
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); the rename has happened, so only
  // report real I/O errors.
  if (rc != 0 && error != std::strerror(EINVAL)) {
    throw IoError(directory.string() + ": fsync of directory failed (" + error + ")");
  }
}

}  // namespace

void write_or_throw(std::FILE* file, const void* data, std::size_t bytes,
                    const std::filesystem::path& path) {
  if (bytes == 0) return;
  const std::size_t written = std::fwrite(data, 1, bytes, file);
  if (written != bytes) {
    throw IoError(path.string() + ": write failed after " + std::to_string(written) + " of " +
                  std::to_string(bytes) + " bytes (" + errno_text() + ")");
  }
}

void write_atomically(const std::filesystem::path& target,
                      const std::function<void(std::FILE*)>& write_contents) {
  const std::filesystem::path temporary = temporary_name_for(target);
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (file == nullptr) {
    throw IoError(target.string() + ": cannot create temporary file " + temporary.string() +
                  " for writing (" + errno_text() + ")");
  }
  try {
    write_contents(file);
    if (std::fflush(file) != 0) {
      throw IoError(temporary.string() + ": flush failed (" + errno_text() + ")");
    }
    if (::fsync(::fileno(file)) != 0) {
      throw IoError(temporary.string() + ": fsync failed (" + errno_text() + ")");
    }
    const int close_rc = std::fclose(file);
    file = nullptr;
    if (close_rc != 0) {
      throw IoError(temporary.string() + ": close failed (" + errno_text() + ")");
    }
    if (std::rename(temporary.c_str(), target.c_str()) != 0) {
      throw IoError(target.string() + ": cannot rename temporary " + temporary.string() +
                    " over it (" + errno_text() + ")");
    }
  } catch (...) {
    if (file != nullptr) std::fclose(file);
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  fsync_directory_of(target);
}

}  // namespace sublet::io
