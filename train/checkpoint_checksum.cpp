#include "train/checkpoint_checksum.h"

#include <fmt/format.h>
#include <zlib.h>

#include <climits>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace sublet::train {
namespace {

std::uint32_t crc32_of(const std::vector<std::uint8_t>& bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  const std::uint8_t* data = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {  // zlib takes a uInt length: feed large tensors in pieces
    const uInt piece = static_cast<uInt>(std::min<std::size_t>(left, UINT_MAX));
    crc = ::crc32(crc, data, piece);
    data += piece;
    left -= piece;
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

std::string tensor_checksums_json(const std::map<std::string, io::TensorRecord>& tensors) {
  nlohmann::json checksums = nlohmann::json::object();
  for (const auto& [name, record] : tensors) checksums[name] = fmt::format("{:08x}", crc32_of(record.bytes));
  return checksums.dump();
}

void verify_tensor_checksums(const std::filesystem::path& path, const std::string& checksums_json,
                             const std::map<std::string, io::TensorRecord>& tensors) {
  const nlohmann::json checksums = nlohmann::json::parse(checksums_json, nullptr, /*allow_exceptions=*/false);
  if (!checksums.is_object()) {
    throw IoError(path.string() + ": checkpoint metadata '" + kChecksumMetadataKey + "' is not a JSON object of checksums");
  }
  for (const auto& [name, record] : tensors) {
    const auto stored = checksums.find(name);
    if (stored == checksums.end() || !stored->is_string()) {
      throw IoError(path.string() + ": checkpoint tensor '" + name + "' has no checksum in '" + kChecksumMetadataKey +
                    "': the file was changed after it was written");
    }
    const std::string computed = fmt::format("{:08x}", crc32_of(record.bytes));
    if (stored->get<std::string>() != computed) {
      throw IoError(fmt::format("{}: checkpoint tensor '{}' is damaged (crc32 {}, written as {}); resume from an "
                                "earlier checkpoint or start again",
                                path.string(), name, computed, stored->get<std::string>()));
    }
  }
}

}  // namespace sublet::train
