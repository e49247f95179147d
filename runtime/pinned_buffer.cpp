#include "runtime/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "memory/cuda_check.h"
#include "core/errors.h"

namespace sublet {

struct PinnedBatchBuffers::State {
  struct Entry {
    float* data = nullptr;
    std::size_t floats = 0;
    cudaEvent_t last_copy = nullptr;  // null: no copy ever read it
  };
  std::size_t max_cached;
  mutable std::mutex mutex;
  std::vector<Entry> free;  // released, possibly still being copied from
  std::vector<Entry> lent;  // handed out
  std::int64_t host_allocations = 0;

  explicit State(std::size_t cap) : max_cached(cap) {}
  ~State() {
    // Buffers still lent out own a shared_ptr to this state, so only free ones remain here.
    for (Entry& e : free) destroy(e);
  }

  static bool copy_done(const Entry& e) { return !e.last_copy || cudaEventQuery(e.last_copy) == cudaSuccess; }
  static void destroy(Entry& e) {
    if (e.last_copy) {
      cudaEventSynchronize(e.last_copy);
      cudaEventDestroy(e.last_copy);
    }
    cudaFreeHost(e.data);
  }

  void release(float* data) {
    std::lock_guard lock(mutex);
    auto it = std::find_if(lent.begin(), lent.end(), [&](const Entry& e) { return e.data == data; });
    if (it == lent.end()) return;
    free.push_back(*it);
    lent.erase(it);
    while (free.size() > max_cached) {  // drop the smallest
      auto smallest = std::min_element(free.begin(), free.end(),
                                       [](const Entry& a, const Entry& b) { return a.floats < b.floats; });
      Entry gone = *smallest;
      free.erase(smallest);
      destroy(gone);
    }
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
    void* data = nullptr;
    SUBLET_CUDA_CHECK(cudaHostAlloc(&data, want * sizeof(float), cudaHostAllocDefault));
    entry.data = static_cast<float*>(data);
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
  int previous = 0;
  SUBLET_CUDA_CHECK(cudaGetDevice(&previous));
  SUBLET_CUDA_CHECK(cudaSetDevice(device.index));
  const auto s = static_cast<cudaStream_t>(stream);
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  if (!it->last_copy) SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&it->last_copy, cudaEventDisableTiming));
  SUBLET_CUDA_CHECK(cudaEventRecord(it->last_copy, s));
  SUBLET_CUDA_CHECK(cudaSetDevice(previous));
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
