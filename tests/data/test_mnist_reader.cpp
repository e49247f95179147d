// MNIST IDX reader and writer on small generated files, plain and gzipped, and on corrupt files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/random.h"
#include "runtime/data/mnist.h"
#include "test_support.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::read_raw;
using sublet::testing::ScratchDir;
using sublet::testing::write_raw;

IdxImages random_images(std::int64_t count, std::int64_t rows, std::int64_t cols,
                        std::uint64_t seed) {
  IdxImages images{count, rows, cols, {}};
  Random random(seed);
  images.pixels.resize(static_cast<std::size_t>(count * rows * cols));
  for (auto& pixel : images.pixels) pixel = static_cast<std::uint8_t>(random.below(256));
  return images;
}

std::vector<std::uint8_t> random_labels(std::int64_t count, std::uint64_t seed) {
  Random random(seed);
  std::vector<std::uint8_t> labels(static_cast<std::size_t>(count));
  for (auto& label : labels) label = static_cast<std::uint8_t>(random.below(10));
  return labels;
}

// Writes a consistent split with `count` images of 28x28 under `prefix` ("train" or "t10k").
void write_split(const std::filesystem::path& dir, const std::string& prefix, std::int64_t count,
                 const std::string& suffix = "") {
  write_idx_images(dir / (prefix + "-images-idx3-ubyte" + suffix), random_images(count, 28, 28, 1));
  write_idx_labels(dir / (prefix + "-labels-idx1-ubyte" + suffix), random_labels(count, 2));
}

TEST(MnistReader, WriterProducesTheDocumentedBigEndianLayout) {
  ScratchDir dir;
  write_idx_labels(dir / "labels", std::vector<std::uint8_t>{7, 0, 9});
  EXPECT_EQ(read_raw(dir / "labels"), (std::vector<std::uint8_t>{0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9}));
  write_idx_images(dir / "images", IdxImages{2, 1, 3, {1, 2, 3, 4, 5, 6}});
  EXPECT_EQ(read_raw(dir / "images"), (std::vector<std::uint8_t>{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0,
                                                                 1, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6}));
}

TEST(MnistReader, LoadsPlainFilesBackExactly) {
  ScratchDir dir;
  write_split(dir.path(), "train", 37);
  const ImageDataset dataset = load_mnist(dir.path(), MnistSplit::train);
  EXPECT_EQ(dataset.name, "mnist-train");
  EXPECT_EQ(dataset.size(), 37);
  EXPECT_EQ(dataset.channels, 1);
  EXPECT_EQ(dataset.height, 28);
  EXPECT_EQ(dataset.width, 28);
  EXPECT_EQ(dataset.num_classes, 10);
  EXPECT_EQ(dataset.pixels, random_images(37, 28, 28, 1).pixels);
  const std::vector<std::uint8_t> labels = random_labels(37, 2);
  ASSERT_EQ(dataset.labels.size(), labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(dataset.labels[i], labels[i]);
  // sample_floats scales bytes to [0, 1].
  EXPECT_FLOAT_EQ(dataset.sample_floats(3)[5], dataset.pixels[3 * 784 + 5] / 255.0f);
}

TEST(MnistReader, LoadsGzippedTestSplit) {
  ScratchDir dir;
  write_split(dir.path(), "t10k", 12, ".gz");
  const std::vector<std::uint8_t> head = read_raw(dir / "t10k-images-idx3-ubyte.gz");
  ASSERT_GE(head.size(), 2u);
  EXPECT_EQ(head[0], 0x1f) << "writer did not gzip a .gz file";
  EXPECT_EQ(head[1], 0x8b);
  const ImageDataset dataset = load_mnist(dir.path(), MnistSplit::test);
  EXPECT_EQ(dataset.name, "mnist-test");
  EXPECT_EQ(dataset.size(), 12);
  EXPECT_EQ(dataset.pixels, random_images(12, 28, 28, 1).pixels);
}

TEST(MnistReader, MissingFileNamesIt) {
  ScratchDir dir;
  write_idx_labels(dir / "train-labels-idx1-ubyte", random_labels(3, 2));
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message,
                  {(dir / "train-images-idx3-ubyte").string(), "file not found", "fetch_mnist.sh"});
}

TEST(MnistReader, WrongMagicSaysExpectedAndFound) {
  ScratchDir dir;
  write_split(dir.path(), "train", 4);
  // An images file where the labels file should be.
  write_idx_images(dir / "train-labels-idx1-ubyte", random_images(4, 28, 28, 3));
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message, {(dir / "train-labels-idx1-ubyte").string(),
                            "expected magic 0x00000801 (IDX1 labels), found 0x00000803"});
}

TEST(MnistReader, GzipDataWithoutSuffixGetsAHint) {
  ScratchDir dir;
  write_idx_labels(dir / "labels.gz", random_labels(4, 2));
  std::filesystem::rename(dir / "labels.gz", dir / "labels");
  const std::string message = io_error_of([&] { read_idx_labels(dir / "labels"); });
  expect_mentions(message, {"expected magic 0x00000801", "gzip data"});
}

