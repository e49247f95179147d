// DataLoader: coverage and order per epoch, exact resume, normalisation, augmentation, and the
// prefetch thread (bounded queue, shutdown mid-epoch, exceptions reaching the consumer).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/errors.h"
#include "runtime/data/loader.h"
#include "runtime/data/synthetic.h"

namespace sublet::data {
namespace {

std::shared_ptr<const ImageDataset> small_dataset(std::int64_t size = 103) {
  SyntheticOptions options;
  options.channels = 3;
  options.height = 8;
  options.width = 6;
  options.num_classes = 4;
  options.size = size;
  options.noise_std = 0.3;  // distinct-looking samples, so comparisons of images mean something
  return std::make_shared<const ImageDataset>(make_synthetic_dataset(options));
}

std::vector<Batch> whole_epoch(DataLoader& loader, std::int64_t epoch, std::int64_t first = 0) {
  loader.start_epoch(epoch, first);
  std::vector<Batch> batches;
  while (std::optional<Batch> batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

std::vector<float> images_of(const std::vector<Batch>& batches) {
  std::vector<float> values;
  for (const Batch& batch : batches) {
    values.insert(values.end(), batch.images.span().begin(), batch.images.span().end());
  }
  return values;
}

std::vector<std::int64_t> indices_of(const std::vector<Batch>& batches) {
  std::vector<std::int64_t> indices;
  for (const Batch& batch : batches) {
    indices.insert(indices.end(), batch.sample_indices.begin(), batch.sample_indices.end());
  }
  return indices;
}

TEST(DataLoader, EverySampleExactlyOncePerEpochWithItsLabelAndPixels) {
  const auto dataset = small_dataset();
  DataLoader loader(dataset, {.batch_size = 10, .seed = 5});
  ASSERT_EQ(loader.batches_per_epoch(), 11);
  const std::vector<Batch> batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 11u);
  EXPECT_EQ(batches.back().batch_size, 3);
  std::vector<std::int64_t> seen = indices_of(batches);
  std::vector<std::int64_t> sorted = seen;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> all(103);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(seen, all) << "shuffle=true served the identity order";
  for (const Batch& batch : batches) {
    EXPECT_EQ(batch.channels, 3);
    EXPECT_EQ(batch.height, 8);
    EXPECT_EQ(batch.width, 6);
    ASSERT_EQ(batch.images.size(), static_cast<std::size_t>(batch.batch_size * 3 * 8 * 6));
    for (std::int64_t row = 0; row < batch.batch_size; ++row) {
      const std::int64_t sample = batch.sample_indices[row];
      EXPECT_EQ(batch.labels[row], dataset->labels[sample]);
      const std::vector<float> expected = dataset->sample_floats(sample);
      EXPECT_TRUE(
          std::equal(expected.begin(), expected.end(), batch.images.data() + row * 3 * 8 * 6));
    }
  }
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  DataLoader loader(small_dataset(), {.batch_size = 10, .drop_last = true});
  EXPECT_EQ(loader.batches_per_epoch(), 10);
  const std::vector<Batch> batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 10u);
  const std::vector<std::int64_t> seen = indices_of(batches);
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 100u);
}

TEST(DataLoader, OrderIsAFunctionOfSeedAndEpoch) {
  const auto dataset = small_dataset();
  DataLoader first(dataset, {.batch_size = 16, .seed = 42});
  DataLoader second(dataset, {.batch_size = 16, .seed = 42});
  DataLoader other_seed(dataset, {.batch_size = 16, .seed = 43});
  EXPECT_EQ(indices_of(whole_epoch(first, 3)), indices_of(whole_epoch(second, 3)));
  EXPECT_EQ(indices_of(whole_epoch(first, 3)), first.epoch_order(3));
  EXPECT_NE(first.epoch_order(3), first.epoch_order(4));
  EXPECT_NE(first.epoch_order(3), other_seed.epoch_order(3));
  DataLoader in_order(dataset, {.batch_size = 16, .shuffle = false});
  std::vector<std::int64_t> identity(103);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(indices_of(whole_epoch(in_order, 7)), identity);
}

TEST(DataLoader, ResumingMidEpochReproducesTheRemainingBatches) {
  const auto dataset = small_dataset();
  const LoaderOptions options{
      .batch_size = 9, .seed = 8, .augmentation = {.random_crop = true, .horizontal_flip = true}};
  DataLoader uninterrupted(dataset, options);
  const std::vector<Batch> full = whole_epoch(uninterrupted, 2);
  DataLoader resumed(dataset, options);
  const std::vector<Batch> rest = whole_epoch(resumed, 2, 4);
  ASSERT_EQ(rest.size(), full.size() - 4);
  for (std::size_t b = 0; b < rest.size(); ++b) {
    EXPECT_EQ(rest[b].index, full[b + 4].index);
    EXPECT_EQ(rest[b].sample_indices, full[b + 4].sample_indices);
    EXPECT_TRUE(std::equal(rest[b].images.span().begin(), rest[b].images.span().end(),
                           full[b + 4].images.span().begin()));
  }
}

TEST(DataLoader, NormalisesPerChannel) {
  // Four 2-channel 1x2 images with known bytes.
  auto dataset = std::make_shared<ImageDataset>();
  dataset->name = "tiny";
  dataset->channels = 2;
  dataset->height = 1;
  dataset->width = 2;
  dataset->num_classes = 2;
  dataset->pixels = {0, 255, 51, 102, 10, 20, 30, 40, 200, 100, 50, 25, 1, 2, 3, 4};
  dataset->labels = {0, 1, 0, 1};
  const Normalization normalization{{0.5f, 0.25f}, {0.2f, 0.4f}};
  DataLoader loader(dataset, {.batch_size = 4, .shuffle = false, .normalization = normalization});
  const std::vector<Batch> batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 1u);
  const float* values = batches[0].images.data();
  for (std::size_t k = 0; k < dataset->pixels.size(); ++k) {
    const std::size_t channel = (k / 2) % 2;
    const double expected =
        (dataset->pixels[k] / 255.0 - normalization.mean[channel]) / normalization.stddev[channel];
    EXPECT_NEAR(values[k], expected, 1e-5) << "element " << k;
  }
}

