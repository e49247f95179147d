#pragma once
// Moves a loader batch to the training device. On a CUDA device the loader fills pinned
// (page-locked) host buffers and the images and labels go up with asynchronous copies on the
// current stream (runtime/data/pinned_buffer.h): the step does not wait for a pageable copy, and
// the next batch's staging overlaps the device's work. Anywhere else, or for a batch whose
// buffer did not come from the pinned pool (a user-supplied buffer allocator), one plain copy.
#include <cstdint>
#include <memory>
#include <utility>

#include "core/device.h"
#include "runtime/data/batch_buffer.h"
#include "runtime/data/loader.h"
#include "runtime/tensor.h"

namespace sublet {
class PinnedBatchBuffers;
}

namespace sublet::train {

class BatchUploader {
 public:
  explicit BatchUploader(Device device);
  ~BatchUploader();
  BatchUploader(const BatchUploader&) = delete;
  BatchUploader& operator=(const BatchUploader&) = delete;

  // The loader's buffer allocator: pinned buffers on CUDA, nullptr (the loader's pageable
  // default) elsewhere.
  data::BatchBufferAllocator buffer_allocator() const;

  // The batch's images and labels on the device, tagged Input in the allocator's records.
  std::pair<Tensor, Tensor> upload(const data::Batch& batch) const;

  // Batches that went up asynchronously from pinned memory so far.
  std::int64_t pinned_uploads() const { return pinned_uploads_; }

 private:
  Device device_;
  std::shared_ptr<PinnedBatchBuffers> pinned_;  // CUDA only
  mutable std::int64_t pinned_uploads_ = 0;
};

}  // namespace sublet::train
