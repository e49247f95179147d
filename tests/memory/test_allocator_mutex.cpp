// The allocator's lock (allocator_mutex.h): mutual exclusion, and a thread that waits while the
// owner is inside a slow backend call (cudaMalloc, a device synchronisation) sleeps rather than
// spinning on a core.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "memory/allocator_mutex.h"
#include "memory/caching_allocator.h"

using namespace sublet::memory;
using namespace std::chrono_literals;

namespace {

// CPU time the calling thread has used.
std::chrono::nanoseconds thread_cpu_time() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// A backend whose allocate takes `delay` (as cudaMalloc of a large segment can) and tells when
// it has started.
class SlowBackend final : public Backend {
 public:
  explicit SlowBackend(std::chrono::milliseconds delay) : delay_(delay) {}
  std::string name() const override { return "slow"; }
  sublet::Device device() const override { return sublet::Device::cpu(); }
  void* allocate(std::size_t bytes) override {
    inside.store(true);
    std::this_thread::sleep_for(delay_);
    return std::malloc(bytes);
  }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
  MemoryInfo memory_info() const override { return {std::size_t{1} << 30, std::size_t{1} << 30}; }

  std::atomic<bool> inside{false};

 private:
  std::chrono::milliseconds delay_;
};

}  // namespace

TEST(AllocatorMutex, ExcludesEveryOtherThread) {
  AllocatorMutex mutex;
  long counter = 0;  // not atomic: only the lock orders the increments
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        mutex.lock();
        ++counter;
        mutex.unlock();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 4 * 50000);
}

TEST(AllocatorMutex, AWaiterBehindASlowBackendCallSleeps) {
  constexpr auto kDelay = 300ms;
  auto* backend = new SlowBackend(kDelay);
  CachingAllocator allocator{std::unique_ptr<Backend>(backend)};
  std::thread owner([&] { allocator.free(allocator.allocate(4096)); });  // holds the lock for kDelay
  while (!backend->inside.load()) std::this_thread::yield();
  const auto wall_start = std::chrono::steady_clock::now();
  const auto cpu_start = thread_cpu_time();
  const std::size_t reserved = allocator.memory_reserved();  // waits for the owner's lock
  const auto cpu = thread_cpu_time() - cpu_start;
  const auto wall = std::chrono::steady_clock::now() - wall_start;
  owner.join();
  EXPECT_GT(reserved, 0u) << "the read ran after the owner's allocation, under the lock";
  ASSERT_GT(wall, kDelay / 2) << "the waiter did not wait for the owner";
  // A spinning waiter would use about `wall` of CPU (less only when the cores are oversubscribed).
  EXPECT_LT(cpu * 10, wall) << "the waiter used " << std::chrono::duration<double, std::milli>(cpu).count()
                            << " ms of CPU while waiting "
                            << std::chrono::duration<double, std::milli>(wall).count() << " ms";
}
