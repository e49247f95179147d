#include "runtime/io/file_bytes.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "core/errors.h"
#include "core/atomic_write.h"
#include "core/gunzip.h"
#include "core/input_file.h"

namespace sublet::io {
namespace {

std::vector<std::uint8_t> gzip_compress(std::span<const std::uint8_t> bytes,
                                        const std::filesystem::path& path) {
  z_stream stream{};
  // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of a raw zlib stream.
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw IoError(path.string() + ": cannot initialise gzip compression");
  }
  std::vector<std::uint8_t> out(deflateBound(&stream, static_cast<uLong>(bytes.size())));
  stream.next_in = const_cast<Bytef*>(bytes.data());
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) {
    throw IoError(path.string() + ": gzip compression failed (zlib error " + std::to_string(rc) +
                  ")");
  }
  return out;
}

}  // namespace

bool is_gzip_path(const std::filesystem::path& path) { return path.extension() == ".gz"; }

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path, const DecompressedSize& size) {
  std::string bytes = read_input_file(path, {.kind = InputKind::regular_file});
  if (is_gzip_path(path)) {
    bytes = gunzip(bytes, path.string(),
                   {.max_bytes = default_gunzip_limit(bytes.size()),
                    .header_bytes = size.header_bytes,
                    .size_from_header = size.from_header});
  }
  return {bytes.begin(), bytes.end()};
}

void write_file_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  if (is_gzip_path(path) && bytes.size() > std::numeric_limits<uInt>::max()) {
    throw IoError(path.string() + ": " + std::to_string(bytes.size()) +
                  " bytes is too large for one in-memory gzip pass (limit 4 GiB)");
  }
  std::vector<std::uint8_t> compressed;
  std::span<const std::uint8_t> contents = bytes;
  if (is_gzip_path(path)) {
    compressed = gzip_compress(bytes, path);
    contents = compressed;
  }
  write_atomically(
      path, [&](std::FILE* file) { write_or_throw(file, contents.data(), contents.size(), path); });
}

}  // namespace sublet::io
