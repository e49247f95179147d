#pragma once
// The interface between sublet and its Gloo shim (libsublet_gloo.so, gloo_shim.cpp), the one
// file that links Debian's libgloo. sublet itself never links Gloo: it loads the shim at run time
// (gloo_library.h), so that a sublet binary starts where libgloo is absent (a GPU machine that
// cannot install packages) and only `--backend gloo` needs it.
//
// Both sides are built from this header by the same compiler in the same build, so the
// interface is plain C++ (virtual classes, std::string); a version number guards against a
// shim of another build. Errors cross the boundary as std::runtime_error carrying Gloo's
// message; the sublet side turns them into DistributedError with the rank.
// No Gloo header here.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sublet::distributed::gloo_shim {

inline constexpr int kAbiVersion = 1;
inline constexpr const char* kConnectSymbol = "sublet_gloo_connect";
inline constexpr const char* kAbiVersionSymbol = "sublet_gloo_abi_version";

// The rendezvous store as Gloo's full-mesh connection needs it; sublet implements it over its
// own store (or torchrun's), with the group's timeout.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<char>& value) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

enum class ElementKind : std::uint8_t { Float32, Float64, BFloat16, Float16, Int64, UInt8 };
enum class Reduction : std::uint8_t { Sum, Average };

struct ConnectOptions {
  int rank = 0;
  int world_size = 1;
  // The address peers reach this process at (Gloo's TCP transport listens there), and the
  // network interface to take it from instead when set (GLOO_SOCKET_IFNAME).
  std::string hostname = "127.0.0.1";
  std::string interface_name;
  // Every collective (and the connection itself) fails with Gloo's timeout error after this.
  std::chrono::milliseconds timeout{60'000};
};

// One connected group. Collectives block the calling thread until done, or throw
// std::runtime_error (a peer closed its connection, the timeout passed). Not thread-safe: one
// thread issues the collectives, in the same order on every rank.
class Communicator {
 public:
  virtual ~Communicator() = default;
  // In place on host memory. Average is the sum divided by the world size (float kinds only).
  virtual void all_reduce(void* data, std::size_t count, ElementKind kind, Reduction reduction) = 0;
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual void barrier() = 0;
};

// What the shim exports (extern "C", looked up with dlsym):
//   int sublet_gloo_abi_version();
//   Communicator* sublet_gloo_connect(const ConnectOptions&, KeyValueStore&);  // throws
using AbiVersionFunction = int (*)();
using ConnectFunction = Communicator* (*)(const ConnectOptions&, KeyValueStore&);

}  // namespace sublet::distributed::gloo_shim