TEST(MnistReader, TruncatedPixelsAreReported) {
  ScratchDir dir;
  write_split(dir.path(), "train", 5);
  const auto path = dir / "train-images-idx3-ubyte";
  std::vector<std::uint8_t> bytes = read_raw(path);
  bytes.resize(bytes.size() - 100);
  write_raw(path, bytes);
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message,
                  {path.string(), "truncated", "5 images of 28x28", "3920 bytes", "found 3820"});
}

TEST(MnistReader, TruncatedHeaderIsReported) {
  ScratchDir dir;
  write_raw(dir / "images", {0, 0, 8, 3, 0, 0});
  const std::string message = io_error_of([&] { read_idx_images(dir / "images"); });
  expect_mentions(message, {(dir / "images").string(), "file is 6 bytes", "16-byte"});
}

TEST(MnistReader, TrailingBytesAreReported) {
  ScratchDir dir;
  write_idx_labels(dir / "labels", random_labels(6, 2));
  std::vector<std::uint8_t> bytes = read_raw(dir / "labels");
  bytes.push_back(1);
  write_raw(dir / "labels", bytes);
  const std::string message = io_error_of([&] { read_idx_labels(dir / "labels"); });
  expect_mentions(message, {"6 labels", "found 7", "trailing"});
}

TEST(MnistReader, ZeroImageDimensionsAreRejected) {
  ScratchDir dir;
  write_raw(dir / "images", {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 28});
  const std::string message = io_error_of([&] { read_idx_images(dir / "images"); });
  expect_mentions(message, {"expected positive image dimensions", "found 0x28"});
}

TEST(MnistReader, HugeHeaderCountsDoNotOverflowIntoAcceptance) {
  ScratchDir dir;
  // count * rows * cols = 2^64 would wrap to 0 and match an empty payload in 64-bit arithmetic.
  // 2^22 images of 2^21 x 2^21.
  write_raw(dir / "images", {0, 0, 8, 3, 0, 0x40, 0, 0, 0, 0x20, 0, 0, 0, 0x20, 0, 0});
  const std::string message = io_error_of([&] { read_idx_images(dir / "images"); });
  expect_mentions(message, {"truncated", "4194304 images of 2097152x2097152"});
}

TEST(MnistReader, ImageLabelCountMismatchNamesBothFiles) {
  ScratchDir dir;
  write_idx_images(dir / "train-images-idx3-ubyte", random_images(5, 28, 28, 1));
  write_idx_labels(dir / "train-labels-idx1-ubyte", random_labels(4, 2));
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message, {(dir / "train-labels-idx1-ubyte").string(), "expected 5 labels",
                            "train-images-idx3-ubyte", "found 4"});
}

TEST(MnistReader, LabelOutsideZeroToNineIsRejected) {
  ScratchDir dir;
  write_idx_images(dir / "train-images-idx3-ubyte", random_images(5, 28, 28, 1));
  write_idx_labels(dir / "train-labels-idx1-ubyte", std::vector<std::uint8_t>{1, 2, 3, 12, 4});
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message, {(dir / "train-labels-idx1-ubyte").string(),
                            "expected labels 0-9, found 12 at index 3"});
}

TEST(MnistReader, TruncatedGzipStreamIsReported) {
  ScratchDir dir;
  write_split(dir.path(), "train", 50, ".gz");
  const auto path = dir / "train-images-idx3-ubyte.gz";
  std::vector<std::uint8_t> bytes = read_raw(path);
  bytes.resize(bytes.size() / 2);
  write_raw(path, bytes);
  const std::string message = io_error_of([&] { load_mnist(dir.path(), MnistSplit::train); });
  expect_mentions(message, {path.string(), "gzip"});
}

// Smoke test on the real files made by scripts/fetch_mnist.sh (8,000 train / 2,000 test).
TEST(MnistReader, RealFetchedFilesLoadWhenPresent) {
  const char* override_dir = std::getenv("SUBLET_MNIST_DIR");
  const std::filesystem::path dir =
      override_dir != nullptr ? std::filesystem::path(override_dir)
                              : std::filesystem::path(SUBLET_SOURCE_DIR) / "data" / "mnist";
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte") &&
      !std::filesystem::exists(dir / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << dir << " has no MNIST files (run scripts/fetch_mnist.sh): would check that "
                 << "the fetched 8,000/2,000 split loads with all ten classes";
  }
  const ImageDataset train = load_mnist(dir, MnistSplit::train);
  const ImageDataset test = load_mnist(dir, MnistSplit::test);
  EXPECT_EQ(train.size(), 8000);
  EXPECT_EQ(test.size(), 2000);
  EXPECT_EQ(train.height, 28);
  EXPECT_EQ(train.width, 28);
  std::vector<int> per_class(10, 0);
  for (std::int64_t label : train.labels) ++per_class[static_cast<std::size_t>(label)];
  for (int count : per_class) EXPECT_GT(count, 500) << "a class is nearly missing from the split";
  // Digits are dark backgrounds with bright strokes: some pixels are 0, some near 255.
  std::int64_t zeros = 0, bright = 0;
  for (std::uint8_t pixel : train.pixels) {
    zeros += pixel == 0;
    bright += pixel > 200;
  }
  EXPECT_GT(zeros, static_cast<std::int64_t>(train.pixels.size() / 2));
  EXPECT_GT(bright, static_cast<std::int64_t>(train.pixels.size() / 50));
}

}  // namespace
}  // namespace sublet::data
