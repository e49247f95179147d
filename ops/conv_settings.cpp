#include "ops/conv_settings.h"

#include <atomic>

namespace sublet::ops {
namespace {
std::atomic<bool> benchmark{false};
std::atomic<bool> allow_tf32{false};
}  // namespace

ConvAlgorithmSettings conv_algorithm_settings() { return {benchmark.load(), allow_tf32.load()}; }

void set_conv_algorithm_settings(const ConvAlgorithmSettings& settings) {
  benchmark = settings.benchmark;
  allow_tf32 = settings.allow_tf32;
}

}  // namespace sublet::ops
