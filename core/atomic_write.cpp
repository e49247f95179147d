#include "core/atomic_write.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "core/errors.h"

namespace sublet::io {
namespace {

std::string errno_text() { return std::strerror(errno); }

constexpr const char* kTemporaryInfix = ".tmp.";

// A name no concurrent writer of the same target can pick: pid plus a process-wide counter.
std::filesystem::path temporary_name_for(const std::filesystem::path& target) {
  static std::atomic<unsigned long> counter{0};
  std::filesystem::path temporary = target;
  temporary += kTemporaryInfix + std::to_string(::getpid()) + "." + std::to_string(counter++);
  return temporary;
}

// "<pid>.<n>": the tail of a name temporary_name_for makes.
bool is_temporary_suffix(std::string_view rest) {
  const std::size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot + 1 == rest.size()) return false;
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(rest.substr(0, dot)) && digits(rest.substr(dot + 1));
}

// A writer holds an exclusive flock on its temporary from creation until after the rename, and
// the kernel drops it when the writer dies. So a temporary of `target` whose lock is free was
// left by a save that was killed (or crashed) before its rename: removed here, so that saves
// killed again and again (preempted jobs) do not fill the disk with partial checkpoints. A live
// writer's temporary is locked and stays, whichever process, container or host (over NFS with
// locking) it runs in. Best effort: a leftover that cannot be examined stays for the next save.
void remove_abandoned_temporaries(const std::filesystem::path& target) {
  std::filesystem::path directory = target.parent_path();
  if (directory.empty()) directory = ".";
  const std::string prefix = target.filename().string() + kTemporaryInfix;
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    const std::filesystem::path candidate = it->path();
    const std::string name = candidate.filename().string();
    if (!name.starts_with(prefix) || !is_temporary_suffix(std::string_view(name).substr(prefix.size()))) continue;
    const int fd = ::open(candidate.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat held {}, named {};
    // Unlinked only while we hold its lock, and only if the name still leads to the file locked.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && held.st_nlink > 0 &&
        ::lstat(candidate.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      ::unlink(candidate.c_str());
    }
    ::close(fd);
  }
}

// Creates a new temporary for `target` and takes its lock; returns the descriptor, the lock lasts
// until it (and every dup of it) is closed. A remover may see the file between its creation and
// our flock and take it for abandoned; then our flock waits for it and finds the file unlinked,
// and we start over under a new name.
int create_locked_temporary(const std::filesystem::path& target, std::filesystem::path& temporary) {
  for (;;) {
    temporary = temporary_name_for(target);
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // left by an earlier process that had our pid
      throw IoError(target.string() + ": cannot create temporary file " + temporary.string() +
                    " for writing (" + errno_text() + ")");
    }
    // Where flock is not supported the save goes on unlocked: removers cannot lock there either.
    int locked = ::flock(fd, LOCK_EX);
    while (locked != 0 && errno == EINTR) locked = ::flock(fd, LOCK_EX);
    struct stat st {};
    if (locked == 0 && ::fstat(fd, &st) == 0 && st.st_nlink == 0) {
      ::close(fd);
      continue;
    }
    return fd;
  }
}

// Follows symbolic links (relative ones from the link's directory) to the file they lead to,
// which may not exist yet, and refuses what must not be replaced. `name` starts every message.
OutputTarget resolve_target(const std::filesystem::path& given, const std::string& name) {
  std::filesystem::path path = given;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return {path, false};
      throw IoError(name + ": cannot examine " + path.string() + " (" + errno_text() + ")");
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) throw IoError(name + ": too many levels of symbolic links");
      std::error_code error;
      const std::filesystem::path link = std::filesystem::read_symlink(path, error);
      if (error) throw IoError(name + ": cannot read the link " + path.string() + " (" + error.message() + ")");
      path = link.is_absolute() ? link : path.parent_path() / link;
      continue;
    }
    if (S_ISREG(st.st_mode)) return {path, false};
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {path, true};
    if (S_ISDIR(st.st_mode)) throw IoError(name + ": is a directory; expected a file name");
    throw IoError(name + ": is a " + std::string(S_ISBLK(st.st_mode) ? "block device" : "socket") +
                  "; expected a regular file, a character device or a FIFO (it is not replaced)");
  }
}

