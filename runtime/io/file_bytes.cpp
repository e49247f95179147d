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

namespace sublet::io {
namespace {

void throw_if_missing(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw IoError(path.string() + ": file not found");
  }
  if (std::filesystem::is_directory(path, error)) {
    throw IoError(path.string() + ": expected a file, found a directory");
  }
}

std::vector<std::uint8_t> read_plain(const std::filesystem::path& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    throw IoError(path.string() + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) throw IoError(path.string() + ": cannot read the file size (" + error.message() + ")");
  std::vector<std::uint8_t> bytes(size);
  const std::size_t got = std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (got != bytes.size()) {
    throw IoError(path.string() + ": read " + std::to_string(got) + " of " +
                  std::to_string(bytes.size()) + " bytes (" + std::strerror(errno) + ")");
  }
  return bytes;
}

std::string gz_error_text(gzFile file) {
  int code = Z_OK;
  const char* text = gzerror(file, &code);
  return text != nullptr && *text != '\0' ? text : "zlib error " + std::to_string(code);
}

std::vector<std::uint8_t> read_gzip(const std::filesystem::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw IoError(path.string() + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  std::vector<std::uint8_t> bytes;
  constexpr std::size_t kChunk = 1 << 20;
  for (;;) {
    const std::size_t old_size = bytes.size();
    bytes.resize(old_size + kChunk);
    const int got = gzread(file, bytes.data() + old_size, static_cast<unsigned>(kChunk));
    if (got < 0) {
      const std::string why = gz_error_text(file);
      gzclose_r(file);
      throw IoError(path.string() + ": corrupt gzip data (" + why + ")");
    }
    bytes.resize(old_size + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  // A stream cut short reads as a clean end of file until the close reports it.
  int code = Z_OK;
  gzerror(file, &code);
  const int close_code = gzclose_r(file);
  if (code != Z_OK || close_code != Z_OK) {
    throw IoError(path.string() + ": gzip stream truncated or corrupt (decompressed " +
                  std::to_string(bytes.size()) + " bytes before the error)");
  }
  return bytes;
}

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

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  throw_if_missing(path);
  return is_gzip_path(path) ? read_gzip(path) : read_plain(path);
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
