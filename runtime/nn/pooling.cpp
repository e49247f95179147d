#include "runtime/nn/pooling.h"

#include <string>

#include "core/errors.h"

namespace sublet::nn {

// Max and average pooling check their options in the functional call, which knows the input;
// the adaptive output size can be checked at once.
AdaptiveAvgPool2d::AdaptiveAvgPool2d(const AdaptiveAvgPool2dOptions& options)
    : Module("AdaptiveAvgPool2d"), options_(options) {
  if (options.output_size().h <= 0 || options.output_size().w <= 0) {
    throw ValueError("AdaptiveAvgPool2d: output_size must be positive, got (" +
                     std::to_string(options.output_size().h) + ", " + std::to_string(options.output_size().w) + ")");
  }
}

}  // namespace sublet::nn
