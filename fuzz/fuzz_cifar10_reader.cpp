// Arbitrary bytes as a CIFAR-10 batch: appended whole or rejected with IoError, leaving the
// dataset unchanged.
#include <cstdint>

#include "fuzz/fuzz_input_file.h"
#include "core/errors.h"
#include "runtime/data/cifar10.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto path = sublet::fuzz::scratch_file("-cifar.bin");
  sublet::fuzz::write_input(path, data, size);
  sublet::data::ImageDataset dataset;
  dataset.channels = 3;
  dataset.height = 32;
  dataset.width = 32;
  dataset.num_classes = 10;
  try {
    sublet::data::append_cifar10_batch(path, dataset);
  } catch (const sublet::IoError&) {
    if (!dataset.pixels.empty() || !dataset.labels.empty()) std::abort();
  }
  return 0;
}
