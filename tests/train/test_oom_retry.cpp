// Out-of-memory retry: with the CPU allocator capped (set_memory_fraction, as
// torch.cuda.set_per_process_memory_fraction), a batch that cannot fit makes the Trainer halve
// the batch size and carry on from the same image; with the retry off, or at batch size 1, the
// error is final and says so. Each test runs in its own process (gtest_discover_tests), with a
// fresh CPU allocator so that the cap and the statistics are this test's alone.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "memory/registry.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

memory::CachingAllocator& fresh_cpu_allocator() {
  memory::replace_allocator(Device::cpu(), memory::make_allocator(Device::cpu(), memory::AllocatorKind::Caching));
  return memory::allocator_for(Device::cpu());
}

// Caps the CPU allocator's reserved memory at `bytes`.
void cap_reserved(memory::CachingAllocator& allocator, std::size_t bytes) {
  const double total = static_cast<double>(allocator.backend().memory_info().total_bytes);
  allocator.set_memory_fraction(static_cast<double>(bytes) / total);
}

TrainOptions oom_options(std::int64_t batch_size) {
  TrainOptions o = testing::small_synthetic_options(512);
  o.epochs = 1;
  o.batch_size = batch_size;
  o.prefetch_batches = 0;  // the loader's buffers are not tensors, but keep the test single-threaded
  return o;
}

class CollectNotes : public TrainingObserver {
 public:
  void note(const std::string& message) override { notes.push_back(message); }
  std::vector<std::string> notes;
};

TEST(OomRetry, BatchThatDoesNotFitIsHalvedAndTrainingContinues) {
  memory::CachingAllocator& allocator = fresh_cpu_allocator();
  // What one step at batch 32 reserves, measured here rather than guessed.
  std::size_t reserved_at_32 = 0;
  {
    Trainer probe(oom_options(32));
    allocator.reset_peak_memory_stats();
    ASSERT_TRUE(probe.train_step().has_value());
    reserved_at_32 = allocator.max_memory_reserved();
  }
  allocator.empty_cache();
  ASSERT_GT(reserved_at_32, 0u);
  // Room for batch 32 (with slack for the cache's rounding), not for 256: activations dominate.
  cap_reserved(allocator, reserved_at_32 + reserved_at_32 / 2);

  Trainer trainer(oom_options(256));
  CollectNotes notes;
  trainer.set_observer(&notes);
  const EpochMetrics metrics = trainer.train_epoch();

  EXPECT_GE(trainer.oom_retries(), 1);
  EXPECT_LT(trainer.batch_size(), 256);
  EXPECT_GE(trainer.batch_size(), 16);
  EXPECT_EQ(metrics.batch_size, trainer.batch_size());
  ASSERT_FALSE(notes.notes.empty());
  EXPECT_NE(notes.notes.front().find("out of memory"), std::string::npos) << notes.notes.front();
  EXPECT_NE(notes.notes.front().find("batch size 128"), std::string::npos) << notes.notes.front();
  // Nothing lost: the epoch went through every image once and finished with a real loss.
  EXPECT_EQ(trainer.epoch(), 1);
  EXPECT_EQ(trainer.global_step(), 512 / trainer.batch_size());
  EXPECT_TRUE(std::isfinite(metrics.train_loss));
  EXPECT_GT(metrics.train_loss, 0.0);
  EXPECT_LE(allocator.max_memory_reserved(), reserved_at_32 + reserved_at_32 / 2);
  EXPECT_GE(allocator.memory_stats().at("num_ooms"), 1);
}

TEST(OomRetry, WithRetryOffTheErrorIsFinalAndSaysSo) {
  memory::CachingAllocator& allocator = fresh_cpu_allocator();
  TrainOptions options = oom_options(256);
  options.oom_retry = false;
  Trainer trainer(options);
  cap_reserved(allocator, allocator.memory_reserved() + 4 * memory::kMiB);
  try {
    trainer.train_step();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("--oom-retry is off"), std::string::npos) << e.what();
  }
  EXPECT_EQ(trainer.batch_size(), 256);
  EXPECT_EQ(trainer.global_step(), 0);
}

TEST(OomRetry, GivesUpAtBatchSizeOneWithAClearError) {
  memory::CachingAllocator& allocator = fresh_cpu_allocator();
  Trainer trainer(oom_options(4));
  // Not even one image's activations fit next to the model.
  cap_reserved(allocator, allocator.memory_reserved() + 1);
  try {
    trainer.train_step();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("even at batch size 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(trainer.oom_retries(), 2);  // 4 -> 2 -> 1, then the final error
  EXPECT_EQ(trainer.global_step(), 0);
}

}  // namespace
}  // namespace sublet::train
