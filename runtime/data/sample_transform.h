#pragma once
// Per-sample preprocessing done by the loader: bytes to floats, the usual CIFAR augmentation
// (random crop with zero padding, horizontal flip) and per-channel normalisation, in the order
// torchvision applies RandomCrop, RandomHorizontalFlip, ToTensor, Normalize. Padding pixels
// are black (0) before normalisation, as there.
#include <cstdint>
#include <vector>

#include "runtime/data/dataset.h"

namespace sublet::data {

struct Normalization {
  std::vector<float> mean{};    // per channel, on the [0, 1] pixel scale; empty: no normalisation
  std::vector<float> stddev{};  // per channel, > 0; same length as mean
};

// The customary statistics of the training sets: MNIST mean 0.1307, std 0.3081; CIFAR-10
// mean (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616).
Normalization mnist_normalization();
Normalization fashion_mnist_normalization();
Normalization cifar10_normalization();

struct Augmentation {
  bool random_crop = false;  // shift by up to crop_padding pixels, filling with black
  std::int64_t crop_padding = 4;
  bool horizontal_flip = false;  // mirror left-right with probability 1/2
};

// Throws ValueError unless `normalization` is empty or has one positive stddev and one mean
// per channel of `dataset`, and crop_padding >= 0.
void check_sample_transform(const ImageDataset& dataset, const Normalization& normalization,
                            const Augmentation& augmentation);

// Writes sample `index` of `dataset`, transformed, as C*H*W floats to `out`. The random choices
// come only from `random_key`, so a sample's augmentation does not depend on which batch or
// thread prepares it.
void write_transformed_sample(const ImageDataset& dataset, std::int64_t index,
                              const Normalization& normalization, const Augmentation& augmentation,
                              std::uint64_t random_key, float* out);

}  // namespace sublet::data
