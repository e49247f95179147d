#pragma once
// A value made on first use by a function that may throw (loading a library): a throw leaves
// nothing behind, so the next call tries again. std::call_once is not used for this because an
// exception leaving it through pthread_once crashes or hangs a later call with some C libraries.
#include <mutex>
#include <optional>

namespace sublet {

template <typename T>
class LoadedOnce {
 public:
  template <typename Make>
  const T& get(Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!value_) value_.emplace(make());
    return *value_;
  }

 private:
  std::mutex mutex_;
  std::optional<T> value_;
};

}  // namespace sublet
