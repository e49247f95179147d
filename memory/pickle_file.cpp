// Reading a pickle file, gzip-compressed or not (pickle_reader.h). memory/ sits below runtime/,
// whose io/file_bytes.cpp decides compression by the ".gz" name; a snapshot is recognised by
// its content instead, because users rename them freely.
#include <zlib.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/errors.h"
#include "memory/pickle_reader.h"

namespace sublet::memory::pickle {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view compressed, const std::string& source) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate data, checked by zlib.
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw IoError(source + ": cannot initialise gzip decompression");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&stream};
  std::string out;
  std::size_t in_pos = 0;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  for (;;) {
    // zlib counts in uInt: feed and drain at most kChunk at a time.
    if (stream.avail_in == 0 && in_pos < compressed.size()) {
      const std::size_t n = std::min(compressed.size() - in_pos, kChunk);
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + in_pos));
      stream.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    const std::size_t before = out.size();
    out.resize(before + kChunk);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    stream.avail_out = static_cast<uInt>(kChunk);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    out.resize(before + (kChunk - stream.avail_out));
    if (rc == Z_STREAM_END) {
      const std::size_t left = stream.avail_in + (compressed.size() - in_pos);
      if (left == 0) return out;
      // Concatenated gzip members decompress to the concatenation, as Python's gzip reads them.
      const std::string_view rest = compressed.substr(compressed.size() - left);
      if (!is_gzip(rest))
        throw IoError(fmt::format("{}: {} bytes after the end of the gzip data that are not another gzip member", source, left));
      if (inflateReset(&stream) != Z_OK) throw IoError(source + ": cannot restart gzip decompression");
      continue;
    }
    if (rc == Z_BUF_ERROR && stream.avail_in == 0 && in_pos == compressed.size())
      throw IoError(fmt::format("{}: the gzip data ends early (decompressed {} bytes before the cut; a truncated file?)", source,
                                out.size()));
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw IoError(fmt::format("{}: corrupt gzip data ({})", source, stream.msg != nullptr ? stream.msg : "zlib error " + std::to_string(rc)));
  }
}

std::string read_file_maybe_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw IoError(path + ": read error");
  std::string bytes = std::move(buffer).str();
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

}  // namespace sublet::memory::pickle
