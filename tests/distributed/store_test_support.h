#pragma once
// A store server on an ephemeral loopback port with a captured log, and a raw socket for
// playing a hostile or broken client byte by byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/distributed/tcp_store.h"

namespace sublet::distributed::testing {

inline const std::string kToken = "test-token-0123456789";

// Log lines the server's thread writes, read from the test's thread.
class CapturedLog {
 public:
  StoreLogger logger() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex_);
      lines_.push_back(line);
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  // Waits up to a second for a line containing `text` (the server logs from its own thread).
  bool contains(const std::string& text) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    do {
      for (const auto& line : lines()) {
        if (line.find(text) != std::string::npos) return true;
      }
      usleep(5000);
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

struct LoopbackStore {
  CapturedLog log;
  std::unique_ptr<StoreServer> server;

  explicit LoopbackStore(StoreServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    if (options.token.empty()) options.token = kToken;
    options.log = log.logger();
    server = std::make_unique<StoreServer>(options);
  }

  std::unique_ptr<StoreClient> client(std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                      const std::string& token = kToken) const {
    return std::make_unique<StoreClient>(StoreClientOptions{.host = "127.0.0.1",
                                                            .port = server->port(),
                                                            .token = token,
                                                            .connect_timeout = std::chrono::seconds(5),
                                                            .timeout = timeout});
  }
};

// A port nothing listens on (bound once to get a free number, then released).
inline std::uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// A plain TCP connection to 127.0.0.1:port that sends whatever the test says.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port, const char* ipv4 = "127.0.0.1") : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    ::inet_pton(AF_INET, ipv4, &address.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }

  // Sends all bytes; false once the server has closed the connection.
  bool send_bytes(const std::vector<std::uint8_t>& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  bool send_text(const std::string& text) { return send_bytes({text.begin(), text.end()}); }

  // True when the server closes the connection within `timeout` (reads and drops any answer
  // that comes first, such as an Error message).
  bool closed_by_server(std::chrono::milliseconds timeout = std::chrono::seconds(3)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;  // EOF or reset
      received_.append(buffer, static_cast<std::size_t>(n));
    }
  }
  const std::string& received() const { return received_; }

 private:
  int fd_;
  bool connected_ = false;
  std::string received_;
};

}  // namespace sublet::distributed::testing
