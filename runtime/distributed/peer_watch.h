#pragma once
// Which rank is to blame when a collective fails. A collective only says that it did not finish
// (a closed connection, a timeout); which peer died or stopped is not in it. So every rank bumps
// a heartbeat counter in the rendezvous store from a thread of its own, and a rank whose
// collective failed reads the counters twice, a few beats apart: ranks whose counter stood still
// are dead or stopped (SIGKILL, SIGSTOP, a hung machine), whatever their main thread was doing.
// When the store itself does not answer, rank 0 (which serves it) is the one named.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/distributed/store.h"

namespace sublet::distributed {

class PeerWatch {
 public:
  // `beat` and `ask` are two connections to the store (one per thread). The heartbeat starts at
  // once and beats every `interval`.
  PeerWatch(std::unique_ptr<Store> beat, std::unique_ptr<Store> ask, int rank, int world_size,
            std::chrono::milliseconds interval, bool store_on_rank0);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Blocks for about four beats and returns e.g. "rank 2 stopped responding (no heartbeat for
  // 0.8 s)", "ranks 1, 3 stopped responding ...", "rank 0 is unreachable (it serves the
  // rendezvous store: ...)", or "every rank still sends heartbeats" when none can be blamed.
  std::string diagnose();

  // After diagnose(): tells the others this rank is done with the store.
  void report_diagnosed();
  // On the rank that serves the store, before it goes: waits (at most a diagnosis and a second)
  // until the ranks that diagnose() did not blame have reported, so that they can still ask the
  // store; without this they would find it gone and blame rank 0.
  void linger_for_peers();
  // The number of ranks the last diagnose() blamed.
  int blamed() const { return blamed_; }

  // The ranks whose heartbeat stood still over `window` (this rank excluded). DistributedError
  // when the store does not answer.
  std::vector<int> silent_ranks(std::chrono::milliseconds window);

  // The beat interval for a collective timeout: a twentieth of it, within [200 ms, 2 s].
  static std::chrono::milliseconds interval_for(std::chrono::milliseconds collective_timeout);

 private:
  void beat_loop();

  std::unique_ptr<Store> beat_;
  std::unique_ptr<Store> ask_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds interval_;
  bool store_on_rank0_;
  int blamed_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sublet::distributed
