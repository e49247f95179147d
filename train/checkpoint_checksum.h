#pragma once
// Checksums of a checkpoint's tensors, so that a file damaged after it was written (a flipped bit,
// a bad copy) is refused on resume instead of training on silently wrong weights. One zlib
// crc32 per tensor, over its data bytes, kept in the checkpoint's metadata as a JSON object
// {"model.conv1.weight": "1a2b3c4d", ...}. Checkpoints written before the checksums existed have
// no such entry and load unchecked.
#include <filesystem>
#include <map>
#include <string>

#include "runtime/io/safetensors.h"

namespace sublet::train {

inline constexpr const char* kChecksumMetadataKey = "tensor_crc32";

// The metadata value for `tensors` (one pass over each tensor's bytes).
std::string tensor_checksums_json(const std::map<std::string, io::TensorRecord>& tensors);

// Compares every tensor against `checksums_json`; throws IoError naming `path` and the first
// damaged tensor (in name order), or a tensor with no checksum, or a malformed entry.
void verify_tensor_checksums(const std::filesystem::path& path, const std::string& checksums_json,
                             const std::map<std::string, io::TensorRecord>& tensors);

}  // namespace sublet::train
