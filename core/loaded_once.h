#pragma once
// A value made on first use by a function that may throw (loading a library): a throw leaves
// nothing behind, so the next call tries again. std::call_once is not used for this because an
// exception leaving it through pthread_once crashes or hangs a later call with some C libraries.
#include <atomic>
#include <mutex>
#include <optional>

namespace sublet {

template <typename T>
class LoadedOnce {
 public:
  template <typename Make>
  const T& get(Make&& make) {
    if (ready_.load(std::memory_order_acquire)) return *value_;  // every collective asks: no lock once loaded
    std::lock_guard<std::mutex> lock(mutex_);
    if (!value_) {
      value_.emplace(make());
      ready_.store(true, std::memory_order_release);
    }
    return *value_;
  }

 private:
  std::atomic<bool> ready_{false};
  std::mutex mutex_;
  std::optional<T> value_;
};

}  // namespace sublet
