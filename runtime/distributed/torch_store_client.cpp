#include "runtime/distributed/torch_store_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/errors.h"
#include "runtime/distributed/store_socket.h"

namespace sublet::distributed {

using detail::Clock;
using detail::Fd;

namespace {

constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
enum Query : std::uint8_t { kValidate = 0, kSet = 1, kGet = 3, kAdd = 4, kCheck = 5 };
enum CheckAnswer : std::uint8_t { kReady = 0, kNotReady = 1 };
// A value larger than this is not one sublet wrote: the answer is taken as a protocol mismatch.
constexpr std::uint64_t kMaxValueBytes = 64ull * 1024 * 1024;

class Message {
 public:
  explicit Message(Query query) { bytes_.push_back(static_cast<char>(query)); }
  template <typename T>
  Message& value(T v) {
    char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));  // little-endian hosts only, as PyTorch's store
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  Message& text(std::string_view s) {
    value<std::uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

}  // namespace

struct TorchStoreClient::Impl {
  TorchStoreClientOptions options;
  std::string where;
  Fd fd;
  std::string broken;

  [[noreturn]] void fail(const std::string& reason) {
    broken = reason;
    fd.reset();
    throw DistributedError(reason);
  }

  void connect() {
    const auto deadline = Clock::now() + options.connect_timeout;
    const auto addresses = detail::resolve(options.host, options.port, "MASTER_ADDR");
    std::string last_error = "no address";
    auto pause = std::chrono::milliseconds(20);
    while (!fd) {
      for (const auto& address : addresses) {
        Fd s(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!s) {
          last_error = detail::error_text(errno);
          continue;
        }
        if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) == 0) {
          detail::set_no_delay(s.get());
          fd = std::move(s);
          break;
        }
        last_error = detail::error_text(errno);
      }
      if (fd) break;
      const auto now = Clock::now();
      if (now >= deadline) {
        throw DistributedError("store: could not connect to torchrun's agent store at " +
                               detail::endpoint(options.host, options.port) + " within " +
                               detail::describe_duration(options.connect_timeout) + " (last error: " + last_error +
                               "); TORCHELASTIC_USE_AGENT_STORE=True says the agent serves it on MASTER_PORT");
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::milliseconds(1'000));
    }
    detail::set_nonblocking(fd.get());
    send(Message(kValidate).value<std::uint32_t>(kValidationMagic), Clock::now() + options.timeout);
  }

  void send(const Message& message, Clock::time_point deadline) {
    if (!broken.empty()) throw DistributedError("store client unusable after an earlier failure: " + broken);
    const std::string& bytes = message.bytes();
    if (std::string error = detail::send_all(fd.get(), bytes.data(), bytes.size(), deadline, where); !error.empty())
      fail(error);
  }

  void receive(void* out, std::size_t size, Clock::time_point deadline) {
    auto* bytes = static_cast<char*>(out);
    std::size_t got = 0;
    while (got < size) {
      const ssize_t n = ::recv(fd.get(), bytes + got, size - got, 0);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
        continue;
      }
      if (n == 0) fail("store: " + where + " closed the connection (did torchrun's agent exit?)");
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail("store: receiving from " + where + " failed: " + detail::error_text(errno));
      pollfd p{fd.get(), POLLIN, 0};
      const int ready = ::poll(&p, 1, detail::poll_timeout_until(deadline));
      if (ready == 0) {
        fail("store: no answer from " + where + " within " + detail::describe_duration(options.timeout) +
             " (is it a PyTorch 2.x TCPStore? PyTorch 1.x speaks an older protocol)");
      }
    }
  }

  template <typename T>
  T receive_value(Clock::time_point deadline) {
    T value{};
    receive(&value, sizeof(T), deadline);
    return value;
  }

  bool ready(const std::vector<std::string>& keys) {
    Message m(kCheck);
    m.value<std::uint64_t>(keys.size());
    for (const std::string& key : keys) m.text(options.key_prefix + key);
    const auto deadline = Clock::now() + options.timeout;
    send(m, deadline);
    const auto answer = receive_value<std::uint8_t>(deadline);
    if (answer != kReady && answer != kNotReady)
      fail("store: " + where + " answered a CHECK with " + std::to_string(answer) + " (not PyTorch's TCPStore?)");
    return answer == kReady;
  }
};

TorchStoreClient::TorchStoreClient(TorchStoreClientOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->where = "torchrun's agent store at " + detail::endpoint(impl_->options.host, impl_->options.port);
  impl_->connect();
}

TorchStoreClient::~TorchStoreClient() = default;

std::string TorchStoreClient::describe() const { return impl_->where; }

void TorchStoreClient::set(const std::string& key, std::string_view value) {
  impl_->send(Message(kSet).text(impl_->options.key_prefix + key).text(value), Clock::now() + impl_->options.timeout);
}

std::string TorchStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  if (!wait_for_keys({key}, timeout).empty()) {
    throw DistributedError("store: get('" + key + "') timed out after " + detail::describe_duration(timeout) +
                           ": no rank set the key (" + impl_->where + ")");
  }
  const auto deadline = Clock::now() + impl_->options.timeout;
  impl_->send(Message(kGet).text(impl_->options.key_prefix + key), deadline);
  const auto size = impl_->receive_value<std::uint64_t>(deadline);
  if (size > kMaxValueBytes) impl_->fail("store: " + impl_->where + " sent a value of " + std::to_string(size) + " bytes");
  std::string value(size, '\0');
  impl_->receive(value.data(), size, deadline);
  return value;
}

std::int64_t TorchStoreClient::add(const std::string& key, std::int64_t delta) {
  const auto deadline = Clock::now() + impl_->options.timeout;
  impl_->send(Message(kAdd).text(impl_->options.key_prefix + key).value<std::int64_t>(delta), deadline);
  return impl_->receive_value<std::int64_t>(deadline);
}

std::vector<std::string> TorchStoreClient::wait_for_keys(const std::vector<std::string>& keys,
                                                         std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(2);
  while (!impl_->ready(keys)) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<std::string> missing;
      for (const std::string& key : keys)
        if (!impl_->ready({key})) missing.push_back(key);
      return missing;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  return {};
}

}  // namespace sublet::distributed