TEST(DataLoader, RandomCropIsAZeroFilledShiftOfAtMostThePadding) {
  const auto dataset = small_dataset(40);
  DataLoader loader(
      dataset,
      {.batch_size = 8, .seed = 3, .augmentation = {.random_crop = true, .crop_padding = 2}});
  const std::vector<Batch> batches = whole_epoch(loader, 0);
  const std::int64_t C = 3, H = 8, W = 6;
  int shifted = 0;
  for (const Batch& batch : batches) {
    ASSERT_EQ(batch.images.size(), static_cast<std::size_t>(batch.batch_size * C * H * W));
    for (std::int64_t row = 0; row < batch.batch_size; ++row) {
      const std::vector<float> source = dataset->sample_floats(batch.sample_indices[row]);
      const float* out = batch.images.data() + row * C * H * W;
      bool matched = false;
      for (std::int64_t dy = -2; dy <= 2 && !matched; ++dy) {
        for (std::int64_t dx = -2; dx <= 2 && !matched; ++dx) {
          bool same = true;
          for (std::int64_t c = 0; c < C && same; ++c) {
            for (std::int64_t y = 0; y < H && same; ++y) {
              for (std::int64_t x = 0; x < W && same; ++x) {
                const std::int64_t sy = y + dy, sx = x + dx;
                const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
                const float expected = inside ? source[(c * H + sy) * W + sx] : 0.0f;
                same = out[(c * H + y) * W + x] == expected;
              }
            }
          }
          if (same) {
            matched = true;
            shifted += (dy != 0 || dx != 0);
          }
        }
      }
      EXPECT_TRUE(matched) << "sample " << batch.sample_indices[row] << " is not a padded crop";
    }
  }
  EXPECT_GT(shifted, 20) << "random crop almost never moved the image (24 of 25 offsets move it)";
}

TEST(DataLoader, HorizontalFlipMirrorsAboutHalfTheSamplesAndVariesByEpoch) {
  const auto dataset = small_dataset(200);
  DataLoader loader(dataset,
                    {.batch_size = 50, .seed = 1, .augmentation = {.horizontal_flip = true}});
  const std::int64_t C = 3, H = 8, W = 6;
  std::vector<int> flipped_in_epoch;
  std::vector<std::set<std::int64_t>> flipped_sets;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<std::int64_t> flipped;
    for (const Batch& batch : whole_epoch(loader, epoch)) {
      for (std::int64_t row = 0; row < batch.batch_size; ++row) {
        const std::vector<float> source = dataset->sample_floats(batch.sample_indices[row]);
        const float* out = batch.images.data() + row * C * H * W;
        bool identical = true, mirrored = true;
        for (std::int64_t c = 0; c < C; ++c) {
          for (std::int64_t y = 0; y < H; ++y) {
            for (std::int64_t x = 0; x < W; ++x) {
              identical &= out[(c * H + y) * W + x] == source[(c * H + y) * W + x];
              mirrored &= out[(c * H + y) * W + x] == source[(c * H + y) * W + (W - 1 - x)];
            }
          }
        }
        ASSERT_TRUE(identical || mirrored);
        if (mirrored && !identical) flipped.insert(batch.sample_indices[row]);
      }
    }
    flipped_in_epoch.push_back(static_cast<int>(flipped.size()));
    flipped_sets.push_back(flipped);
  }
  for (int count : flipped_in_epoch) {
    EXPECT_GT(count, 70);  // Binomial(200, 1/2): 70..130 is beyond 4 standard deviations
    EXPECT_LT(count, 130);
  }
  EXPECT_NE(flipped_sets[0], flipped_sets[1]) << "augmentation did not change between epochs";
}

