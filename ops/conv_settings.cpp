#include "ops/conv_settings.h"

#include <atomic>

namespace sublet::ops {
namespace {
std::atomic<bool> benchmark{false};
std::atomic<bool> allow_tf32{false};
std::atomic<int> benchmark_limit{10};
}  // namespace

ConvAlgorithmSettings conv_algorithm_settings() {
  return {benchmark.load(), allow_tf32.load(), benchmark_limit.load()};
}

void set_conv_algorithm_settings(const ConvAlgorithmSettings& settings) {
  benchmark = settings.benchmark;
  allow_tf32 = settings.allow_tf32;
  benchmark_limit = settings.benchmark_limit;
}

}  // namespace sublet::ops
