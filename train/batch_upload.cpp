#include "train/batch_upload.h"

#include <cstring>

#include "memory/current_stream.h"
#include "ops/copy.h"
#include "runtime/allocation_scope.h"
#include "runtime/tensor_options.h"
#ifdef SUBLET_HAVE_CUDA
#include "runtime/data/pinned_buffer.h"
#endif

namespace sublet::train {

BatchUploader::BatchUploader(Device device) : device_(device) {
#ifdef SUBLET_HAVE_CUDA
  if (device.is_cuda()) pinned_ = std::make_shared<PinnedBatchBuffers>();
#endif
}

BatchUploader::~BatchUploader() = default;

data::BatchBufferAllocator BatchUploader::buffer_allocator() const {
#ifdef SUBLET_HAVE_CUDA
  if (pinned_) return pinned_->allocator();
#endif
  return {};
}

std::pair<Tensor, Tensor> BatchUploader::upload(const data::Batch& batch) const {
  AllocationCategoryGuard input(memory::BlockCategory::Input);
  Tensor images = Tensor::empty({batch.batch_size, batch.channels, batch.height, batch.width}, device_);
  Tensor labels = Tensor::empty({batch.batch_size}, TensorOptions(DType::Int64).device(device_));
#ifdef SUBLET_HAVE_CUDA
  if (pinned_ && pinned_->owns(batch.images.data(), images.nbytes())) {
    const StreamHandle stream = memory::current_stream(device_);
    pinned_->copy_to_device_async(batch.images.data(), images.data_ptr(), images.nbytes(), device_, stream);
    // The labels go through a pinned buffer too: a pageable copy would wait for the stream.
    data::BatchBuffer staged = pinned_->allocate((labels.nbytes() + sizeof(float) - 1) / sizeof(float));
    std::memcpy(staged.data(), batch.labels.data(), labels.nbytes());
    pinned_->copy_to_device_async(staged.data(), labels.data_ptr(), labels.nbytes(), device_, stream);
    ++pinned_uploads_;
    return {std::move(images), std::move(labels)};  // `staged` is reused only after its copy
  }
#endif
  ops::copy_bytes(device_, images.data_ptr(), Device::cpu(), batch.images.data(), images.nbytes());
  ops::copy_bytes(device_, labels.data_ptr(), Device::cpu(), batch.labels.data(), labels.nbytes());
  return {std::move(images), std::move(labels)};
}

}  // namespace sublet::train
