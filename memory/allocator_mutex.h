#pragma once
// The allocator's lock. A cached allocate+free pair is two critical sections of a few dozen
// nanoseconds, and on the machines measured most of a pair's time was the locked instructions of
// std::mutex: a locked instruction waits until every earlier store has left the store buffer, and
// std::mutex takes one to lock and another to unlock (it must learn whether anyone sleeps).
// This lock takes one: an exchange to lock, a plain release store to unlock. The price is that a
// waiter cannot sleep in the kernel (nobody would wake it): it spins on a read, then yields its
// time slice between reads. Critical sections here are short and never block, so waits are short.
#include <atomic>
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
  [[gnu::noinline]] void lock_contended() {
    for (unsigned spins = 0;; ++spins) {
      // Read until it looks free, so that waiters do not bounce the cache line with writes.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 128) std::this_thread::yield();
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

}  // namespace sublet::memory
