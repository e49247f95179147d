#pragma once
// A dependency-free SVG of the pair rows: median ns per pair (log y) against request size
// (log x), one polyline per allocator, with a legend that also gives each allocator's churn and
// replay medians (they have no size to sit at).
#include <string>

#include "bench/alloc/alloc_bench.h"

namespace sublet::bench {

std::string report_svg(const AllocBenchResult& result);

}  // namespace sublet::bench
