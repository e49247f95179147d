#include "runtime/data/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include "core/errors.h"
#include "memory/caching_allocator.h"
#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "memory/pinned_host.h"

namespace sublet {

struct PinnedBatchBuffers::State {
  struct Entry {
    memory::Block* block = nullptr;   // from memory::pinned_allocator()
    float* data = nullptr;
    std::size_t floats = 0;
    cudaEvent_t last_copy = nullptr;  // null: no copy ever read it
    int last_copy_device = -1;        // the device whose stream ran that copy
  };
  memory::CachingAllocator& pinned;
  std::size_t max_cached;
  mutable std::mutex mutex;
  std::vector<Entry> free;  // released, possibly still being copied from
  std::vector<Entry> lent;  // handed out
  std::int64_t host_allocations = 0;

  explicit State(std::size_t cap) : pinned(memory::pinned_allocator()), max_cached(cap) {}
  ~State() {
    // Buffers still lent out own a shared_ptr to this state, so only free ones remain here.
    for (Entry& e : free) hand_back(e);
  }

  static bool copy_done(const Entry& e) {
    if (!e.last_copy) return true;
    const cudaError_t status = cudaEventQuery(e.last_copy);
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    SUBLET_CUDA_CHECK(status);
    return true;
  }

  // Returns the buffer to the pinned allocator without waiting for its copy: the copy's stream
  // was recorded on the block (record_stream), so the allocator records an event there now and
  // reuses the bytes only once it has completed. Called from destructors (a BatchBuffer's
  // release, this state's): it must not throw. On a failure the block stays allocated — lost
  // to the cache, which is safe, where handing it out under a running copy would not be.
  void hand_back(Entry& e) noexcept {
    try {
      if (e.last_copy) SUBLET_CUDA_CHECK(cudaEventDestroy(e.last_copy));  // released once it completes
      e.last_copy = nullptr;
      // The legacy default stream (nullptr) names the current device's: record on the copy's.
      std::optional<memory::CudaDeviceGuard> device;
      if (e.last_copy_device >= 0) device.emplace(e.last_copy_device);
      pinned.free(e.block);
    } catch (...) {
    }
  }

  void release(float* data) {
    std::vector<Entry> dropped;
    {
      std::lock_guard lock(mutex);
      auto it = std::find_if(lent.begin(), lent.end(), [&](const Entry& e) { return e.data == data; });
      if (it == lent.end()) return;
      free.push_back(*it);
      lent.erase(it);
      while (free.size() > max_cached) {  // drop the smallest
        auto smallest = std::min_element(free.begin(), free.end(),
                                         [](const Entry& a, const Entry& b) { return a.floats < b.floats; });
        dropped.push_back(*smallest);
        free.erase(smallest);
      }
    }
    for (Entry& e : dropped) hand_back(e);  // outside this pool's lock: the allocator takes its own
  }
};

PinnedBatchBuffers::PinnedBatchBuffers(std::size_t max_cached) : state_(std::make_shared<State>(max_cached)) {}

data::BatchBuffer PinnedBatchBuffers::allocate(std::size_t floats) {
  const std::size_t want = std::max<std::size_t>(floats, 1);
  State::Entry entry;
  {
    std::lock_guard lock(state_->mutex);
    // Best fit among free buffers whose last copy has finished.
    auto best = state_->free.end();
    for (auto it = state_->free.begin(); it != state_->free.end(); ++it) {
      if (it->floats >= want && State::copy_done(*it) && (best == state_->free.end() || it->floats < best->floats))
        best = it;
    }
    if (best != state_->free.end()) {
      entry = *best;
      state_->free.erase(best);
    }
  }
  const bool fresh = entry.data == nullptr;
  if (fresh) {
    entry.block = state_->pinned.allocate(want * sizeof(float), memory::pinned_host_stream(), memory::BlockCategory::Input);
    entry.data = static_cast<float*>(entry.block->ptr);
    entry.floats = want;
  }
  std::lock_guard lock(state_->mutex);
  if (fresh) ++state_->host_allocations;
  state_->lent.push_back(entry);
  std::shared_ptr<State> state = state_;
  return data::BatchBuffer(entry.data, floats, [state](float* data) { state->release(data); });
}

data::BatchBufferAllocator PinnedBatchBuffers::allocator() {
  // The allocator keeps the pool alive for as long as the loader holds it.
  PinnedBatchBuffers self = *this;
  return [self](std::size_t floats) mutable { return self.allocate(floats); };
}

void PinnedBatchBuffers::copy_to_device_async(const float* src, void* dst, std::size_t bytes, Device device,
                                              StreamHandle stream) {
  if (!device.is_cuda()) throw DeviceError("copy_to_device_async: needs a CUDA device, got " + device.str());
  std::lock_guard lock(state_->mutex);
  auto it = std::find_if(state_->lent.begin(), state_->lent.end(), [&](const State::Entry& e) {
    return src >= e.data && src + (bytes + sizeof(float) - 1) / sizeof(float) <= e.data + e.floats;
  });
  if (it == state_->lent.end())
    throw ValueError("copy_to_device_async: the source is not inside a buffer lent out by this PinnedBatchBuffers");
  memory::CudaDeviceGuard guard(device);
  const auto s = static_cast<cudaStream_t>(stream);
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  if (!it->last_copy) SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&it->last_copy, cudaEventDisableTiming));
  SUBLET_CUDA_CHECK(cudaEventRecord(it->last_copy, s));
  it->last_copy_device = device.index;
  // For the day the buffer goes back to the pinned allocator (see State::hand_back).
  state_->pinned.record_stream(it->block, stream);
}

bool PinnedBatchBuffers::owns(const float* src, std::size_t bytes) const {
  std::lock_guard lock(state_->mutex);
  return std::any_of(state_->lent.begin(), state_->lent.end(), [&](const State::Entry& e) {
    return src >= e.data && src + (bytes + sizeof(float) - 1) / sizeof(float) <= e.data + e.floats;
  });
}

std::int64_t PinnedBatchBuffers::host_allocations() const {
  std::lock_guard lock(state_->mutex);
  return state_->host_allocations;
}

std::size_t PinnedBatchBuffers::cached_buffers() const {
  std::lock_guard lock(state_->mutex);
  return state_->free.size();
}

}  // namespace sublet
