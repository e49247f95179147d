// The store's client side: a blocking connection with a deadline on every step, and the
// rendezvous helpers built from set/add/wait. Also TcpStore, which puts server and client
// together the way a data-parallel worker needs them.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "core/errors.h"
#include "runtime/distributed/store_protocol.h"
#include "runtime/distributed/store_rendezvous.h"
#include "runtime/distributed/store_socket.h"
#include "runtime/distributed/tcp_store.h"
#include "runtime/distributed/torch_store_client.h"

namespace sublet::distributed {

using detail::Clock;
using detail::Fd;
namespace proto = protocol;

namespace {

// The server answers a timed-out Get/Wait itself; the client waits this much longer before it
// concludes that the server (not the key) is what is missing.
constexpr std::chrono::milliseconds kAnswerGrace{5'000};

std::uint32_t to_wire_timeout(std::chrono::milliseconds timeout) {
  const auto ms = std::max<std::int64_t>(timeout.count(), 0);
  return static_cast<std::uint32_t>(std::min<std::int64_t>(ms, std::numeric_limits<std::uint32_t>::max()));
}

// "a, b, c and 7 more": error messages stay readable for a thousand missing keys.
std::string list_some(const std::vector<std::string>& items, std::size_t shown = 10) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > shown) text += " and " + std::to_string(items.size() - shown) + " more";
  return text;
}

}  // namespace

struct StoreClient::Impl {
  StoreClientOptions options;
  std::string where;  // "store at host:port"
  Fd fd;
  std::vector<std::uint8_t> in;
  std::string broken;  // the first transport failure; set means unusable
  std::int64_t barriers_entered = 0;

  void connect();
  bool try_connect(const detail::ResolvedAddress& address, Clock::time_point deadline, std::string& error);
  proto::Response call(const proto::Request& request, Clock::time_point deadline);
  void send_all(const std::vector<std::uint8_t>& bytes, Clock::time_point deadline);
  proto::Response receive(Clock::time_point deadline);
  [[noreturn]] void fail(const std::string& reason) {
    broken = reason;
    fd.reset();
    throw DistributedError(reason);
  }
  // A Timeout answer lists the keys still missing; empty means everything arrived.
  std::vector<std::string> wait_missing(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
};

bool StoreClient::Impl::try_connect(const detail::ResolvedAddress& address, Clock::time_point deadline,
                                    std::string& error) {
  Fd socket_fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket_fd) {
    error = detail::error_text(errno);
    return false;
  }
  if (::connect(socket_fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) {
    if (errno != EINPROGRESS) {
      error = detail::error_text(errno);
      return false;
    }
    pollfd p{socket_fd.get(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, detail::poll_timeout_until(deadline));
    if (ready <= 0) {
      error = ready == 0 ? "no answer to the connection attempt" : detail::error_text(errno);
      return false;
    }
    int status = 0;
    socklen_t length = sizeof(status);
    ::getsockopt(socket_fd.get(), SOL_SOCKET, SO_ERROR, &status, &length);
    if (status != 0) {
      error = detail::error_text(status);
      return false;
    }
  }
  detail::set_no_delay(socket_fd.get());
  fd = std::move(socket_fd);
  return true;
}

void StoreClient::Impl::connect() {
  const auto deadline = Clock::now() + options.connect_timeout;
  const auto addresses = detail::resolve(options.host, options.port, "--master-addr");
  std::string last_error = "no address";
  // Rank 0 may start after the others: retry refused connections with a growing pause, and
  // once more at the deadline.
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    for (const auto& address : addresses) {
      if (try_connect(address, deadline, last_error)) break;
    }
    if (fd) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      throw DistributedError("store: could not connect to " + detail::endpoint(options.host, options.port) + " within " +
                             detail::describe_duration(options.connect_timeout) + " (last error: " + last_error +
                             "); is rank 0 running, and do all workers have the same MASTER_ADDR and MASTER_PORT?");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(1'000));
  }
  // The Hello gets what remains of the connect timeout, but at least a few seconds: a server
  // that accepted is alive and answers at once.
  const auto hello_deadline = std::max(deadline, Clock::now() + std::chrono::milliseconds(5'000));
  proto::Response answer;
  try {
    answer = call(proto::Request::hello(options.token),
                  hello_deadline);
  } catch (const DistributedError& e) {
    broken = std::string("store: ") + where + " closed the connection after this client's Hello (" + e.what() +
             "); a wrong " + kStoreTokenVariable + ", the store's connection limit, or another program on that port?";
    throw DistributedError(broken);
  }
  if (answer.op == proto::Opcode::Error) fail("store: " + where + " refused this client: " + answer.value);
  if (answer.op != proto::Opcode::Ok) fail("store: " + where + " answered the Hello with " + proto::opcode_name(answer.op));
}

proto::Response StoreClient::Impl::call(const proto::Request& request, Clock::time_point deadline) {
  if (!broken.empty()) throw DistributedError("store client unusable after an earlier failure: " + broken);
  const auto bytes = proto::encode_request(request);  // ValueError for bad keys, before any I/O
  send_all(bytes, deadline);
  return receive(deadline);
}

void StoreClient::Impl::send_all(const std::vector<std::uint8_t>& bytes, Clock::time_point deadline) {
  if (std::string error = detail::send_all(fd.get(), bytes.data(), bytes.size(), deadline, where); !error.empty()) fail(error);
}

proto::Response StoreClient::Impl::receive(Clock::time_point deadline) {
  for (;;) {
    auto parsed = proto::parse_response(in);
    if (parsed.status == proto::ParseStatus::Complete) {
      in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(parsed.consumed));
      return std::move(parsed.message);
    }
    if (parsed.status == proto::ParseStatus::Malformed) fail("store: malformed answer from " + where + ": " + parsed.error);
    pollfd p{fd.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, detail::poll_timeout_until(deadline));
    if (ready == 0) fail("store: no answer from " + where + " in time (is rank 0 still alive?)");
    if (ready < 0 && errno != EINTR) fail("store: waiting for " + where + " failed: " + detail::error_text(errno));
    std::uint8_t chunk[64 * 1024];
    const ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), 0);
    if (n == 0) fail("store: " + where + " closed the connection (did rank 0 exit?)");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail("store: receiving from " + where + " failed: " + detail::error_text(errno));
    }
    in.insert(in.end(), chunk, chunk + n);
  }
}

