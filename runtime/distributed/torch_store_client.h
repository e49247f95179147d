#pragma once
// A client of PyTorch's TCPStore, the store torchrun's agent serves on MASTER_PORT when it shares
// it with its workers (TORCHELASTIC_USE_AGENT_STORE=True). sublet's workers then rendezvous
// there, as PyTorch's own workers do, instead of binding MASTER_PORT themselves (the agent holds
// it). Keys go under the prefix PyTorch's workers use, /worker/attempt_<restart count>/.
//
// The wire format is PyTorch 2.x's (torch/csrc/distributed/c10d/TCPStore.cpp and
// TCPStoreBackend.hpp): a connection starts with VALIDATE (u8 0, u32 0x3C85F7CE); a request is a
// u8 query type and its fields, integers little-endian, strings and byte values as a u64 length
// and the bytes:
//   SET (1)    key, value           no answer
//   GET (3)    key                  value (sent once the key exists: a CHECK first)
//   ADD (4)    key, i64 delta       i64 new value
//   CHECK (5)  u64 n, n keys        u8 0 ready / 1 not ready
// Waits poll CHECK rather than use WAIT, whose cancellation on timeout (CANCEL_WAIT) only newer
// servers know. PyTorch 1.x numbered the queries without VALIDATE and is not supported.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/distributed/store.h"

namespace sublet::distributed {

struct TorchStoreClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string key_prefix;  // put before every key
  std::chrono::milliseconds connect_timeout{60'000};
  std::chrono::milliseconds timeout{60'000};  // the wait for any single answer
};

class TorchStoreClient final : public Store {
 public:
  // Connects (retrying until connect_timeout) and validates. DistributedError when nothing
  // accepts the connection in time.
  explicit TorchStoreClient(TorchStoreClientOptions options);
  ~TorchStoreClient() override;
  TorchStoreClient(const TorchStoreClient&) = delete;
  TorchStoreClient& operator=(const TorchStoreClient&) = delete;

  void set(const std::string& key, std::string_view value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::vector<std::string> wait_for_keys(const std::vector<std::string>& keys,
                                         std::chrono::milliseconds timeout) override;
  std::string describe() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sublet::distributed
