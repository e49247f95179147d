// The store's server: one thread polls the listening socket, a wake pipe and every connection.
// All store state belongs to that thread, so it needs no locks; the public object only starts
// and stops it.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/errors.h"
#include "runtime/distributed/store_protocol.h"
#include "runtime/distributed/store_socket.h"
#include "runtime/distributed/tcp_store.h"

namespace sublet::distributed {

using detail::Clock;
using detail::Fd;
namespace proto = protocol;

void log_to_stderr(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

namespace {

// Bookkeeping charged per entry on top of its key and value, so that a flood of empty values
// still meets max_store_bytes.
constexpr std::size_t kEntryOverhead = 64;
constexpr std::size_t kReadChunk = 64 * 1024;

// Token comparison whose time depends only on the length of the expected token, not on how
// many leading bytes of a guess are right.
bool tokens_equal(const std::string& expected, const std::string& presented) {
  unsigned difference = expected.size() == presented.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    difference |= static_cast<unsigned>(static_cast<unsigned char>(expected[i]) ^ p);
  }
  return difference == 0;
}

std::optional<std::int64_t> parse_counter(const std::string& text) {
  std::int64_t value = 0;
  const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || stop != text.data() + text.size()) return std::nullopt;
  return value;
}

// A Get or Wait whose keys are not all there yet: answered when they are, or at the deadline.
// (Declared outside Connection: clang 14 cannot construct a nested struct with default member
// initialisers inside std::optional of its enclosing class.)
struct PendingWait {
  std::vector<std::string> keys;
  std::size_t first_missing = 0;  // keys before it are known to exist (keys are never removed)
  bool is_get = false;
  Clock::time_point deadline;
};

struct Connection {
  Fd fd;
  std::string peer;
  bool admitted = false;
  Clock::time_point hello_deadline;
  std::vector<std::uint8_t> in;
  std::vector<std::uint8_t> out;
  std::size_t out_sent = 0;
  std::optional<PendingWait> pending;
  bool closed = false;
};

}  // namespace

struct StoreServer::Impl {
  StoreServerOptions options;
  std::string name;  // "store at host:port" for log lines
  Fd listener;
  Fd wake_read;
  Fd wake_write;
  std::uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> refused{0};
  std::thread thread;

  std::unordered_map<std::string, std::string> data;
  std::size_t data_bytes = 0;
  std::vector<std::unique_ptr<Connection>> connections;
  // Out of file descriptors (EMFILE): the listener stays readable, so it is left out of poll
  // for a moment instead of spinning on accept.
  std::optional<Clock::time_point> accept_paused_until;
  bool accept_starved_logged = false;  // one log line per shortage, not one per retry

  void listen_on_master_address();
  void serve();
  void accept_all();
  void read_from(Connection& c);
  void handle(Connection& c, proto::Request&& request);
  void handle_hello(Connection& c, const proto::Request& request);
  void reply(Connection& c, const proto::Response& response);
  void flush(Connection& c);
  void refuse(Connection& c, const std::string& reason, const std::string& answer = {});
  void close_quietly(Connection& c) { c.closed = true; c.fd.reset(); }
  void answer_satisfied_waits();
  void expire(Clock::time_point now);
  std::optional<Clock::time_point> next_deadline() const;
  void log(const std::string& line) {
    if (options.log) options.log(name + ": " + line);
  }
};

void StoreServer::Impl::listen_on_master_address() {
  const auto addresses = detail::resolve(options.host, options.port, "--master-addr");
  const std::string where = detail::endpoint(options.host, options.port);
  std::string last_error = "no usable address";
  for (const auto& address : addresses) {
    Fd fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last_error = detail::error_text(errno);
      continue;
    }
    // SO_REUSEADDR lets a restarted job bind while the previous run's sockets sit in
    // TIME_WAIT; a port with a live listener still fails with EADDRINUSE.
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) {
      const int error = errno;
      if (error == EADDRINUSE) {
        throw DistributedError("store: cannot listen on " + where +
                               ": the address is already in use (another job, or a store of an earlier run "
                               "still alive?); choose another --master-port / MASTER_PORT");
      }
      if (error == EADDRNOTAVAIL) {
        throw DistributedError("store: cannot listen on " + where + ": " + options.host +
                               " is not an address of this machine; rank 0 must run on the --master-addr host");
      }
      last_error = detail::error_text(error);
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      last_error = detail::error_text(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length);
    port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                             : reinterpret_cast<sockaddr_in&>(bound).sin_port);
    detail::set_nonblocking(fd.get());
    listener = std::move(fd);
    return;
  }
  throw DistributedError("store: cannot listen on " + where + ": " + last_error);
}

