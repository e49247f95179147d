#include "runtime/data/cifar10.h"

#include <string>
#include <vector>

#include "core/errors.h"
#include "core/input_file.h"
#include "runtime/io/file_bytes.h"

namespace sublet::data {
namespace {

ImageDataset empty_cifar10(std::string name) {
  ImageDataset dataset;
  dataset.name = std::move(name);
  dataset.channels = 3;
  dataset.height = 32;
  dataset.width = 32;
  dataset.num_classes = 10;
  return dataset;
}

}  // namespace

void append_cifar10_batch(const std::filesystem::path& path, ImageDataset& dataset) {
  if (!io::input_exists(path)) {
    throw IoError(path.string() +
                  ": file not found (the CIFAR-10 binary version has data_batch_1..5.bin and "
                  "test_batch.bin in cifar-10-batches-bin/)");
  }
  const std::vector<std::uint8_t> bytes = io::read_file_bytes(path);
  const auto record_bytes = static_cast<std::size_t>(kCifar10RecordBytes);
  if (bytes.empty() || bytes.size() % record_bytes != 0) {
    throw IoError(
        path.string() + ": expected a positive multiple of " + std::to_string(record_bytes) +
        " bytes (1 label + 3072 pixels per image), found " + std::to_string(bytes.size()) +
        " bytes (" + std::to_string(bytes.size() / record_bytes) + " records and " +
        std::to_string(bytes.size() % record_bytes) + " bytes over: truncated?)");
  }
  const std::size_t records = bytes.size() / record_bytes;
  // Check every label before appending anything, so a bad file leaves `dataset` unchanged.
  for (std::size_t r = 0; r < records; ++r) {
    const std::uint8_t label = bytes[r * record_bytes];
    if (label > 9) {
      throw IoError(path.string() + ": expected labels 0-9, found " + std::to_string(label) +
                    " in record " + std::to_string(r));
    }
  }
  dataset.pixels.reserve(dataset.pixels.size() + records * (record_bytes - 1));
  dataset.labels.reserve(dataset.labels.size() + records);
  for (std::size_t r = 0; r < records; ++r) {
    const std::uint8_t* record = bytes.data() + r * record_bytes;
    dataset.labels.push_back(record[0]);
    dataset.pixels.insert(dataset.pixels.end(), record + 1, record + record_bytes);
  }
}

ImageDataset load_cifar10(const std::filesystem::path& directory, Cifar10Split split) {
  ImageDataset dataset =
      empty_cifar10(split == Cifar10Split::train ? "cifar10-train" : "cifar10-test");
  if (split == Cifar10Split::train) {
    for (int batch = 1; batch <= 5; ++batch) {
      append_cifar10_batch(directory / ("data_batch_" + std::to_string(batch) + ".bin"), dataset);
    }
  } else {
    append_cifar10_batch(directory / "test_batch.bin", dataset);
  }
  dataset.validate();
  return dataset;
}

}  // namespace sublet::data
