// Batches reach a CUDA device through pinned host buffers and asynchronous copies
// (train/batch_upload.h). The check that matters: the same training run gives the same losses,
// bit for bit, whether its batches went up from pinned memory or through plain pageable copies.
#include <gtest/gtest.h>

#include "runtime/data/batch_buffer.h"
#include "tests/gpu_skip.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

TEST(BatchUpload, PinnedUploadsTrainExactlyLikePageableCopiesOnTheGpu) {
  SUBLET_SKIP_WITHOUT_GPU("pinned batch uploads vs pageable copies on the GPU");
  TrainOptions options = testing::small_synthetic_options(128);
  options.device = "cuda";
  Trainer pinned(options);
  const std::vector<float> pinned_losses = testing::run_steps(pinned, 6);
  // 6 training batches, plus the 2 test batches of the evaluation after the first epoch (4 steps).
  EXPECT_EQ(pinned.pinned_uploads(), 8);

  options.batch_buffer_allocator = data::allocate_host_batch_buffer;  // pageable: plain copies
  Trainer pageable(options);
  const std::vector<float> pageable_losses = testing::run_steps(pageable, 6);
  EXPECT_EQ(pageable.pinned_uploads(), 0);
  EXPECT_EQ(pinned_losses, pageable_losses);
}

}  // namespace
}  // namespace sublet::train
