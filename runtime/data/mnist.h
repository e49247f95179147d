#pragma once
// MNIST in the IDX format of the original distribution (train-images-idx3-ubyte, ...),
// plain or gzipped, plus an IDX writer (for the fetch converter's checks and for tests).
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "runtime/data/dataset.h"

namespace sublet::data {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

struct IdxImages {
  std::int64_t count = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major
};

// Readers validate magic, dimensions and exact length; each failure throws IoError naming the
// file and what was expected vs found. A name ending in ".gz" is gunzipped.
IdxImages read_idx_images(const std::filesystem::path& path);
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& path);

// Writers (atomic; gzipped when the name ends in ".gz"). Throw ValueError when pixels.size()
// does not match count * rows * cols.
void write_idx_images(const std::filesystem::path& path, const IdxImages& images);
void write_idx_labels(const std::filesystem::path& path, std::span<const std::uint8_t> labels);

enum class MnistSplit { train, test };

// The IDX file for `base_name` (e.g. "train-images-idx3-ubyte") in `directory`: the plain file
// if present, else base_name + ".gz". Throws IoError naming both when neither exists.
std::filesystem::path find_idx_file(const std::filesystem::path& directory,
                                    const std::string& base_name);

// Loads the split from `directory` (train-* or t10k-* files) as a 1xRxC (28x28 for MNIST),
// 10-class dataset named "mnist-train"/"mnist-test".
// Checks that image and label counts agree and that labels are 0-9.
ImageDataset load_mnist(const std::filesystem::path& directory, MnistSplit split);

}  // namespace sublet::data
