#include "runtime/io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/errors.h"
#include "core/atomic_write.h"
#include "core/input_file.h"
#include "core/json_excerpt.h"
#include "core/printable.h"

// The format is little-endian and we copy bytes straight into typed values.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace sublet::io {
namespace {

using nlohmann::json;

struct DTypeInfo {
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DTypeInfo, 13> kDTypes{{{"F64", 8},
                                             {"F32", 4},
                                             {"F16", 2},
                                             {"BF16", 2},
                                             {"I64", 8},
                                             {"I32", 4},
                                             {"I16", 2},
                                             {"I8", 1},
                                             {"U64", 8},
                                             {"U32", 4},
                                             {"U16", 2},
                                             {"U8", 1},
                                             {"BOOL", 1}}};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string known_dtypes() {
  std::string names;
  for (const DTypeInfo& info : kDTypes) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// numel of `shape`, or nullopt-like -1 when a dimension is negative or the product overflows.
std::int64_t checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t numel = 1;
  for (std::int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim != 0 && numel > std::numeric_limits<std::int64_t>::max() / dim) return -1;
    numel *= dim;
  }
  return numel;
}

template <typename T>
TensorRecord make_record(std::string dtype, std::vector<std::int64_t> shape,
                         std::span<const T> values) {
  const std::int64_t numel = checked_numel(shape);
  if (numel < 0 || static_cast<std::uint64_t>(numel) != values.size()) {
    throw ShapeError("safetensors: shape " + shape_text(shape) + " needs " + std::to_string(numel) +
                     " values, got " + std::to_string(values.size()));
  }
  TensorRecord record{std::move(dtype), std::move(shape), {}};
  record.bytes.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(record.bytes.data(), values.data(), values.size_bytes());
  return record;
}

template <typename T>
std::vector<T> record_values(const TensorRecord& record, std::string_view dtype) {
  if (record.dtype != dtype) {
    throw DTypeError("safetensors: expected a " + std::string(dtype) + " record, found " +
                     record.dtype);
  }
  if (record.bytes.size() % sizeof(T) != 0) {
    throw ShapeError("safetensors: " + std::to_string(record.bytes.size()) +
                     " bytes is not a whole number of " + std::string(dtype) + " values");
  }
  std::vector<T> values(record.bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), record.bytes.data(), record.bytes.size());
  return values;
}

// ---- writing ---------------------------------------------------------------------------------

void check_record(const std::string& name, const TensorRecord& record) {
  if (name.empty() || name == "__metadata__") {
    throw ValueError("save_safetensors: tensor name '" + name +
                     "' is not allowed (empty or reserved)");
  }
  const DTypeInfo* info = find_dtype(record.dtype);
  if (info == nullptr) {
    throw ValueError("save_safetensors: tensor '" + name + "' has unknown dtype '" + record.dtype +
                     "' (known: " + known_dtypes() + ")");
  }
  const std::int64_t numel = checked_numel(record.shape);
  if (numel < 0) {
    throw ValueError("save_safetensors: tensor '" + name + "' has invalid shape " +
                     shape_text(record.shape));
  }
  const std::uint64_t expected = static_cast<std::uint64_t>(numel) * info->size;
  if (record.bytes.size() != expected) {
    throw ValueError("save_safetensors: tensor '" + name + "' " + record.dtype + " " +
                     shape_text(record.shape) + " needs " + std::to_string(expected) +
                     " bytes, has " + std::to_string(record.bytes.size()));
  }
}

std::string make_header(const std::map<std::string, TensorRecord>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, record] : tensors) {
    const std::uint64_t end = offset + record.bytes.size();
    header[name] = {
        {"dtype", record.dtype}, {"shape", record.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& error) {
    throw ValueError(std::string("save_safetensors: names and metadata must be UTF-8 (") +
                     error.what() + ")");
  }
  // Readers that map the file can then view the data as aligned typed arrays.
  const std::size_t aligned = (8 + text.size() + 7) / 8 * 8 - 8;
  text.append(aligned - text.size(), ' ');
  return text;
}

// ---- reading ---------------------------------------------------------------------------------

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw IoError(path.string() + ": " + problem);
}

