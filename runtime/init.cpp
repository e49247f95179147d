#include "runtime/init.h"

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"

namespace sublet::init {
namespace {
std::int64_t receptive_field(const Tensor& w) {
  if (w.dim() < 2) {
    throw ShapeError("kaiming init: expected a weight with at least 2 dimensions, got shape " + shape_str(w.sizes()));
  }
  std::int64_t field = 1;
  for (std::int64_t d = 2; d < w.dim(); ++d) field *= w.sizes()[d];
  return field;
}
double fan(const Tensor& w, FanMode mode) {
  return static_cast<double>(mode == FanMode::FanIn ? fan_in(w) : fan_out(w));
}
}  // namespace

std::int64_t fan_in(const Tensor& weight) { return weight.sizes()[1] * receptive_field(weight); }
std::int64_t fan_out(const Tensor& weight) { return weight.sizes()[0] * receptive_field(weight); }

Tensor& kaiming_uniform_(Tensor& weight, Generator& generator, double gain, FanMode mode) {
  const double bound = gain * std::sqrt(3.0 / fan(weight, mode));
  NoGradGuard no_grad;
  return weight.uniform_(-bound, bound, generator);
}

Tensor& kaiming_normal_(Tensor& weight, Generator& generator, double gain, FanMode mode) {
  const double stddev = gain / std::sqrt(fan(weight, mode));
  NoGradGuard no_grad;
  return weight.normal_(0.0, stddev, generator);
}

}  // namespace sublet::init
