#pragma once
// A dependency-free SVG of the pair rows: median ns per pair (log y) against request size
// (log x), one polyline per allocator; the tensor rows as hollow squares at their tensor's bytes
// in the allocator's colour (create+destroy, comparable with the pair at the same size); a legend
// that also gives each allocator's tensor, churn and replay medians.
#include <string>

#include "bench/alloc/alloc_bench.h"

namespace sublet::bench {

std::string report_svg(const AllocBenchResult& result);

}  // namespace sublet::bench
