#pragma once
// The datasets a training run uses, read once, with the preprocessing that suits them:
//   mnist      the IDX files of scripts/fetch_mnist.sh; MNIST's customary normalisation,
//              random shifts of up to 2 pixels
//   cifar10    the binary batches; CIFAR normalisation, random crop (4 px) + horizontal flip
//   synthetic  runtime/data/synthetic.h's learnable task; normalised with the training set's
//              own per-channel statistics (there are no customary ones)
//   text       GPT models: bytes of a text file or folder (the default corpus without --data-dir)
//   tokens     GPT models: llm.c or nanoGPT .bin token files (runtime/data/token_dataset.h)
// --limit-train/--limit-test keep the first N images of a split: the files are in shuffled
// order already (fetch_mnist.sh shuffles; CIFAR-10 ships shuffled), so a prefix is a fair sample.
#include <cstdint>
#include <memory>

#include "runtime/data/dataset.h"
#include "runtime/data/sample_transform.h"
#include "runtime/data/token_dataset.h"
#include "train/train_options.h"

namespace sublet::train {

struct TrainingData {
  // Image models: both splits. GPT models: `tokens` only.
  std::shared_ptr<const data::TokenDataset> tokens;
  std::shared_ptr<const data::ImageDataset> train;
  std::shared_ptr<const data::ImageDataset> test;
  data::Normalization normalization;
  data::Augmentation augmentation;  // training split only
};

// Throws IoError when the files are missing, saying how to get them (for MNIST: run
// scripts/fetch_mnist.sh, or pass --data-dir), or when a split is empty or the test images'
// size differs from the training images'; ValueError when synthetic data would not fit in host
// memory.
TrainingData load_training_data(const TrainOptions& options);

// The first `limit` samples of `dataset` (all of them when limit is 0 or not smaller).
data::ImageDataset take_first(data::ImageDataset dataset, std::int64_t limit);

// Per-channel mean and standard deviation of the pixels on the [0, 1] scale.
data::Normalization channel_statistics(const data::ImageDataset& dataset);

}  // namespace sublet::train
