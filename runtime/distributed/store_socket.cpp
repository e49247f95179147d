#include "runtime/distributed/store_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "core/errors.h"

namespace sublet::distributed::detail {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::vector<ResolvedAddress> resolve(const std::string& host, std::uint16_t port, const char* role) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (status != 0 || found == nullptr) {
    std::string reason = status == EAI_SYSTEM ? error_text(errno) : ::gai_strerror(status);
    throw DistributedError(std::string("store: ") + role + " '" + host + "' does not resolve (" + reason +
                           "); use a host name or IP address that every node can reach");
  }
  std::vector<ResolvedAddress> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    ResolvedAddress r;
    std::memcpy(&r.address, a->ai_addr, a->ai_addrlen);
    r.length = a->ai_addrlen;
    r.family = a->ai_family;
    addresses.push_back(r);
  }
  ::freeaddrinfo(found);
  return addresses;
}

std::string describe(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
  }
  if (address.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text));
    // Appends rather than "[" + string: GCC 12 reports a false -Wrestrict on the latter.
    std::string out = "[";
    out.append(text).append("]:").append(std::to_string(ntohs(a.sin6_port)));
    return out;
  }
  return "unknown address family " + std::to_string(address.ss_family);
}

std::string endpoint(const std::string& host, std::uint16_t port) {
  const bool ipv6_literal = host.find(':') != std::string::npos;
  return (ipv6_literal ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string describe_duration(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms < 120'000) {
    // One decimal, without trailing ".0": "1.5 s", "30 s".
    const auto tenths = (ms + 50) / 100;
    std::string out = std::to_string(tenths / 10);
    if (tenths % 10 != 0) out.append(".").append(std::to_string(tenths % 10));
    return out.append(" s");
  }
  return std::to_string((ms + 30'000) / 60'000) + " min";
}

int poll_timeout_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw DistributedError("store: cannot make a socket non-blocking: " + error_text(errno));
  }
}

void set_no_delay(int fd) {
  // Requests and answers are small and strictly alternate: Nagle's delay would only add latency.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string error_text(int error_number) {
  char buffer[256];
  // The GNU strerror_r returns the message (maybe not in buffer); the XSI one fills buffer.
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return ::strerror_r(error_number, buffer, sizeof(buffer));
#else
  if (::strerror_r(error_number, buffer, sizeof(buffer)) != 0) return "error " + std::to_string(error_number);
  return buffer;
#endif
}

std::string send_all(int fd, const void* data, std::size_t size, Clock::time_point deadline, const std::string& where) {
  const char* bytes = static_cast<const char*>(data);
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, bytes + sent, size - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return "store: sending to " + where + " failed: " + error_text(errno);
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, poll_timeout_until(deadline)) == 0) return "store: " + where + " accepted no data in time";
  }
  return {};
}

}  // namespace sublet::distributed::detail