// A character device or FIFO: no temporary, no rename, no fsync (devices may not support it).
void write_in_place(const std::filesystem::path& given, const std::filesystem::path& device,
                    const std::function<void(std::FILE*)>& write_contents) {
  // O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of blocking the process forever. A
  // reader started just after this program (`sublet ... --json F & cat F`) gets a few seconds.
  constexpr auto kReaderWait = std::chrono::seconds(3);
  const auto give_up = std::chrono::steady_clock::now() + kReaderWait;
  int fd = ::open(device.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  while (fd < 0 && errno == ENXIO && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    fd = ::open(device.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  }
  if (fd < 0 && errno == ENXIO)
    throw IoError(given.string() + ": a FIFO with no reader (none came in 3 s; start the program that reads it first)");
  if (fd < 0) throw IoError(given.string() + ": cannot open for writing (" + errno_text() + ")");
  const int flags = ::fcntl(fd, F_GETFL);
  std::FILE* file = flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? nullptr : ::fdopen(fd, "wb");
  if (file == nullptr) {
    const std::string why = errno_text();
    ::close(fd);
    throw IoError(given.string() + ": cannot open for writing (" + why + ")");
  }
  try {
    write_contents(file);
    if (std::fflush(file) != 0) throw IoError(given.string() + ": write failed (disk full?) (" + errno_text() + ")");
  } catch (...) {
    std::fclose(file);
    throw;
  }
  if (std::fclose(file) != 0) throw IoError(given.string() + ": write failed (disk full?) (" + errno_text() + ")");
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
    throw IoError(path.string() + ": write failed (disk full?) after " + std::to_string(written) + " of " +
                  std::to_string(bytes) + " bytes (" + errno_text() + ")");
  }
}

OutputTarget check_writable_target(const std::filesystem::path& target, const std::string& what) {
  const OutputTarget resolved = resolve_target(target, what);
  if (resolved.in_place) {
    if (::access(resolved.path.c_str(), W_OK) != 0)
      throw IoError(what + ": cannot write to " + resolved.path.string() + " (" + errno_text() + ")");
    return resolved;
  }
  std::filesystem::path directory = resolved.path.parent_path();
  if (directory.empty()) directory = ".";
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0)
    throw IoError(what + ": the directory " + directory.string() + " does not exist");
  if (!S_ISDIR(st.st_mode)) throw IoError(what + ": " + directory.string() + " is not a directory");
  if (::access(directory.c_str(), W_OK | X_OK) != 0)
    throw IoError(what + ": cannot create files in " + directory.string() + " (" + errno_text() + ")");
  return resolved;
}

void write_atomically(const std::filesystem::path& given,
                      const std::function<void(std::FILE*)>& write_contents) {
  const OutputTarget resolved = resolve_target(given, given.string());
  if (resolved.in_place) return write_in_place(given, resolved.path, write_contents);
  const std::filesystem::path& target = resolved.path;
  remove_abandoned_temporaries(target);
  std::filesystem::path temporary;
  const int fd = create_locked_temporary(target, temporary);
  // A second descriptor keeps the lock after fclose, until the rename is done.
  const int lock_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  std::FILE* file = lock_fd < 0 ? nullptr : ::fdopen(fd, "wb");
  if (file == nullptr) {
    const std::string error = errno_text();
    ::unlink(temporary.c_str());
    ::close(fd);
    if (lock_fd >= 0) ::close(lock_fd);
    throw IoError(target.string() + ": cannot open temporary file " + temporary.string() + " for writing (" +
                  error + ")");
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
    ::close(lock_fd);
    throw;
  }
  ::close(lock_fd);
  fsync_directory_of(target);
}

void write_text_atomically(const std::filesystem::path& target, std::string_view text) {
  write_atomically(target, [&](std::FILE* file) { write_or_throw(file, text.data(), text.size(), target); });
}

}  // namespace sublet::io
