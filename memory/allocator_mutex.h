#pragma once
// The allocator's lock: a mutex whose waiters sleep in the kernel, built on one atomic int
// (Drepper, "Futexes Are Tricky", mutex 3) with C++20 std::atomic wait/notify (a futex on Linux).
//
// What it guards is not always short: besides the cache hits of a few dozen nanoseconds, the
// allocator holds it across backend calls (cudaMalloc, cuMemMap/cuMemUnmap, device
// synchronisation in empty_cache() and on the out-of-memory path), which take microseconds to
// milliseconds. A thread that wants the lock meanwhile must sleep, not spin on a core the owner
// or other work could use.
//
// Why not std::mutex: a cached allocate+free pair is two critical sections, and most of a pair's
// time is the locked instructions around them (a locked instruction waits until every earlier
// store has left the store buffer) plus, with std::mutex, calls into pthread. Here the
// uncontended path is inline: lock is one compare-exchange (0 -> 1), unlock one exchange (-> 0).
// An unlock must learn whether anyone sleeps, so it cannot be a plain store; the state says so:
//   0 free, 1 locked, 2 locked and a thread may be sleeping in wait().
// A thread that finds the lock taken sets 2 and sleeps until the state changes; unlock wakes one
// sleeper only when it saw 2. A woken thread takes the lock as 2 (others may still sleep), which
// costs at most one unneeded wake-up when none do.
#include <atomic>

namespace sublet::memory {

class AllocatorMutex {
 public:
  void lock() {
    int expected = kFree;
    if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_contended(expected);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kLockedWithWaiters) wake_one();
  }

 private:
  static constexpr int kFree = 0;
  static constexpr int kLocked = 1;
  static constexpr int kLockedWithWaiters = 2;

  // `seen`: the state the failed compare-exchange found (1 or 2).
  [[gnu::noinline]] void lock_contended(int seen) {
    // Announce a waiter. If the exchange finds the lock free, this thread has taken it (as 2).
    if (seen != kLockedWithWaiters) seen = state_.exchange(kLockedWithWaiters, std::memory_order_acquire);
    while (seen != kFree) {
      state_.wait(kLockedWithWaiters, std::memory_order_relaxed);  // returns once the state is not 2
      seen = state_.exchange(kLockedWithWaiters, std::memory_order_acquire);
    }
  }

  // Out of line: the futex wake-up would otherwise be inlined into every critical section.
  [[gnu::noinline]] void wake_one() { state_.notify_one(); }

  std::atomic<int> state_{kFree};
};

}  // namespace sublet::memory
