// Reading a pickle file, gzip-compressed or not (pickle_reader.h). memory/ sits below runtime/,
// whose io/file_bytes.cpp decides compression by the ".gz" name; a snapshot is recognised by
// its content instead, because users rename them freely. The file is opened and decompressed by
// core's one input opener and bounded gunzip.
#include "analysis/pickle_reader.h"
#include "core/gunzip.h"
#include "core/input_file.h"

namespace sublet::memory::pickle {

bool is_gzip(std::string_view bytes) { return io::is_gzip(bytes); }

std::string gunzip(std::string_view compressed, const std::string& source) {
  return io::gunzip(compressed, source, {.max_bytes = io::default_gunzip_limit(compressed.size())});
}

std::string read_file_maybe_gzip(const std::string& path) {
  std::string bytes = io::read_input_file(path, {.kind = io::InputKind::file_or_stream});
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

}  // namespace sublet::memory::pickle
