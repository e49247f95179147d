#include "runtime/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "core/random.h"

namespace sublet::data {
namespace {

// Templates vary over a few pixels, not per pixel: smooth like natural images, so that
// convolutions and pooling have structure to find, and far apart between classes.
constexpr std::int64_t kGridSize = 4;
// Stream tags keep template and noise streams independent even for equal seeds.
constexpr std::uint64_t kTemplateStream = 0x7e3a91c4d2b5f001ULL;
constexpr std::uint64_t kNoiseStream = 0x2c1b5d9e8f4a6002ULL;

void check_options(const SyntheticOptions& options) {
  if (options.channels <= 0 || options.height <= 0 || options.width <= 0) {
    throw ValueError("synthetic dataset: image shape must be positive, got C=" +
                     std::to_string(options.channels) + " H=" + std::to_string(options.height) +
                     " W=" + std::to_string(options.width));
  }
  if (options.num_classes <= 0) {
    throw ValueError("synthetic dataset: num_classes must be positive, got " +
                     std::to_string(options.num_classes));
  }
  if (options.size < 0) {
    throw ValueError("synthetic dataset: size must be >= 0, got " + std::to_string(options.size));
  }
  if (!(options.noise_std >= 0.0)) {
    throw ValueError("synthetic dataset: noise_std must be >= 0, got " +
                     std::to_string(options.noise_std));
  }
}

// Position of output pixel `index` (of `extent`) on a grid of `grid` points spanning the image.
double grid_coordinate(std::int64_t index, std::int64_t extent, std::int64_t grid) {
  return extent == 1 ? 0.0
                     : static_cast<double>(index) * static_cast<double>(grid - 1) /
                           static_cast<double>(extent - 1);
}

std::vector<float> make_template(const SyntheticOptions& options, std::int64_t label) {
  const std::int64_t grid_h = std::min(kGridSize, options.height);
  const std::int64_t grid_w = std::min(kGridSize, options.width);
  Random random(stream_key(options.task_seed, kTemplateStream, static_cast<std::uint64_t>(label)));
  std::vector<double> grid(static_cast<std::size_t>(options.channels * grid_h * grid_w));
  // [0.15, 0.85] leaves room for noise before clamping at 0 and 1.
  for (double& value : grid) value = 0.15 + 0.7 * random.uniform();

  std::vector<float> image(
      static_cast<std::size_t>(options.channels * options.height * options.width));
  for (std::int64_t c = 0; c < options.channels; ++c) {
    const double* g = grid.data() + c * grid_h * grid_w;
    for (std::int64_t y = 0; y < options.height; ++y) {
      const double gy = grid_coordinate(y, options.height, grid_h);
      const auto y0 = static_cast<std::int64_t>(std::floor(gy));
      const std::int64_t y1 = std::min(y0 + 1, grid_h - 1);
      const double fy = gy - static_cast<double>(y0);
      for (std::int64_t x = 0; x < options.width; ++x) {
        const double gx = grid_coordinate(x, options.width, grid_w);
        const auto x0 = static_cast<std::int64_t>(std::floor(gx));
        const std::int64_t x1 = std::min(x0 + 1, grid_w - 1);
        const double fx = gx - static_cast<double>(x0);
        const double top = g[y0 * grid_w + x0] * (1 - fx) + g[y0 * grid_w + x1] * fx;
        const double bottom = g[y1 * grid_w + x0] * (1 - fx) + g[y1 * grid_w + x1] * fx;
        image[static_cast<std::size_t>((c * options.height + y) * options.width + x)] =
            static_cast<float>(top * (1 - fy) + bottom * fy);
      }
    }
  }
  return image;
}

}  // namespace

std::vector<float> synthetic_class_template(const SyntheticOptions& options, std::int64_t label) {
  check_options(options);
  if (label < 0 || label >= options.num_classes) {
    throw ValueError("synthetic dataset: class " + std::to_string(label) + " outside [0, " +
                     std::to_string(options.num_classes) + ")");
  }
  return make_template(options, label);
}

ImageDataset make_synthetic_dataset(const SyntheticOptions& options) {
  check_options(options);
  std::vector<std::vector<float>> templates;
  templates.reserve(static_cast<std::size_t>(options.num_classes));
  for (std::int64_t label = 0; label < options.num_classes; ++label) {
    templates.push_back(make_template(options, label));
  }

  ImageDataset dataset;
  dataset.name = options.name;
  dataset.channels = options.channels;
  dataset.height = options.height;
  dataset.width = options.width;
  dataset.num_classes = options.num_classes;
  const std::int64_t numel = dataset.sample_numel();
  dataset.pixels.resize(static_cast<std::size_t>(options.size * numel));
  dataset.labels.resize(static_cast<std::size_t>(options.size));
  for (std::int64_t i = 0; i < options.size; ++i) {
    const std::int64_t label = i % options.num_classes;
    dataset.labels[static_cast<std::size_t>(i)] = label;
    // One stream per sample: sample i is the same whatever the dataset size.
    Random random(stream_key(options.sample_seed, kNoiseStream, static_cast<std::uint64_t>(i)));
    const std::vector<float>& base = templates[static_cast<std::size_t>(label)];
    std::uint8_t* out = dataset.pixels.data() + i * numel;
    for (std::int64_t k = 0; k < numel; ++k) {
      const double value = std::clamp(
          base[static_cast<std::size_t>(k)] + options.noise_std * random.normal(), 0.0, 1.0);
      out[k] = static_cast<std::uint8_t>(std::lround(value * 255.0));
    }
  }
  dataset.validate();
  return dataset;
}

}  // namespace sublet::data
