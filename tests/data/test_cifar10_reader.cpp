// CIFAR-10 binary reader on small generated batch files and on corrupt ones.
#include <gtest/gtest.h>

#include "core/random.h"
#include "runtime/data/cifar10.h"
#include "test_support.h"

namespace sublet::data {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::read_raw;
using sublet::testing::ScratchDir;
using sublet::testing::write_raw;

// `records` records of 1 label byte + 3072 pixel bytes; labels cycle from `first_label`.
std::vector<std::uint8_t> batch_bytes(int records, std::uint64_t seed, int first_label = 0) {
  Random random(seed);
  std::vector<std::uint8_t> bytes;
  for (int r = 0; r < records; ++r) {
    bytes.push_back(static_cast<std::uint8_t>((first_label + r) % 10));
    for (int k = 0; k < 3072; ++k) bytes.push_back(static_cast<std::uint8_t>(random.below(256)));
  }
  return bytes;
}

void write_train_batches(const ScratchDir& dir) {
  for (int b = 1; b <= 5; ++b) {
    write_raw(dir / ("data_batch_" + std::to_string(b) + ".bin"), batch_bytes(b + 1, b, b));
  }
}

TEST(Cifar10Reader, LoadsTrainBatchesInOrderAsChw) {
  ScratchDir dir;
  write_train_batches(dir);
  const ImageDataset dataset = load_cifar10(dir.path(), Cifar10Split::train);
  EXPECT_EQ(dataset.name, "cifar10-train");
  EXPECT_EQ(dataset.size(), 2 + 3 + 4 + 5 + 6);
  EXPECT_EQ(dataset.channels, 3);
  EXPECT_EQ(dataset.height, 32);
  EXPECT_EQ(dataset.width, 32);
  EXPECT_EQ(dataset.num_classes, 10);
  // Sample 2 is the first record of data_batch_2: label 2, pixels straight after its label.
  const std::vector<std::uint8_t> second = batch_bytes(3, 2, 2);
  EXPECT_EQ(dataset.labels[2], 2);
  const auto pixels = dataset.sample_pixels(2);
  EXPECT_TRUE(std::equal(pixels.begin(), pixels.end(), second.begin() + 1));
  // Last sample: last record of data_batch_5 (6 records, labels 5..10 mod 10).
  EXPECT_EQ(dataset.labels.back(), 0);
}

TEST(Cifar10Reader, LoadsTestBatch) {
  ScratchDir dir;
  write_raw(dir / "test_batch.bin", batch_bytes(7, 9));
  const ImageDataset dataset = load_cifar10(dir.path(), Cifar10Split::test);
  EXPECT_EQ(dataset.name, "cifar10-test");
  EXPECT_EQ(dataset.size(), 7);
  EXPECT_EQ(dataset.labels[6], 6);
}

TEST(Cifar10Reader, MissingBatchIsNamed) {
  ScratchDir dir;
  write_train_batches(dir);
  std::filesystem::remove(dir / "data_batch_4.bin");
  const std::string message = io_error_of([&] { load_cifar10(dir.path(), Cifar10Split::train); });
  expect_mentions(message, {(dir / "data_batch_4.bin").string(), "file not found"});
}

TEST(Cifar10Reader, SizeNotAMultipleOfTheRecordIsTruncation) {
  ScratchDir dir;
  std::vector<std::uint8_t> bytes = batch_bytes(3, 1);
  bytes.resize(bytes.size() - 10);
  write_raw(dir / "test_batch.bin", bytes);
  const std::string message = io_error_of([&] { load_cifar10(dir.path(), Cifar10Split::test); });
  expect_mentions(message, {(dir / "test_batch.bin").string(), "multiple of 3073",
                            "found 9209 bytes", "2 records and 3063 bytes over"});
}

TEST(Cifar10Reader, EmptyFileIsRejected) {
  ScratchDir dir;
  write_raw(dir / "test_batch.bin", {});
  const std::string message = io_error_of([&] { load_cifar10(dir.path(), Cifar10Split::test); });
  expect_mentions(message, {"positive multiple of 3073", "found 0 bytes"});
}

TEST(Cifar10Reader, LabelOutOfRangeLeavesTheDatasetUnchanged) {
  ScratchDir dir;
  std::vector<std::uint8_t> bytes = batch_bytes(3, 1);
  bytes[2 * 3073] = 10;
  write_raw(dir / "bad.bin", bytes);
  ImageDataset dataset;
  dataset.channels = 3;
  dataset.height = dataset.width = 32;
  dataset.num_classes = 10;
  const std::string message = io_error_of([&] { append_cifar10_batch(dir / "bad.bin", dataset); });
  expect_mentions(message,
                  {(dir / "bad.bin").string(), "expected labels 0-9, found 10 in record 2"});
  EXPECT_EQ(dataset.size(), 0);
  EXPECT_TRUE(dataset.pixels.empty());
}

}  // namespace
}  // namespace sublet::data
