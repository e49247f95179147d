#pragma once
// Whole-file reads and writes for dataset files, which are small enough (tens of MB) to hold in
// memory at once. A name ending in ".gz" means gzip: the readers accept the files exactly as
// the dataset sites distribute them.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>
#include <span>
#include <vector>

namespace sublet::io {

// True when the name ends in ".gz".
bool is_gzip_path(const std::filesystem::path& path);

// What a format's header says about its size, so that gzip data is decompressed no further than
// the header announces (core/gunzip.h); without it, the stated limit of default_gunzip_limit.
struct DecompressedSize {
  std::size_t header_bytes = 0;
  std::function<std::size_t(std::string_view header)> from_header = {};
};

// The file's bytes, gunzipped when the name ends in ".gz". Throws IoError naming the file when
// it is missing, not a regular file (a FIFO or device is refused, never waited on), unreadable,
// or (for gzip) corrupt, truncated or larger than its header or the limit allows.
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path, const DecompressedSize& size = {});

// Writes `bytes` atomically (see atomic_write.h), gzipped when the name ends in ".gz".
void write_file_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace sublet::io