void StoreServer::Impl::serve() {
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    fds.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    if (accept_paused_until && Clock::now() >= *accept_paused_until) accept_paused_until.reset();
    fds.push_back({accept_paused_until ? -1 : listener.get(), POLLIN, 0});  // poll skips fd -1
    for (const auto& c : connections) {
      const short events = static_cast<short>(POLLIN | (c->out_sent < c->out.size() ? POLLOUT : 0));
      fds.push_back({c->fd.get(), events, 0});
    }
    const auto deadline = next_deadline();
    const int timeout = deadline ? detail::poll_timeout_until(*deadline) : -1;
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      log("poll failed (" + detail::error_text(errno) + "); the store stops serving");
      return;
    }
    if (fds[0].revents != 0) break;  // the destructor's wake-up
    // Connections accepted now are polled from the next round on: fds covers the older ones.
    const std::size_t polled = fds.size() - 2;
    for (std::size_t i = 0; i < polled; ++i) {
      Connection& c = *connections[i];
      const short revents = fds[i + 2].revents;
      try {
        if (revents & (POLLIN | POLLHUP | POLLERR)) read_from(c);
        if (!c.closed && (revents & POLLOUT)) flush(c);
      } catch (const std::exception& e) {
        // Whatever one connection caused (even bad_alloc) ends that connection, not the store.
        refuse(c, std::string("internal error: ") + e.what());
      }
    }
    if (fds[1].revents & POLLIN) accept_all();
    answer_satisfied_waits();
    expire(Clock::now());
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c->closed; });
  }
}

void StoreServer::Impl::accept_all() {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (!accept_starved_logged) log("cannot accept connections (" + detail::error_text(errno) + "); retrying every 100 ms");
        accept_starved_logged = true;
        accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: accepted everything waiting
    }
    accept_starved_logged = false;
    auto c = std::make_unique<Connection>();
    c->fd = std::move(fd);
    c->peer = detail::describe(address);
    if (connections.size() >= options.max_connections) {
      refused.fetch_add(1);
      log("refused connection from " + c->peer + ": already " + std::to_string(connections.size()) +
          " connections (the limit)");
      continue;
    }
    detail::set_no_delay(c->fd.get());
    c->hello_deadline = Clock::now() + options.hello_timeout;
    connections.push_back(std::move(c));
  }
}

void StoreServer::Impl::read_from(Connection& c) {
  // Before its token a connection may only send a Hello: reading no more than one keeps an
  // unadmitted connection's buffer under a kilobyte, however many of them there are.
  const std::size_t chunk = c.admitted ? kReadChunk : proto::kLengthFieldBytes + proto::kMaxHelloFrameBytes;
  const std::size_t old_size = c.in.size();
  c.in.resize(old_size + chunk);
  const ssize_t n = ::recv(c.fd.get(), c.in.data() + old_size, chunk, 0);
  c.in.resize(old_size + (n > 0 ? static_cast<std::size_t>(n) : 0));
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    // An admitted client leaving is the normal end of a job; one that never said Hello is not.
    if (!c.admitted) {
      refused.fetch_add(1);
      log("connection from " + c.peer + " closed before presenting a token");
    }
    close_quietly(c);
    return;
  }
  std::size_t offset = 0;
  while (!c.closed) {
    proto::ParseLimits limits;
    // Until the token is checked only a Hello may come, so nothing larger is buffered.
    limits.max_frame_bytes = c.admitted ? proto::kMaxFrameBytes : proto::kMaxHelloFrameBytes;
    const std::span<const std::uint8_t> rest(c.in.data() + offset, c.in.size() - offset);
    auto parsed = proto::parse_request(rest, limits);
    if (parsed.status == proto::ParseStatus::Incomplete) break;
    if (parsed.status == proto::ParseStatus::Malformed) {
      refuse(c, "malformed message: " + parsed.error);
      return;
    }
    offset += parsed.consumed;
    if (c.pending || c.out_sent < c.out.size()) {
      refuse(c, std::string(proto::opcode_name(parsed.message.op)) +
                    " sent before the previous answer (one request at a time)");
      return;
    }
    handle(c, std::move(parsed.message));
  }
  if (!c.closed) c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(offset));
}

