#include "runtime/nn/dropout.h"

#include <string>

#include "core/errors.h"
#include "runtime/nn/functional.h"

namespace sublet::nn {

Dropout::Dropout(const DropoutOptions& options, Generator& generator)
    : Module("Dropout"), options_(options), generator_(&generator) {
  if (!(options.p() >= 0 && options.p() <= 1)) {
    throw ValueError("Dropout: p must be in [0, 1], got " + std::to_string(options.p()));
  }
}

Tensor Dropout::forward(const Tensor& input) {
  return functional::dropout(input, options_.p(), is_training(), *generator_);
}

}  // namespace sublet::nn
