#include "core/gunzip.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/errors.h"

namespace sublet::io {

namespace {
std::atomic<std::size_t> default_limit_cap{SIZE_MAX};
}  // namespace

std::size_t default_gunzip_limit(std::size_t compressed_bytes) {
  constexpr std::size_t kFloor = std::size_t{256} << 20;
  constexpr std::size_t kRatio = 100;
  const std::size_t scaled = compressed_bytes > SIZE_MAX / kRatio ? SIZE_MAX : compressed_bytes * kRatio;
  return std::min(std::max(kFloor, scaled), default_limit_cap.load(std::memory_order_relaxed));
}

void cap_default_gunzip_limit(std::size_t max_bytes) {
  std::size_t current = default_limit_cap.load();
  while (max_bytes < current && !default_limit_cap.compare_exchange_weak(current, max_bytes)) {
  }
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view compressed, const std::string& source, const GunzipLimit& limit) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer around the deflate data, checked by zlib.
  if (inflateInit2(&stream, 15 + 16) != Z_OK) throw IoError(source + ": cannot initialise gzip decompression");
  struct End {
    z_stream* s;
    ~End() { inflateEnd(s); }
  } end{&stream};
  std::size_t bound = limit.max_bytes;
  bool header_seen = !limit.size_from_header;
  const auto too_large = [&] {
    return IoError(source + ": decompresses to more than " + std::to_string(bound) + " bytes, " +
                   (header_seen && limit.size_from_header ? std::string("the size its header announces")
                                                          : "the limit for this input (100x the compressed size, at least "
                                                            "256 MiB)") +
                   "; a corrupt file or a gzip bomb");
  };
  std::string out;
  std::size_t in_pos = 0;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  constexpr std::size_t kFirstChunk = std::size_t{64} << 10;
  for (;;) {
    // zlib counts in uInt: feed and drain at most kChunk at a time.
    if (stream.avail_in == 0 && in_pos < compressed.size()) {
      const std::size_t n = std::min(compressed.size() - in_pos, kChunk);
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + in_pos));
      stream.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    const std::size_t before = out.size();
    // One byte past the bound is enough to know the output is too long. The output grows from
    // 64 KiB as it fills: a chunk far larger than the output would cost its zero-filling.
    const std::size_t room = bound - std::min(bound, before);
    const std::size_t chunk = std::clamp(before, kFirstChunk, kChunk);
    const std::size_t want = room < chunk ? room + 1 : chunk;
    out.resize(before + want);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    stream.avail_out = static_cast<uInt>(want);
    const int rc = inflate(&stream, Z_NO_FLUSH);
    out.resize(before + (want - stream.avail_out));
    if (!header_seen && out.size() >= limit.header_bytes) {
      bound = std::min(bound, limit.size_from_header(std::string_view(out).substr(0, limit.header_bytes)));
      header_seen = true;
    }
    if (out.size() > bound) throw too_large();
    if (rc == Z_STREAM_END) {
      const std::size_t left = stream.avail_in + (compressed.size() - in_pos);
      if (left == 0) break;
      // Concatenated gzip members decompress to the concatenation, as Python's gzip reads them.
      const std::string_view rest = compressed.substr(compressed.size() - left);
      if (!is_gzip(rest))
        throw IoError(source + ": " + std::to_string(left) + " bytes after the end of the gzip data that are not another gzip member");
      if (inflateReset(&stream) != Z_OK) throw IoError(source + ": cannot restart gzip decompression");
      continue;
    }
    if (rc == Z_BUF_ERROR && stream.avail_in == 0 && in_pos == compressed.size())
      throw IoError(source + ": the gzip data ends early (decompressed " + std::to_string(out.size()) +
                    " bytes before the cut; a truncated file?)");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      throw IoError(source + ": corrupt gzip data (" + (stream.msg != nullptr ? std::string(stream.msg) : "zlib error " + std::to_string(rc)) + ")");
  }
  return out;
}

}  // namespace sublet::io
