#pragma once
// Gzip decompression with a bound: a few megabytes of gzip can expand to gigabytes (a "gzip
// bomb", or a file linked to /dev/zero), so every decompressing reader states how much it takes.
// Concatenated gzip members decompress to the concatenation, as Python's and zlib's readers do.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sublet::io {

struct GunzipLimit {
  // The most bytes the output may have (the format's stated limit).
  std::size_t max_bytes = 0;
  // When set: once `header_bytes` bytes are out, called with them; returns the size the format's
  // own header announces (SIZE_MAX for a header it does not recognise), which then bounds the
  // output too. The reader checks the exact size itself, with its own message.
  std::size_t header_bytes = 0;
  std::function<std::size_t(std::string_view header)> size_from_header = {};
};

// The stated limit of a decompressing reader with no size header: 100 times the compressed
// size (real snapshots and datasets compress 3-20x), and at least 256 MiB.
// Lowered (never raised) by cap_default_gunzip_limit.
std::size_t default_gunzip_limit(std::size_t compressed_bytes);

// Caps default_gunzip_limit for the whole process: the fuzz targets cap it at 1 MiB at start-up so
// that gzip bombs in their corpora end in microseconds. Thread-safe.
void cap_default_gunzip_limit(std::size_t max_bytes);

bool is_gzip(std::string_view bytes);

// The decompressed bytes. IoError naming `source` for corrupt or truncated data, and for output
// beyond the limit (saying the limit and where it came from).
std::string gunzip(std::string_view compressed, const std::string& source, const GunzipLimit& limit);

}  // namespace sublet::io
