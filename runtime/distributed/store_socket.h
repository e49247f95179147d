#pragma once
// The POSIX socket pieces the store's server and client share: an owning descriptor, name
// resolution with the store's error messages, and readable durations for those messages.
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sublet::distributed::detail {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor; closes it once.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

struct ResolvedAddress {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family = 0;
};

// Every TCP address of host:port. Throws DistributedError naming the host when it does not
// resolve (`role` says whose address it is in the message, e.g. "--master-addr").
std::vector<ResolvedAddress> resolve(const std::string& host, std::uint16_t port, const char* role);

// "127.0.0.1:4242" or "[::1]:4242" for a connected or bound socket address.
std::string describe(const sockaddr_storage& address);
// "host:port" as the user wrote it, for messages.
std::string endpoint(const std::string& host, std::uint16_t port);

// "250 ms", "1.5 s", "2 min": durations as a person reads them in an error message.
std::string describe_duration(std::chrono::milliseconds duration);

// Milliseconds from now until `deadline`, clamped to [0, INT_MAX] for poll().
int poll_timeout_until(Clock::time_point deadline);

void set_nonblocking(int fd);
void set_no_delay(int fd);
// errno as text (strerror is not thread-safe; this is).
std::string error_text(int error_number);
// Sends all `size` bytes on the non-blocking socket `fd` before `deadline`. Returns "" when sent,
// else why not (naming `where`), for the caller's own failure path.
std::string send_all(int fd, const void* data, std::size_t size, Clock::time_point deadline, const std::string& where);

}  // namespace sublet::distributed::detail
