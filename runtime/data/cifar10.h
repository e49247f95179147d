#pragma once
// CIFAR-10, "binary version" (cifar-10-binary.tar.gz): data_batch_1..5.bin for training and
// test_batch.bin for testing; each record is 1 label byte followed by 3072 pixel bytes
// (1024 red, 1024 green, 1024 blue; each 32x32 row-major), i.e. CHW already.
#include <filesystem>

#include "runtime/data/dataset.h"

namespace sublet::data {

inline constexpr std::int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

enum class Cifar10Split { train, test };

// Appends the records of one batch file to `dataset` (which must be 3x32x32, 10 classes).
// Throws IoError naming the file when it is missing, its size is not a positive multiple of
// 3073 bytes, or a label is outside 0-9.
void append_cifar10_batch(const std::filesystem::path& path, ImageDataset& dataset);

// Loads the split from `directory` (the extracted cifar-10-batches-bin folder) as a 3x32x32,
// 10-class dataset named "cifar10-train"/"cifar10-test".
ImageDataset load_cifar10(const std::filesystem::path& directory, Cifar10Split split);

}  // namespace sublet::data
