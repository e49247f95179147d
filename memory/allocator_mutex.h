#pragma once
// The allocator's lock: one atomic flag; waiters spin briefly, then yield, then sleep.
//
// What it guards is usually a cache hit of a few dozen nanoseconds, but not always: the allocator
// holds it across backend calls (cudaMalloc, cuMemMap/cuMemUnmap, device synchronisation in
// empty_cache() and on the out-of-memory path), which take microseconds to milliseconds. A waiter
// must then stop using a core (the owner, or the program's other threads, may need it), so a
// waiter goes through three phases:
//   1. spin on a read, up to kSpins times: enough for a cache hit to finish;
//   2. yield its time slice, up to kYields times: hands the core to a preempted owner (the
//      stress test runs 8 threads on 2 cores); a yield returns at once when nothing else is
//      runnable, so this phase stays short;
//   3. sleep, for kFirstSleep doubling up to kLongestSleep, and retry: the owner is most likely
//      inside the driver. The waiter then uses almost no CPU (one read per sleep) and sees the
//      lock free within about kLongestSleep (plus the kernel's timer slack) of its release,
//      after a backend call of about that length; a thread arriving meanwhile may take it first.
// Why not a lock whose unlock wakes a sleeper (std::mutex, or a futex on std::atomic wait/notify):
// an unlock must then learn whether anyone sleeps, which takes a locked instruction (an exchange)
// instead of a plain store, and a locked instruction waits until every earlier store has left the
// store buffer, which slows the uncontended allocate+free pair; under contention such a lock
// also pays a wake-up at almost every hand-off (bench alloc and allocator_stress show both).
// This lock takes one locked instruction per lock/unlock pair: an exchange to lock, a release
// store to unlock. Its price: the wake-up delay of phase 3, no fairness.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace sublet::memory {

class AllocatorMutex {
 public:
  void lock() {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpins = 128;
  static constexpr unsigned kYields = 16;
  static constexpr std::chrono::microseconds kFirstSleep{10};
  static constexpr std::chrono::microseconds kLongestSleep{500};

  [[gnu::noinline]] void lock_contended() {
    unsigned waits = 0;
    std::chrono::microseconds sleep = kFirstSleep;
    for (;;) {
      // Read until it looks free, so that waiters do not bounce the cache line with writes.
      while (locked_.load(std::memory_order_relaxed)) {
        ++waits;
        if (waits <= kSpins) continue;
        if (waits <= kSpins + kYields) {
          std::this_thread::yield();
          continue;
        }
        std::this_thread::sleep_for(sleep);
        sleep = std::min(sleep * 2, kLongestSleep);
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

}  // namespace sublet::memory
