#pragma once
// A learnable synthetic image dataset for tests, examples and benchmarks that must run without
// downloads. Each class has a fixed random smooth template (a coarse random grid, bilinearly
// upsampled); a sample is its class template plus Gaussian noise, clamped to [0, 1] and stored
// as bytes like real images. A linear model or a small CNN separates the classes well, so
// accuracy is a meaningful smoke signal.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"

namespace sublet::data {

struct SyntheticOptions {
  std::int64_t channels = 3;
  std::int64_t height = 32;
  std::int64_t width = 32;
  std::int64_t num_classes = 10;
  std::int64_t size = 1024;
  // Picks the class templates, i.e. the task: a train and a test set of one task share it.
  std::uint64_t task_seed = 0;
  // Picks each sample's noise; use different values for a train and a test set.
  std::uint64_t sample_seed = 1;
  // Standard deviation of the per-pixel noise, on the [0, 1] pixel scale.
  double noise_std = 0.15;
  std::string name = "synthetic";
};

// Deterministic: the same options give the same dataset (own generator, no std::
// distributions; only libm rounding of log/cos could differ across platforms). Labels are balanced
// (sample i has class i % num_classes). Throws ValueError for non-positive shapes or classes,
// a negative size, or a negative noise level.
ImageDataset make_synthetic_dataset(const SyntheticOptions& options);

// The noise-free template of class `label` as floats in [0, 1], CHW (for tests and demos).
std::vector<float> synthetic_class_template(const SyntheticOptions& options, std::int64_t label);

}  // namespace sublet::data