std::vector<std::string> StoreClient::Impl::wait_missing(const std::vector<std::string>& keys,
                                                         std::chrono::milliseconds timeout) {
  const auto answer = call(proto::Request::wait(keys, to_wire_timeout(timeout)),
                           Clock::now() + timeout + kAnswerGrace);
  if (answer.op == proto::Opcode::Ok) return {};
  if (answer.op == proto::Opcode::Timeout) return answer.keys;
  fail("store: " + where + " answered a Wait with " + proto::opcode_name(answer.op));
}

StoreClient::StoreClient(StoreClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->where = "store at " + detail::endpoint(impl_->options.host, impl_->options.port);
  impl_->connect();
}

StoreClient::~StoreClient() = default;

std::string StoreClient::endpoint() const { return detail::endpoint(impl_->options.host, impl_->options.port); }

void StoreClient::set(const std::string& key, std::string_view value) {
  const auto answer = impl_->call(proto::Request::set(key, std::string(value)),
                                  Clock::now() + impl_->options.timeout);
  if (answer.op == proto::Opcode::Error) throw DistributedError("store: set('" + key + "') failed: " + answer.value);
  if (answer.op != proto::Opcode::Ok) impl_->fail("store: " + impl_->where + " answered a Set with " + proto::opcode_name(answer.op));
}

std::string StoreClient::get(const std::string& key) { return get(key, impl_->options.timeout); }

std::string StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto answer = impl_->call(proto::Request::get(key, to_wire_timeout(timeout)),
                                  Clock::now() + timeout + kAnswerGrace);
  if (answer.op == proto::Opcode::Value) return answer.value;
  if (answer.op == proto::Opcode::Timeout) {
    throw DistributedError("store: get('" + key + "') timed out after " + detail::describe_duration(timeout) +
                           ": no rank set the key (" + impl_->where + ")");
  }
  impl_->fail("store: " + impl_->where + " answered a Get with " + proto::opcode_name(answer.op));
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, impl_->options.timeout); }

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto missing = impl_->wait_missing(keys, timeout);
  if (!missing.empty()) {
    throw DistributedError("store: wait timed out after " + detail::describe_duration(timeout) + "; " +
                           std::to_string(missing.size()) + " of " + std::to_string(keys.size()) +
                           " keys still missing: " + list_some(missing) + " (" + impl_->where + ")");
  }
}

