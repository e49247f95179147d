// Synthetic dataset: deterministic for a seed, balanced, smooth, and learnable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors.h"
#include "runtime/data/synthetic.h"

namespace sublet::data {
namespace {

SyntheticOptions small_options() {
  SyntheticOptions options;
  options.channels = 3;
  options.height = 12;
  options.width = 10;
  options.num_classes = 5;
  options.size = 200;
  options.task_seed = 11;
  options.sample_seed = 1;
  return options;
}

// Accuracy of the nearest-class-mean classifier fitted on `train`, measured on `test`.
double nearest_mean_accuracy(const ImageDataset& train, const ImageDataset& test) {
  const std::int64_t numel = train.sample_numel();
  std::vector<double> means(static_cast<std::size_t>(train.num_classes * numel), 0.0);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(train.num_classes), 0);
  for (std::int64_t i = 0; i < train.size(); ++i) {
    const std::int64_t label = train.labels[static_cast<std::size_t>(i)];
    ++counts[static_cast<std::size_t>(label)];
    const auto pixels = train.sample_pixels(i);
    for (std::int64_t k = 0; k < numel; ++k) means[label * numel + k] += pixels[k];
  }
  for (std::int64_t c = 0; c < train.num_classes; ++c) {
    for (std::int64_t k = 0; k < numel; ++k) means[c * numel + k] /= counts[c];
  }
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < test.size(); ++i) {
    const auto pixels = test.sample_pixels(i);
    std::int64_t best = -1;
    double best_distance = std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < train.num_classes; ++c) {
      double distance = 0;
      for (std::int64_t k = 0; k < numel; ++k) {
        const double d = pixels[k] - means[c * numel + k];
        distance += d * d;
      }
      if (distance < best_distance) {
        best_distance = distance;
        best = c;
      }
    }
    correct += best == test.labels[static_cast<std::size_t>(i)];
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

TEST(SyntheticDataset, ShapeLabelsAndBalance) {
  const ImageDataset dataset = make_synthetic_dataset(small_options());
  EXPECT_EQ(dataset.size(), 200);
  EXPECT_EQ(dataset.channels, 3);
  EXPECT_EQ(dataset.height, 12);
  EXPECT_EQ(dataset.width, 10);
  EXPECT_EQ(dataset.num_classes, 5);
  EXPECT_EQ(dataset.pixels.size(), 200u * 3 * 12 * 10);
  std::vector<int> per_class(5, 0);
  for (std::int64_t label : dataset.labels) ++per_class[static_cast<std::size_t>(label)];
  for (int count : per_class) EXPECT_EQ(count, 40);
}

TEST(SyntheticDataset, SameSeedsSameBytesOtherSeedsOtherBytes) {
  const SyntheticOptions options = small_options();
  const ImageDataset first = make_synthetic_dataset(options);
  EXPECT_EQ(first.pixels, make_synthetic_dataset(options).pixels);

  SyntheticOptions other_noise = options;
  other_noise.sample_seed = 2;
  EXPECT_NE(first.pixels, make_synthetic_dataset(other_noise).pixels);

  // A sample does not depend on the dataset size: a prefix is the same data.
  SyntheticOptions smaller = options;
  smaller.size = 50;
  const ImageDataset prefix = make_synthetic_dataset(smaller);
  EXPECT_TRUE(std::equal(prefix.pixels.begin(), prefix.pixels.end(), first.pixels.begin()));
}

TEST(SyntheticDataset, TemplatesAreSmoothAndDistinct) {
  const SyntheticOptions options = small_options();
  const std::vector<float> a = synthetic_class_template(options, 0);
  const std::vector<float> b = synthetic_class_template(options, 1);
  double neighbour_step = 0, class_gap = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_GE(a[k], 0.0f);
    EXPECT_LE(a[k], 1.0f);
    if ((k + 1) % static_cast<std::size_t>(options.width) != 0) {
      neighbour_step += std::abs(a[k + 1] - a[k]);
    }
    class_gap += std::abs(a[k] - b[k]);
  }
  neighbour_step /= static_cast<double>(a.size());
  class_gap /= static_cast<double>(a.size());
  // Templates span [0.15, 0.85] over a 4x4 grid: adjacent pixels differ far less than classes.
  EXPECT_LT(neighbour_step, 0.1);
  EXPECT_GT(class_gap, 0.1);
  SyntheticOptions other_task = options;
  other_task.task_seed = 12;
  EXPECT_NE(a, synthetic_class_template(other_task, 0));
}

TEST(SyntheticDataset, SamplesAreTemplatePlusNoise) {
  const SyntheticOptions options = small_options();
  const ImageDataset dataset = make_synthetic_dataset(options);
  const std::vector<float> base = synthetic_class_template(options, dataset.labels[7]);
  const std::vector<float> sample = dataset.sample_floats(7);
  double squared = 0;
  for (std::size_t k = 0; k < base.size(); ++k) squared += std::pow(sample[k] - base[k], 2);
  const double rms = std::sqrt(squared / static_cast<double>(base.size()));
  // Noise std 0.15, slightly reduced by clamping at 0 and 1 and plus rounding to 1/255.
  EXPECT_GT(rms, 0.10);
  EXPECT_LT(rms, 0.18);
}

TEST(SyntheticDataset, LearnableOnHeldOutSamplesButNotAcrossTasks) {
  SyntheticOptions train_options = small_options();
  train_options.size = 300;
  SyntheticOptions test_options = train_options;
  test_options.sample_seed = 99;
  const ImageDataset train = make_synthetic_dataset(train_options);
  const ImageDataset test = make_synthetic_dataset(test_options);
  EXPECT_GT(nearest_mean_accuracy(train, test), 0.95);

  // The signal is the task's templates: another task's samples are not classified above chance
  // by much (5 classes: chance 0.2).
  SyntheticOptions other_task = test_options;
  other_task.task_seed = 12;
  EXPECT_LT(nearest_mean_accuracy(train, make_synthetic_dataset(other_task)), 0.6);
}

TEST(SyntheticDataset, RejectsBadOptions) {
  SyntheticOptions options = small_options();
  options.height = 0;
  EXPECT_THROW(make_synthetic_dataset(options), ValueError);
  options = small_options();
  options.num_classes = 0;
  EXPECT_THROW(make_synthetic_dataset(options), ValueError);
  options = small_options();
  options.size = -1;
  EXPECT_THROW(make_synthetic_dataset(options), ValueError);
  options = small_options();
  options.noise_std = -0.5;
  EXPECT_THROW(make_synthetic_dataset(options), ValueError);
  EXPECT_THROW(synthetic_class_template(small_options(), 5), ValueError);
}

}  // namespace
}  // namespace sublet::data