void StoreServer::Impl::handle(Connection& c, proto::Request&& request) {
  if (!c.admitted || request.op == proto::Opcode::Hello) {
    handle_hello(c, request);
    return;
  }
  const auto now = Clock::now();
  switch (request.op) {
    case proto::Opcode::Set: {
      const auto existing = data.find(request.key);
      const std::size_t old_bytes = existing == data.end() ? 0 : request.key.size() + existing->second.size() + kEntryOverhead;
      const std::size_t new_bytes = request.key.size() + request.value.size() + kEntryOverhead;
      if (data_bytes - old_bytes + new_bytes > options.max_store_bytes) {
        reply(c, proto::Response::error("store full: setting '" + request.key + "' would take " +
                           std::to_string(data_bytes - old_bytes + new_bytes) + " bytes, the limit is " +
                           std::to_string(options.max_store_bytes)));
        return;
      }
      data_bytes = data_bytes - old_bytes + new_bytes;
      data[request.key] = std::move(request.value);
      reply(c, proto::Response::ok());
      return;
    }
    case proto::Opcode::Add: {
      const auto existing = data.find(request.key);
      std::int64_t value = 0;
      if (existing != data.end()) {
        const auto counter = parse_counter(existing->second);
        if (!counter) {
          reply(c, proto::Response::error("add: '" + request.key + "' holds a value that is not a counter"));
          return;
        }
        value = *counter;
      }
      if (__builtin_add_overflow(value, request.delta, &value)) {
        reply(c, proto::Response::error("add: counter '" + request.key + "' would overflow"));
        return;
      }
      std::string text = std::to_string(value);
      const std::size_t old_bytes = existing == data.end() ? 0 : request.key.size() + existing->second.size() + kEntryOverhead;
      const std::size_t new_bytes = request.key.size() + text.size() + kEntryOverhead;
      if (data_bytes - old_bytes + new_bytes > options.max_store_bytes) {
        reply(c, proto::Response::error("store full: cannot create counter '" + request.key + "'"));
        return;
      }
      data_bytes = data_bytes - old_bytes + new_bytes;
      data[request.key] = std::move(text);
      reply(c, proto::Response::count_of(value));
      return;
    }
    case proto::Opcode::Get: {
      const auto found = data.find(request.key);
      if (found != data.end()) {
        reply(c, proto::Response::value_of(found->second));
        return;
      }
      c.pending.emplace();
      c.pending->keys.push_back(std::move(request.key));
      c.pending->is_get = true;
      c.pending->deadline = now + std::chrono::milliseconds(request.timeout_ms);
      return;
    }
    case proto::Opcode::Wait:
      c.pending.emplace();
      c.pending->keys = std::move(request.keys);
      c.pending->deadline = now + std::chrono::milliseconds(request.timeout_ms);
      return;  // answered (maybe at once) by answer_satisfied_waits
    default:
      refuse(c, std::string("unexpected ") + proto::opcode_name(request.op));  // the parser admits no others
  }
}