struct Entry {
  std::string name;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

std::uint64_t read_le_u64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

std::uint64_t nonnegative_integer(const json& value, const std::filesystem::path& path,
                                  const std::string& what) {
  const bool negative =
      value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0;
  if (!value.is_number_integer() || negative) {
    fail(path, what + ": expected a non-negative integer, found " + json_excerpt(value));
  }
  return value.get<std::uint64_t>();
}

TensorRecord parse_entry(const std::filesystem::path& path, const std::string& name,
                         const json& entry, std::uint64_t buffer_size, Entry& placement) {
  const std::string where = "tensor '" + printable(name) + "'";
  if (!entry.is_object()) fail(path, where + ": expected an object, found " + json_excerpt(entry));
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(path, where + ": unexpected field '" + printable(key) + "' (expected dtype, shape, data_offsets)");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) fail(path, where + ": missing field '" + key + "'");
  }
  TensorRecord record;
  if (!entry["dtype"].is_string()) {
    fail(path, where + ": dtype must be a string, found " + json_excerpt(entry["dtype"]));
  }
  record.dtype = entry["dtype"].get<std::string>();
  const DTypeInfo* info = find_dtype(record.dtype);
  if (info == nullptr) {
    fail(path, where + ": unknown dtype '" + printable(record.dtype) + "' (known: " + known_dtypes() + ")");
  }
  if (!entry["shape"].is_array()) {
    fail(path, where + ": shape must be an array, found " + json_excerpt(entry["shape"]));
  }
  for (const json& dim : entry["shape"]) {
    const std::uint64_t value = nonnegative_integer(dim, path, where + " shape");
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(path, where + ": shape dimension " + std::to_string(value) + " is too large");
    }
    record.shape.push_back(static_cast<std::int64_t>(value));
  }
  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(path, where + ": data_offsets must be [begin, end], found " + json_excerpt(offsets));
  }
  placement.name = name;
  placement.begin = nonnegative_integer(offsets[0], path, where + " data_offsets");
  placement.end = nonnegative_integer(offsets[1], path, where + " data_offsets");
  if (placement.begin > placement.end) {
    fail(path, where + ": data_offsets [" + std::to_string(placement.begin) + ", " +
                   std::to_string(placement.end) + "] end before they begin");
  }
  if (placement.end > buffer_size) {
    fail(path, where + ": data_offsets [" + std::to_string(placement.begin) + ", " +
                   std::to_string(placement.end) + "] exceed the " + std::to_string(buffer_size) +
                   "-byte data buffer (file truncated?)");
  }
  const std::int64_t numel = checked_numel(record.shape);
  const std::uint64_t span = placement.end - placement.begin;
  if (numel < 0 || static_cast<std::uint64_t>(numel) > span / info->size ||
      static_cast<std::uint64_t>(numel) * info->size != span) {
    fail(path, where + ": " + record.dtype + " " + shape_text(record.shape) + " needs " +
                   (numel < 0 ? std::string("an impossible number of")
                              : std::to_string(static_cast<std::uint64_t>(numel) * info->size)) +
                   " bytes, but data_offsets span " + std::to_string(span));
  }
  return record;
}

std::map<std::string, std::string> parse_metadata(const std::filesystem::path& path,
                                                  const json& metadata) {
  if (!metadata.is_object()) {
    fail(path, "__metadata__: expected an object of strings, found " + json_excerpt(metadata));
  }
  std::map<std::string, std::string> result;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      fail(path, "__metadata__ '" + printable(key) + "': values must be strings, found " + json_excerpt(value));
    }
    result[key] = value.get<std::string>();
  }
  return result;
}

// Tensors must tile the buffer exactly: sorted by begin, each starts where the previous ended.
void check_layout(const std::filesystem::path& path, std::vector<Entry>& entries,
                  std::uint64_t buffer_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < covered) {
      fail(path, "tensors '" + previous->name + "' [" + std::to_string(previous->begin) + ", " +
                     std::to_string(previous->end) + ") and '" + entry.name + "' [" +
                     std::to_string(entry.begin) + ", " + std::to_string(entry.end) + ") overlap");
    }
    if (entry.begin > covered) {
      fail(path, "bytes [" + std::to_string(covered) + ", " + std::to_string(entry.begin) +
                     ") of the data buffer belong to no tensor");
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != buffer_size) {
    fail(path, "bytes [" + std::to_string(covered) + ", " + std::to_string(buffer_size) +
                   ") at the end of the data buffer belong to no tensor");
  }
}

}  // namespace

std::int64_t TensorRecord::numel() const { return checked_numel(shape); }

std::size_t safetensors_element_size(std::string_view dtype) {
  const DTypeInfo* info = find_dtype(dtype);
  if (info == nullptr) {
    throw ValueError("safetensors: unknown dtype '" + std::string(dtype) +
                     "' (known: " + known_dtypes() + ")");
  }
  return info->size;
}

