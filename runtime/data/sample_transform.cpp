#include "runtime/data/sample_transform.h"

#include <string>

#include "core/errors.h"
#include "core/random.h"

namespace sublet::data {

Normalization mnist_normalization() { return {{0.1307f}, {0.3081f}}; }

// The training split's pixel mean and standard deviation (of values scaled to [0, 1]).
Normalization fashion_mnist_normalization() { return {{0.2860f}, {0.3530f}}; }

Normalization cifar10_normalization() {
  return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
}

void check_sample_transform(const ImageDataset& dataset, const Normalization& normalization,
                            const Augmentation& augmentation) {
  const bool none = normalization.mean.empty() && normalization.stddev.empty();
  const auto channels = static_cast<std::size_t>(dataset.channels);
  if (!none && (normalization.mean.size() != channels || normalization.stddev.size() != channels)) {
    throw ValueError("loader: normalisation for " + dataset.name + " needs " +
                     std::to_string(channels) + " means and stddevs (one per channel), got " +
                     std::to_string(normalization.mean.size()) + " and " +
                     std::to_string(normalization.stddev.size()));
  }
  for (std::size_t c = 0; c < normalization.stddev.size(); ++c) {
    if (!(normalization.stddev[c] > 0.0f)) {
      throw ValueError("loader: normalisation stddev of channel " + std::to_string(c) +
                       " must be > 0, got " + std::to_string(normalization.stddev[c]));
    }
  }
  if (augmentation.crop_padding < 0) {
    throw ValueError("loader: crop_padding must be >= 0, got " +
                     std::to_string(augmentation.crop_padding));
  }
}

void write_transformed_sample(const ImageDataset& dataset, std::int64_t index,
                              const Normalization& normalization, const Augmentation& augmentation,
                              std::uint64_t random_key, float* out) {
  const std::int64_t channels = dataset.channels;
  const std::int64_t height = dataset.height;
  const std::int64_t width = dataset.width;
  Random random(random_key);
  std::int64_t shift_y = 0;
  std::int64_t shift_x = 0;
  if (augmentation.random_crop) {
    // A crop at offset o of the image padded by p reads source pixel (y + o - p).
    const auto choices = static_cast<std::uint64_t>(2 * augmentation.crop_padding + 1);
    shift_y = static_cast<std::int64_t>(random.below(choices)) - augmentation.crop_padding;
    shift_x = static_cast<std::int64_t>(random.below(choices)) - augmentation.crop_padding;
  }
  const bool flip = augmentation.horizontal_flip && random.below(2) == 1;

  const std::uint8_t* pixels = dataset.sample_pixels(index).data();
  for (std::int64_t c = 0; c < channels; ++c) {
    // Every byte value's output for this channel, computed in double: exact (pixel / 255.0f when
    // not normalising, the same as ImageDataset::sample_floats), and a lookup per pixel after.
    float value_of[256];
    for (int pixel = 0; pixel < 256; ++pixel) {
      if (normalization.mean.empty()) {
        value_of[pixel] = static_cast<float>(pixel) / 255.0f;
      } else {
        const auto k = static_cast<std::size_t>(c);
        value_of[pixel] =
            static_cast<float>((pixel / 255.0 - normalization.mean[k]) / normalization.stddev[k]);
      }
    }
    const std::uint8_t* plane = pixels + c * height * width;
    float* out_plane = out + c * height * width;
    for (std::int64_t y = 0; y < height; ++y) {
      const std::int64_t source_y = y + shift_y;
      for (std::int64_t x = 0; x < width; ++x) {
        // Flip after the crop, as torchvision does: mirror the output column.
        const std::int64_t source_x = (flip ? width - 1 - x : x) + shift_x;
        const bool inside = source_y >= 0 && source_y < height && source_x >= 0 && source_x < width;
        // Padding is a black pixel, normalised like any other.
        const std::uint8_t pixel = inside ? plane[source_y * width + source_x] : 0;
        out_plane[y * width + x] = value_of[pixel];
      }
    }
  }
}

}  // namespace sublet::data
