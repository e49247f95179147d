#pragma once
// A small TCP key-value store for rendezvous, in the manner of PyTorch's TCPStore: rank 0 serves
// it (one thread, POSIX sockets and poll), every rank is a client. Data parallel uses it to
// share the NCCL unique id, to see that every rank has joined, and for barriers before the
// communicator exists.
//
// It listens on a network port, so the server treats every byte as untrusted:
// - it binds to the master address only (never to every interface);
// - a client's first message must be a Hello carrying the job's token (compared in constant
//   time); anything else closes the connection;
// - keys, values, messages, the store's total size and the number of connections are bounded,
//   and a client may have one request in flight, so memory stays bounded whatever peers send:
//   under 1 KiB per connection before its token, about two largest messages (2 MiB) after;
// - a malformed, oversized or foreign message closes that connection and logs why; the server
//   keeps serving everyone else.
// Wire format: store_protocol.h.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/distributed/launch_env.h"
#include "runtime/distributed/store.h"

namespace sublet::distributed {

// Receives one line per event worth a log entry (a refused or closed connection and why).
// Called from the server's thread.
using StoreLogger = std::function<void(const std::string& line)>;
void log_to_stderr(const std::string& line);

struct StoreServerOptions {
  std::string host = "127.0.0.1";  // the address to bind: MASTER_ADDR
  std::uint16_t port = 0;          // 0: an ephemeral port, read back with port()
  std::string token;               // the secret clients must present (non-empty)
  // Sum over entries of key + value + 64 bytes of bookkeeping; a Set beyond it is answered
  // with an error (the connection stays open).
  std::size_t max_store_bytes = 64 * 1024 * 1024;
  // Connections beyond this are accepted and closed at once (with a log line).
  std::size_t max_connections = 4096;
  // A client must present its token this soon after connecting, so idle connections cannot
  // hold the server's slots.
  std::chrono::milliseconds hello_timeout{10'000};
  StoreLogger log = log_to_stderr;
};

class StoreServer {
 public:
  // Binds and listens before returning, so every listening error is thrown here
  // (DistributedError: the address does not resolve, the port is in use, ...); then serves from
  // its own thread until destroyed.
  explicit StoreServer(StoreServerOptions options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  std::uint16_t port() const;
  const std::string& host() const;
  // Connections closed for breaking the rules (no token, wrong token, malformed messages, ...).
  std::size_t refused_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct StoreClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;
  // How long to keep retrying while nothing listens yet (rank 0 may start last).
  std::chrono::milliseconds connect_timeout{300'000};
  // get/wait/barrier/wait_for_ranks without an explicit timeout, and the wait for any answer.
  std::chrono::milliseconds timeout{300'000};
};

// One connection to the store. Not thread-safe: one thread per client (requests strictly
// alternate with answers on the connection). After a transport failure or a timeout without an
// answer the client is unusable and every later call throws that first error again.
class StoreClient final : public Store {
 public:
  // Connects (retrying until connect_timeout) and presents the token. Throws DistributedError:
  // the host does not resolve, nothing accepted the connection in time, or the store refused
  // the token.
  explicit StoreClient(StoreClientOptions options);
  ~StoreClient() override;
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // Values are bytes (std::string as a byte container); keys are printable ASCII. A key or
  // value over the limits of store_protocol.h throws ValueError before anything is sent.
  void set(const std::string& key, std::string_view value) override;
  // Blocks until the key exists; DistributedError naming the key and the wait on timeout.
  std::string get(const std::string& key);
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  // Blocks until every key exists; DistributedError naming the missing keys on timeout.
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // Adds delta to the counter at key (a missing key counts from 0) and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::string> wait_for_keys(const std::vector<std::string>& keys,
                                         std::chrono::milliseconds timeout) override;

  // Rendezvous: every rank announces itself, then waits for all. On timeout the error names
  // the ranks that never announced themselves.
  void announce_rank(int rank);
  void wait_for_ranks(int world_size, std::chrono::milliseconds timeout);
  // Returns once `world_size` ranks have entered the same (n-th) barrier. Each barrier leaves
  // two small keys behind: meant for setup and teardown, not for every training step (NCCL's
  // collectives serve those).
  void barrier(int world_size, std::chrono::milliseconds timeout);

  std::string endpoint() const;
  std::string describe() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreOptions {
  std::chrono::milliseconds timeout{300'000};  // connect, rendezvous and default operation timeout
  std::size_t max_store_bytes = 64 * 1024 * 1024;
  StoreLogger log = log_to_stderr;
};

// The store as a data-parallel worker sees it. Usually rank 0 serves sublet's store on
// MASTER_ADDR:MASTER_PORT and every rank (rank 0 included) holds a client. Under torchrun with
// TORCHELASTIC_USE_AGENT_STORE=True the agent already serves PyTorch's TCPStore there: no rank
// serves, and every rank is a TorchStoreClient of the agent's store (torch_store_client.h).
// An empty store token is allowed only for WORLD_SIZE 1 (launch_env_from enforces this); a
// random one is then made here.
class TcpStore {
 public:
  explicit TcpStore(const LaunchEnv& env, TcpStoreOptions options = {});
  ~TcpStore();

  // announce_rank + wait_for_ranks with the options' timeout.
  void rendezvous();
  void barrier();
  Store& store() { return *store_; }
  // sublet's own store's client; DistributedError under torchrun's agent store.
  StoreClient& client();
  // Another connection to the same store with its own timeout, for a thread of its own.
  std::unique_ptr<Store> connect_another(std::chrono::milliseconds timeout) const;
  // The server on rank 0, null elsewhere (and under torchrun's agent store).
  const StoreServer* server() const { return server_.get(); }

 private:
  LaunchEnv env_;
  TcpStoreOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<Store> store_;
  std::int64_t barriers_entered_ = 0;
};

}  // namespace sublet::distributed
