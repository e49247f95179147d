// Arbitrary bytes as MNIST IDX image and label files, plain and as a ".gz" file (gunzipped no
// further than the IDX header announces: the corpus holds gzip bombs): a valid read or an
// IoError, never a crash.
#include <cstdint>

#include "fuzz/fuzz_input_file.h"
#include "core/errors.h"
#include "runtime/data/mnist.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto path = sublet::fuzz::scratch_file("-idx");
  sublet::fuzz::write_input(path, data, size);
  try {
    const auto images = sublet::data::read_idx_images(path);
    if (images.pixels.size() != static_cast<std::size_t>(images.count * images.rows * images.cols)) std::abort();
  } catch (const sublet::IoError&) {
  }
  try {
    sublet::data::read_idx_labels(path);
  } catch (const sublet::IoError&) {
  }
  static const auto gz_path = sublet::fuzz::scratch_file("-idx.gz");
  sublet::fuzz::write_input(gz_path, data, size);
  try {
    const auto images = sublet::data::read_idx_images(gz_path);
    if (images.pixels.size() != static_cast<std::size_t>(images.count * images.rows * images.cols)) std::abort();
  } catch (const sublet::IoError&) {
  }
  try {
    sublet::data::read_idx_labels(gz_path);
  } catch (const sublet::IoError&) {
  }
  return 0;
}
