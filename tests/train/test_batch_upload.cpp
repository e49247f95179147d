// Batches on the CPU take the plain copy (train/batch_upload.h); the GPU side is
// test_batch_upload_gpu.cpp.
#include <gtest/gtest.h>

#include "train_test_support.h"

namespace sublet::train {
namespace {

TEST(BatchUpload, CpuRunsUseThePlainCopy) {
  Trainer trainer(testing::small_synthetic_options(64));
  testing::run_steps(trainer, 2);
  EXPECT_EQ(trainer.pinned_uploads(), 0);
}

}  // namespace
}  // namespace sublet::train
