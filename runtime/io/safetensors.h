#pragma once
// The safetensors checkpoint format (the one Hugging Face tools read), over raw bytes so that it
// is independent of Tensor:
//   8 bytes   little-endian uint64 N: length of the JSON header
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//                    ..., "__metadata__": {"key": "string value"}}
//             (padded with spaces so that the data starts 8-byte aligned)
//   rest      the byte buffer; offsets are relative to its start, tensors are little-endian,
//             row-major, contiguous, and together cover the buffer without holes or overlap.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sublet::io {

struct TensorRecord {
  std::string dtype;                // a safetensors dtype name: "F32", "F64", "I64", ...
  std::vector<std::int64_t> shape;  // empty for a scalar
  std::vector<std::uint8_t> bytes;  // numel(shape) * element size, little-endian, row-major

  std::int64_t numel() const;
};

struct SafetensorsFile {
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
};

// The size in bytes of one element of `dtype` (F64, F32, F16, BF16, I64, I32, I16, I8, U64,
// U32, U16, U8, BOOL). Throws ValueError naming the dtype and listing the known ones otherwise.
std::size_t safetensors_element_size(std::string_view dtype);

// Builds a record from typed values; `values.size()` must equal the product of `shape`.
TensorRecord make_f32_record(std::vector<std::int64_t> shape, std::span<const float> values);
TensorRecord make_f64_record(std::vector<std::int64_t> shape, std::span<const double> values);
TensorRecord make_i64_record(std::vector<std::int64_t> shape, std::span<const std::int64_t> values);
// The values of a record of the matching dtype (throws DTypeError otherwise).
std::vector<float> record_as_f32(const TensorRecord& record);
std::vector<double> record_as_f64(const TensorRecord& record);
std::vector<std::int64_t> record_as_i64(const TensorRecord& record);

// Writes atomically (temporary in the same directory, fsync, rename, fsync of the directory):
// an interrupted save leaves the previous file at `path` intact. Tensors are laid out in name
// order. Throws ValueError for an inconsistent record (named) and IoError for I/O failures.
void save_safetensors(const std::filesystem::path& path,
                      const std::map<std::string, TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and validates everything: header length against the file size (header at most 100 MB),
// JSON syntax, entry fields, dtypes, shape against byte count, offsets inside the buffer, no
// overlap and no holes, metadata values being strings. Every failure is an IoError whose
// message starts with the path and says what was expected and what was found.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

// The limit on the JSON header, as in the reference implementation: protects against a corrupt
// length field making us allocate gigabytes.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace sublet::io
