#pragma once
// Whole-file reads and writes for dataset files, which are small enough (tens of MB) to hold in
// memory at once. A name ending in ".gz" means gzip: the readers accept the files exactly as
// the dataset sites distribute them.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace sublet::io {

// True when the name ends in ".gz".
bool is_gzip_path(const std::filesystem::path& path);

// The file's bytes, gunzipped when the name ends in ".gz". Throws IoError naming the file when
// it is missing, unreadable, or (for gzip) corrupt or truncated.
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);

// Writes `bytes` atomically (see atomic_write.h), gzipped when the name ends in ".gz".
void write_file_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace sublet::io