void StoreServer::Impl::handle_hello(Connection& c, const proto::Request& request) {
  if (c.admitted) {
    refuse(c, "a second Hello on an admitted connection");
    return;
  }
  if (request.op != proto::Opcode::Hello) {
    refuse(c, std::string("first message was ") + proto::opcode_name(request.op) + ", not a Hello with the job's token");
    return;
  }
  if (request.version != proto::kProtocolVersion) {
    const std::string why = "protocol version " + std::to_string(request.version) + ", this store speaks version " +
                            std::to_string(proto::kProtocolVersion);
    refuse(c, why, why + " (sublet builds differ between ranks?)");
    return;
  }
  if (!tokens_equal(options.token, request.token)) {
    refuse(c, "wrong token", "wrong store token: every worker must get the same " + std::string(kStoreTokenVariable));
    return;
  }
  c.admitted = true;
  reply(c, proto::Response::ok());
}

void StoreServer::Impl::reply(Connection& c, const proto::Response& response) {
  try {
    const auto bytes = proto::encode_response(response);
    c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    refuse(c, std::string("cannot answer: ") + e.what());
    return;
  }
  flush(c);
}

void StoreServer::Impl::flush(Connection& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // poll says when to go on
      close_quietly(c);  // the peer went away; nothing is owed to it
      return;
    }
    c.out_sent += static_cast<std::size_t>(n);
  }
  c.out.clear();
  c.out_sent = 0;
}

void StoreServer::Impl::refuse(Connection& c, const std::string& reason, const std::string& answer) {
  refused.fetch_add(1);
  log("closed connection from " + c.peer + ": " + reason);
  if (!answer.empty()) {
    // One best-effort, non-blocking send: a few bytes fit the socket buffer, and a peer that
    // does not read them is not waited for.
    const auto bytes = proto::encode_response(proto::Response::error(answer));
    [[maybe_unused]] const ssize_t n = ::send(c.fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  close_quietly(c);
}

void StoreServer::Impl::answer_satisfied_waits() {
  for (auto& c : connections) {
    if (c->closed || !c->pending) continue;
    auto& p = *c->pending;
    while (p.first_missing < p.keys.size() && data.contains(p.keys[p.first_missing])) ++p.first_missing;
    if (p.first_missing < p.keys.size()) continue;
    proto::Response response = proto::Response::ok();
    if (p.is_get) response = proto::Response::value_of(data.at(p.keys.front()));
    c->pending.reset();
    reply(*c, response);
  }
}

void StoreServer::Impl::expire(Clock::time_point now) {
  for (auto& c : connections) {
    if (c->closed) continue;
    if (!c->admitted && now >= c->hello_deadline) {
      refuse(*c, "no token presented within " + detail::describe_duration(options.hello_timeout));
      continue;
    }
    if (c->pending && now >= c->pending->deadline) {
      proto::Response response = proto::Response::timeout({});
      for (auto& key : c->pending->keys) {
        if (!data.contains(key)) response.keys.push_back(std::move(key));
      }
      c->pending.reset();
      reply(*c, response);
    }
  }
}

std::optional<Clock::time_point> StoreServer::Impl::next_deadline() const {
  std::optional<Clock::time_point> next;
  const auto consider = [&next](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  if (accept_paused_until) consider(*accept_paused_until);
  for (const auto& c : connections) {
    if (!c->admitted) consider(c->hello_deadline);
    if (c->pending) consider(c->pending->deadline);
  }
  return next;
}

StoreServer::StoreServer(StoreServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.token.empty()) throw ValueError("store: the server needs a non-empty token");
  impl_->options = std::move(options);
  impl_->listen_on_master_address();
  impl_->name = "sublet store at " + detail::endpoint(impl_->options.host, impl_->port);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw DistributedError("store: cannot create the server's wake-up pipe: " + detail::error_text(errno));
  }
  impl_->wake_read = Fd(pipe_fds[0]);
  impl_->wake_write = Fd(pipe_fds[1]);
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

StoreServer::~StoreServer() {
  impl_->stopping.store(true);
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(impl_->wake_write.get(), &byte, 1);
  impl_->thread.join();
}

std::uint16_t StoreServer::port() const { return impl_->port; }
const std::string& StoreServer::host() const { return impl_->options.host; }
std::size_t StoreServer::refused_connections() const { return impl_->refused.load(); }

}  // namespace sublet::distributed
