#include "runtime/data/mnist.h"

#include <cstdio>
#include <string>
#include <string_view>

#include "core/errors.h"
#include "core/input_file.h"
#include "runtime/io/file_bytes.h"

namespace sublet::data {
namespace {

std::uint32_t read_be_u32(const std::uint8_t* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
         (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
}

void append_be_u32(std::vector<std::uint8_t>& out, std::uint64_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<std::uint8_t>((value >> shift) & 0xff));
  }
}

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw IoError(path.string() + ": " + problem);
}

// Checks the header size and magic shared by both IDX kinds.
void check_header(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                  std::size_t header_size, std::uint32_t magic, const char* kind) {
  if (bytes.size() < header_size) {
    fail(path, "file is " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                   std::to_string(header_size) + "-byte " + kind + " header (truncated)");
  }
  const std::uint32_t found = read_be_u32(bytes.data());
  if (found != magic) {
    // 0x1f8b is the gzip signature: the common mistake is a compressed file without ".gz".
    const bool gzip = bytes[0] == 0x1f && bytes[1] == 0x8b;
    fail(path, "expected magic " + hex32(magic) + " (" + kind + "), found " + hex32(found) +
                   (gzip ? " (gzip data: name the file with a .gz suffix)" : ""));
  }
}

void check_payload(const std::filesystem::path& path, std::size_t found_bytes,
                   std::uint64_t expected_bytes, const std::string& what) {
  if (found_bytes < expected_bytes) {
    fail(path, "truncated: header says " + what + " (" + std::to_string(expected_bytes) +
                   " bytes after the header), found " + std::to_string(found_bytes));
  }
  if (found_bytes > expected_bytes) {
    fail(path, "header says " + what + " (" + std::to_string(expected_bytes) +
                   " bytes after the header), found " + std::to_string(found_bytes) +
                   " (trailing data)");
  }
}

// What a gzip-compressed IDX file may decompress to: its header's own size (SIZE_MAX for a header
// that is not IDX; check_header then says what is wrong).
io::DecompressedSize idx_size(std::uint32_t magic, std::size_t header_size) {
  return {.header_bytes = header_size, .from_header = [magic, header_size](std::string_view header) -> std::size_t {
            const auto* b = reinterpret_cast<const std::uint8_t*>(header.data());
            if (read_be_u32(b) != magic) return SIZE_MAX;
            unsigned __int128 total = 1;
            for (std::size_t at = 4; at < header_size; at += 4) total *= read_be_u32(b + at);
            total += header_size;
            return total > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(total);
          }};
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = io::read_file_bytes(path, idx_size(kIdxImagesMagic, 16));
  check_header(path, bytes, 16, kIdxImagesMagic, "IDX3 images");
  IdxImages images;
  images.count = read_be_u32(bytes.data() + 4);
  images.rows = read_be_u32(bytes.data() + 8);
  images.cols = read_be_u32(bytes.data() + 12);
  if (images.rows == 0 || images.cols == 0) {
    fail(path, "expected positive image dimensions, found " + std::to_string(images.rows) + "x" +
                   std::to_string(images.cols));
  }
  // Three 32-bit factors can exceed 64 bits; a corrupt header must not wrap around to "fits".
  const unsigned __int128 product = static_cast<unsigned __int128>(images.count) *
                                    static_cast<std::uint64_t>(images.rows) *
                                    static_cast<std::uint64_t>(images.cols);
  const std::uint64_t expected =
      product > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(product);
  const std::uint64_t payload = bytes.size() - 16;
  check_payload(path, payload, expected,
                std::to_string(images.count) + " images of " + std::to_string(images.rows) + "x" +
                    std::to_string(images.cols));
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = io::read_file_bytes(path, idx_size(kIdxLabelsMagic, 8));
  check_header(path, bytes, 8, kIdxLabelsMagic, "IDX1 labels");
  const std::uint64_t count = read_be_u32(bytes.data() + 4);
  check_payload(path, bytes.size() - 8, count, std::to_string(count) + " labels");
  return {bytes.begin() + 8, bytes.end()};
}

void write_idx_images(const std::filesystem::path& path, const IdxImages& images) {
  const std::uint64_t expected =
      static_cast<std::uint64_t>(images.count) * images.rows * images.cols;
  if (images.count < 0 || images.rows <= 0 || images.cols <= 0 || images.count > UINT32_MAX ||
      images.rows > UINT32_MAX || images.cols > UINT32_MAX || images.pixels.size() != expected) {
    throw ValueError(path.string() + ": cannot write " + std::to_string(images.count) +
                     " images of " + std::to_string(images.rows) + "x" +
                     std::to_string(images.cols) + " from " + std::to_string(images.pixels.size()) +
                     " pixel bytes");
  }
  std::vector<std::uint8_t> bytes;
  bytes.reserve(16 + images.pixels.size());
  append_be_u32(bytes, kIdxImagesMagic);
  append_be_u32(bytes, static_cast<std::uint64_t>(images.count));
  append_be_u32(bytes, static_cast<std::uint64_t>(images.rows));
  append_be_u32(bytes, static_cast<std::uint64_t>(images.cols));
  bytes.insert(bytes.end(), images.pixels.begin(), images.pixels.end());
  io::write_file_bytes(path, bytes);
}

void write_idx_labels(const std::filesystem::path& path, std::span<const std::uint8_t> labels) {
  if (labels.size() > UINT32_MAX) {
    throw ValueError(path.string() + ": " + std::to_string(labels.size()) +
                     " labels do not fit an IDX count field");
  }
  std::vector<std::uint8_t> bytes;
  bytes.reserve(8 + labels.size());
  append_be_u32(bytes, kIdxLabelsMagic);
  append_be_u32(bytes, labels.size());
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  io::write_file_bytes(path, bytes);
}

std::filesystem::path find_idx_file(const std::filesystem::path& directory,
                                    const std::string& base_name) {
  const std::filesystem::path plain = directory / base_name;
  std::filesystem::path gzipped = plain;
  gzipped += ".gz";
  if (io::input_exists(plain)) return plain;
  if (io::input_exists(gzipped)) return gzipped;
  throw IoError(plain.string() + ": file not found (nor " + gzipped.filename().string() +
                "); run scripts/fetch_mnist.sh to create the MNIST files");
}

ImageDataset load_mnist(const std::filesystem::path& directory, MnistSplit split) {
  const std::string prefix = split == MnistSplit::train ? "train" : "t10k";
  const std::filesystem::path images_path = find_idx_file(directory, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels_path = find_idx_file(directory, prefix + "-labels-idx1-ubyte");
  IdxImages images = read_idx_images(images_path);
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_path);
  if (static_cast<std::uint64_t>(images.count) != labels.size()) {
    throw IoError(labels_path.string() + ": expected " + std::to_string(images.count) +
                  " labels (the image count of " + images_path.filename().string() + "), found " +
                  std::to_string(labels.size()));
  }
  ImageDataset dataset;
  dataset.name = split == MnistSplit::train ? "mnist-train" : "mnist-test";
  dataset.channels = 1;
  dataset.height = images.rows;
  dataset.width = images.cols;
  dataset.num_classes = 10;
  dataset.pixels = std::move(images.pixels);
  dataset.labels.reserve(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] > 9) {
      throw IoError(labels_path.string() + ": expected labels 0-9, found " +
                    std::to_string(labels[i]) + " at index " + std::to_string(i));
    }
    dataset.labels.push_back(labels[i]);
  }
  dataset.validate();
  return dataset;
}

}  // namespace sublet::data
