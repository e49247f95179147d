#include "runtime/data/dataset.h"

#include <string>

#include "core/errors.h"

namespace sublet::data {

std::vector<float> ImageDataset::sample_floats(std::int64_t index) const {
  if (index < 0 || index >= size()) {
    throw ValueError(name + ": sample index " + std::to_string(index) + " out of range [0, " +
                     std::to_string(size()) + ")");
  }
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(sample_numel()));
  for (std::uint8_t pixel : sample_pixels(index)) values.push_back(pixel / 255.0f);
  return values;
}

void ImageDataset::validate() const {
  if (channels <= 0 || height <= 0 || width <= 0) {
    throw ValueError(name + ": image shape must be positive, got C=" + std::to_string(channels) +
                     " H=" + std::to_string(height) + " W=" + std::to_string(width));
  }
  if (num_classes <= 0) {
    throw ValueError(name + ": num_classes must be positive, got " + std::to_string(num_classes));
  }
  const std::uint64_t expected_pixels =
      static_cast<std::uint64_t>(size()) * static_cast<std::uint64_t>(sample_numel());
  if (pixels.size() != expected_pixels) {
    throw ValueError(name + ": " + std::to_string(size()) + " samples of " +
                     std::to_string(channels) + "x" + std::to_string(height) + "x" +
                     std::to_string(width) + " need " + std::to_string(expected_pixels) +
                     " pixel bytes, found " + std::to_string(pixels.size()));
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      throw ValueError(name + ": label " + std::to_string(labels[i]) + " of sample " +
                       std::to_string(i) + " outside [0, " + std::to_string(num_classes) + ")");
    }
  }
}

}  // namespace sublet::data