std::int64_t StoreClient::add(const std::string& key, std::int64_t delta) {
  const auto answer = impl_->call(proto::Request::add(key, delta),
                                  Clock::now() + impl_->options.timeout);
  if (answer.op == proto::Opcode::Count) return answer.count;
  if (answer.op == proto::Opcode::Error) throw DistributedError("store: add('" + key + "') failed: " + answer.value);
  impl_->fail("store: " + impl_->where + " answered an Add with " + proto::opcode_name(answer.op));
}

void StoreClient::announce_rank(int rank) { distributed::announce_rank(*this, rank); }

void StoreClient::wait_for_ranks(int world_size, std::chrono::milliseconds timeout) {
  distributed::wait_for_ranks(*this, world_size, timeout);
}

void StoreClient::barrier(int world_size, std::chrono::milliseconds timeout) {
  // Every rank enters barriers in the same order, so the n-th barrier has the same keys on all.
  store_barrier(*this, world_size, impl_->barriers_entered++, timeout);
}

std::vector<std::string> StoreClient::wait_for_keys(const std::vector<std::string>& keys,
                                                    std::chrono::milliseconds timeout) {
  return impl_->wait_missing(keys, timeout);
}

std::string StoreClient::describe() const { return impl_->where; }

namespace {

std::string agent_store_prefix(const LaunchEnv& env) {
  return "/worker/attempt_" + std::to_string(env.restart_count) + "/";
}

}  // namespace

TcpStore::TcpStore(const LaunchEnv& env, TcpStoreOptions options) : env_(env), options_(std::move(options)) {
  if (env_.agent_store) {
    store_ = connect_another(options_.timeout);
    return;
  }
  if (env_.store_token.empty()) {
    if (env_.world_size > 1) {
      throw ValueError(std::string("store: WORLD_SIZE ") + std::to_string(env_.world_size) + " needs " +
                       kStoreTokenVariable + " (launch_env_from enforces it)");
    }
    env_.store_token = generate_store_token();  // nobody else has to know it
  }
  if (env_.rank == 0) {
    server_ = std::make_unique<StoreServer>(StoreServerOptions{.host = env_.master_addr,
                                                               .port = env_.master_port,
                                                               .token = env_.store_token,
                                                               .max_store_bytes = options_.max_store_bytes,
                                                               .log = options_.log});
  }
  store_ = connect_another(options_.timeout);
}

TcpStore::~TcpStore() = default;

std::unique_ptr<Store> TcpStore::connect_another(std::chrono::milliseconds timeout) const {
  if (env_.agent_store) {
    return std::make_unique<TorchStoreClient>(TorchStoreClientOptions{.host = env_.master_addr,
                                                                      .port = env_.master_port,
                                                                      .key_prefix = agent_store_prefix(env_),
                                                                      .connect_timeout = options_.timeout,
                                                                      .timeout = timeout});
  }
  return std::make_unique<StoreClient>(StoreClientOptions{.host = env_.master_addr,
                                                          .port = server_ ? server_->port() : env_.master_port,
                                                          .token = env_.store_token,
                                                          .connect_timeout = options_.timeout,
                                                          .timeout = timeout});
}

StoreClient& TcpStore::client() {
  auto* client = dynamic_cast<StoreClient*>(store_.get());
  if (!client) throw DistributedError("store: this worker uses torchrun's agent store, not sublet's own");
  return *client;
}

void TcpStore::rendezvous() {
  announce_rank(*store_, env_.rank);
  wait_for_ranks(*store_, env_.world_size, options_.timeout);
}

void TcpStore::barrier() { store_barrier(*store_, env_.world_size, barriers_entered_++, options_.timeout); }

}  // namespace sublet::distributed
