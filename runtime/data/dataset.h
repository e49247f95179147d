#pragma once
// An in-memory image classification dataset, independent of Tensor and devices.
// Pixels are kept as bytes (as the files store them): CIFAR-10's 50,000 training images take
// 150 MB this way instead of 600 MB as floats. The loader converts to float per batch.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sublet::data {

struct ImageDataset {
  std::string name;  // e.g. "mnist-train", for messages and logs
  std::int64_t channels = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t num_classes = 0;
  std::vector<std::uint8_t> pixels;  // size() * C*H*W bytes; sample-major, each sample CHW
  std::vector<std::int64_t> labels;  // one per sample, in [0, num_classes)

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  std::int64_t sample_numel() const { return channels * height * width; }
  // The C*H*W bytes of sample `index` (unchecked; see validate()).
  std::span<const std::uint8_t> sample_pixels(std::int64_t index) const {
    return {pixels.data() + index * sample_numel(), static_cast<std::size_t>(sample_numel())};
  }
  // Sample `index` as floats in [0, 1] (pixel / 255), CHW.
  std::vector<float> sample_floats(std::int64_t index) const;

  // Throws ValueError naming the dataset when dimensions, pixel count or a label are
  // inconsistent. Readers and generators call it before returning.
  void validate() const;
};

}  // namespace sublet::data
