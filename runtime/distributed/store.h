#pragma once
// What data parallel asks of a rendezvous store, whichever serves it: sublet's own (tcp_store.h,
// served by rank 0) or torchrun's agent store (torch_store_client.h, PyTorch's TCPStore
// protocol). Values are bytes (std::string as a byte container); keys are printable ASCII.
// The rendezvous (store_rendezvous.h) and Gloo's connection are built on these five calls.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sublet::distributed {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, std::string_view value) = 0;
  // Blocks until the key exists; DistributedError naming the key on timeout.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds delta to the counter at key (a missing key counts from 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Waits until every key exists or the timeout passes; returns the keys still missing then
  // (empty: all arrived). DistributedError only when the store itself fails.
  virtual std::vector<std::string> wait_for_keys(const std::vector<std::string>& keys,
                                                 std::chrono::milliseconds timeout) = 0;
  // "store at host:port" for messages.
  virtual std::string describe() const = 0;
};

}  // namespace sublet::distributed
