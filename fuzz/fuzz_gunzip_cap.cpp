// Linked into every fuzz target: decompressing readers take at most 1 MiB, so that the gzip bombs
// in the corpora end in microseconds and the runs stay fast.
#include <cstddef>

#include "core/gunzip.h"

namespace {
[[maybe_unused]] const bool capped = [] {
  sublet::io::cap_default_gunzip_limit(std::size_t{1} << 20);
  return true;
}();
}  // namespace