TensorRecord make_f32_record(std::vector<std::int64_t> shape, std::span<const float> values) {
  return make_record<float>("F32", std::move(shape), values);
}
TensorRecord make_f64_record(std::vector<std::int64_t> shape, std::span<const double> values) {
  return make_record<double>("F64", std::move(shape), values);
}
TensorRecord make_i64_record(std::vector<std::int64_t> shape,
                             std::span<const std::int64_t> values) {
  return make_record<std::int64_t>("I64", std::move(shape), values);
}
std::vector<float> record_as_f32(const TensorRecord& record) {
  return record_values<float>(record, "F32");
}
std::vector<double> record_as_f64(const TensorRecord& record) {
  return record_values<double>(record, "F64");
}
std::vector<std::int64_t> record_as_i64(const TensorRecord& record) {
  return record_values<std::int64_t>(record, "I64");
}

void save_safetensors(const std::filesystem::path& path,
                      const std::map<std::string, TensorRecord>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  for (const auto& [name, record] : tensors) check_record(name, record);
  const std::string header = make_header(tensors, metadata);
  write_atomically(path, [&](std::FILE* file) {
    unsigned char length[8];
    std::uint64_t value = header.size();
    for (unsigned char& byte : length) {
      byte = static_cast<unsigned char>(value & 0xff);
      value >>= 8;
    }
    write_or_throw(file, length, sizeof(length), path);
    write_or_throw(file, header.data(), header.size(), path);
    for (const auto& [name, record] : tensors) {
      write_or_throw(file, record.bytes.data(), record.bytes.size(), path);
    }
  });
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  // A FIFO or device is refused here at once (never waited on); missing files too.
  const InputHandle file = open_input(path, {.kind = InputKind::regular_file, .max_bytes = SIZE_MAX});
  struct stat info {};
  if (::fstat(::fileno(file.get()), &info) != 0)
    fail(path, std::string("cannot read the file size (") + std::strerror(errno) + ")");
  const auto file_size = static_cast<std::uint64_t>(info.st_size);

  unsigned char length_bytes[8];
  if (file_size < 8 || std::fread(length_bytes, 1, 8, file.get()) != 8) {
    fail(path, "file is " + std::to_string(file_size) +
                   " bytes, shorter than the 8-byte header length field");
  }
  const std::uint64_t header_size = read_le_u64(length_bytes);
  if (header_size > kSafetensorsMaxHeaderBytes) {
    fail(path, "header length field says " + std::to_string(header_size) +
                   " bytes, more than the " + std::to_string(kSafetensorsMaxHeaderBytes) +
                   "-byte limit (not a safetensors file, or corrupt)");
  }
  if (header_size > file_size - 8) {
    fail(path, "header length field says " + std::to_string(header_size) + " bytes, but only " +
                   std::to_string(file_size - 8) + " bytes follow it (truncated?)");
  }
  std::string header_text(header_size, '\0');
  if (std::fread(header_text.data(), 1, header_size, file.get()) != header_size) {
    fail(path, "could not read the " + std::to_string(header_size) + "-byte header");
  }
  if (header_text.empty() || header_text.front() != '{') {
    fail(path, "header must be a JSON object starting with '{'");
  }
  // The JSON library keeps the last of repeated keys silently; a repeated tensor name means a
  // corrupt or hand-edited header, so count the top-level keys while parsing.
  std::set<std::string> names;
  std::string repeated_name;
  const json::parser_callback_t note_repeats = [&](int depth, json::parse_event_t event,
                                                   json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 &&
        !names.insert(parsed.get<std::string>()).second && repeated_name.empty()) {
      repeated_name = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(header_text, note_repeats);
  } catch (const json::exception& parse_error) {
    // Not only parse_error: a number too large for any JSON number type is out_of_range (406),
    // found by fuzz_safetensors_reader (fuzz/corpus/fuzz_safetensors_reader/number-overflow).
    fail(path, std::string("header is not valid JSON (") + parse_error.what() + ")");
  }
  if (!repeated_name.empty()) fail(path, "header names '" + printable(repeated_name) + "' more than once");
  if (!header.is_object()) fail(path, "header must be a JSON object, found " + json_excerpt(header));

  const std::uint64_t buffer_size = file_size - 8 - header_size;
  SafetensorsFile result;
  std::vector<Entry> placements;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      result.metadata = parse_metadata(path, entry);
      continue;
    }
    Entry placement;
    result.tensors.emplace(name, parse_entry(path, name, entry, buffer_size, placement));
    placements.push_back(placement);
  }
  check_layout(path, placements, buffer_size);

  // Sorted and contiguous, so one sequential pass reads every tensor.
  for (const Entry& placement : placements) {
    TensorRecord& record = result.tensors.at(placement.name);
    record.bytes.resize(placement.end - placement.begin);
    if (std::fread(record.bytes.data(), 1, record.bytes.size(), file.get()) !=
        record.bytes.size()) {
      fail(path, "tensor '" + placement.name + "': could not read " +
                     std::to_string(record.bytes.size()) + " bytes (" + std::strerror(errno) + ")");
    }
  }
  return result;
}

}  // namespace sublet::io