TEST(DataLoader, PrefetchThreadServesTheSameBatchesAsTheCallingThread) {
  const auto dataset = small_dataset();
  LoaderOptions options{.batch_size = 7,
                        .seed = 4,
                        .normalization = {{0.5f, 0.4f, 0.3f}, {0.2f, 0.25f, 0.3f}},
                        .augmentation = {.random_crop = true, .horizontal_flip = true}};
  options.prefetch_batches = 0;
  DataLoader inline_loader(dataset, options);
  options.prefetch_batches = 2;
  DataLoader threaded(dataset, options);
  EXPECT_EQ(images_of(whole_epoch(inline_loader, 1)), images_of(whole_epoch(threaded, 1)));
}

// An allocator that records how many buffers were requested, optionally slowly or failing.
struct CountingAllocator {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::chrono::milliseconds delay{0};
  int fail_on_call = -1;  // 1-based call that throws

  BatchBufferAllocator make() const {
    return [calls = calls, delay = delay, fail = fail_on_call](std::size_t size) {
      const int call = ++*calls;
      std::this_thread::sleep_for(delay);
      if (call == fail)
        throw std::runtime_error("injected allocation failure on call " + std::to_string(call));
      return allocate_host_batch_buffer(size);
    };
  }
};

TEST(DataLoader, PrefetchQueueIsBounded) {
  CountingAllocator allocator;
  DataLoader loader(small_dataset(),
                    {.batch_size = 5, .prefetch_batches = 2, .buffer_allocator = allocator.make()});
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // One handed out, two waiting in the queue, none more: 21 batches exist in the epoch.
  EXPECT_EQ(allocator.calls->load(), 3);
}

TEST(DataLoader, DestroyingMidEpochStopsTheWorkerPromptly) {
  CountingAllocator allocator;
  allocator.delay = std::chrono::milliseconds(20);
  std::optional<Batch> kept;
  const auto started = std::chrono::steady_clock::now();
  {
    DataLoader loader(
        small_dataset(),
        {.batch_size = 5, .prefetch_batches = 2, .buffer_allocator = allocator.make()});
    loader.start_epoch(0);
    kept = loader.next();
    ASSERT_TRUE(kept.has_value());
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_LT(elapsed, std::chrono::seconds(2));
  // The worker stopped long before the 21 batches of the epoch.
  EXPECT_LE(allocator.calls->load(), 4);
  // A batch handed out before the loader died is still usable.
  EXPECT_EQ(kept->images.size(), 5u * 3 * 8 * 6);
  EXPECT_TRUE(std::isfinite(kept->images.data()[kept->images.size() - 1]));
}

TEST(DataLoader, StartingAnotherEpochMidEpochAbandonsTheOld) {
  DataLoader loader(small_dataset(), {.batch_size = 10, .seed = 2});
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  const std::vector<Batch> batches = whole_epoch(loader, 1);
  ASSERT_EQ(batches.size(), 11u);
  for (const Batch& batch : batches) EXPECT_EQ(batch.epoch, 1);
  EXPECT_EQ(indices_of(batches), loader.epoch_order(1));
}

TEST(DataLoader, WorkerExceptionReachesTheConsumerAfterEarlierBatches) {
  for (std::int64_t prefetch : {0, 2}) {
    CountingAllocator allocator;
    allocator.fail_on_call = 3;
    DataLoader loader(
        small_dataset(),
        {.batch_size = 10, .prefetch_batches = prefetch, .buffer_allocator = allocator.make()});
    loader.start_epoch(0);
    EXPECT_EQ(loader.next()->index, 0);
    EXPECT_EQ(loader.next()->index, 1);
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        loader.next();
        ADD_FAILURE() << "prefetch " << prefetch << ": the failure of batch 2 was swallowed";
      } catch (const std::runtime_error& error) {
        EXPECT_STREQ(error.what(), "injected allocation failure on call 3");
      }
    }
    // A new epoch starts clean (the allocator fails only on its third call).
    EXPECT_EQ(whole_epoch(loader, 1).size(), 11u);
  }
}

TEST(DataLoader, RejectsBadOptionsAndMisuse) {
  const auto dataset = small_dataset();
  EXPECT_THROW(DataLoader(dataset, {.batch_size = 0}), ValueError);
  EXPECT_THROW(DataLoader(dataset, {.prefetch_batches = -1}), ValueError);
  EXPECT_THROW(DataLoader(dataset, {.normalization = mnist_normalization()}), ValueError);
  EXPECT_THROW(DataLoader(dataset, {.normalization = {{0.5f, 0.5f, 0.5f}, {0.2f, 0.0f, 0.2f}}}),
               ValueError);
  EXPECT_THROW(DataLoader(dataset, {.augmentation = {.crop_padding = -1}}), ValueError);
  DataLoader loader(dataset, {});
  EXPECT_THROW(loader.next(), ValueError);
  EXPECT_THROW(loader.start_epoch(0, loader.batches_per_epoch() + 1), ValueError);
}

}  // namespace
}  // namespace sublet::data
