#include "runtime/factories.h"

#include <cmath>

#include "core/errors.h"
#include "ops/random.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/kernel_args.h"

namespace sublet {

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

Tensor empty(Shape sizes, TensorOptions options) { return Tensor::empty(std::move(sizes), options); }

Tensor full(Shape sizes, double value, TensorOptions options) {
  Tensor t = Tensor::empty(std::move(sizes), options.requires_grad(false));
  t.fill_(value);
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

Tensor zeros(Shape sizes, TensorOptions options) { return full(std::move(sizes), 0.0, options); }
Tensor ones(Shape sizes, TensorOptions options) { return full(std::move(sizes), 1.0, options); }
Tensor empty_like(const Tensor& like) { return detail::empty_in_layout_of(like, like.options()); }
Tensor zeros_like(const Tensor& like) { return empty_like(like).fill_(0.0); }
Tensor ones_like(const Tensor& like) { return empty_like(like).fill_(1.0); }

Tensor arange(double end, TensorOptions options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  if (step == 0.0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    throw ValueError("arange: need finite start, end and a non-zero step, got start " + std::to_string(start) +
                     ", end " + std::to_string(end) + ", step " + std::to_string(step));
  }
  const auto count = static_cast<std::int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  // Built on the host in double, then cast: the single upload goes through ops::copy_bytes.
  std::vector<double> values(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) values[i] = start + static_cast<double>(i) * step;
  return Tensor::from_vector(values, {count}, options.dtype(options.dtype()));
}

namespace {
Tensor random_tensor(const Shape& sizes, TensorOptions options, const char* op,
                     void (*fill)(Tensor&, Generator&, double, double), Generator& generator, double p0, double p1) {
  if (options.dtype() == DType::Int64) throw DTypeError(std::string(op) + ": expected float32 or float64, got int64");
  Tensor t = Tensor::empty(sizes, options.requires_grad(false));
  fill(t, generator, p0, p1);
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}
void fill_uniform(Tensor& t, Generator& g, double low, double high) { t.uniform_(low, high, g); }
void fill_normal(Tensor& t, Generator& g, double mean, double stddev) { t.normal_(mean, stddev, g); }
}  // namespace

Tensor rand(const Shape& sizes, Generator& generator, TensorOptions options) {
  return random_tensor(sizes, options, "rand", fill_uniform, generator, 0.0, 1.0);
}
Tensor randn(const Shape& sizes, Generator& generator, TensorOptions options) {
  return random_tensor(sizes, options, "randn", fill_normal, generator, 0.0, 1.0);
}
Tensor uniform(const Shape& sizes, double low, double high, Generator& generator, TensorOptions options) {
  return random_tensor(sizes, options, "uniform", fill_uniform, generator, low, high);
}
Tensor normal(const Shape& sizes, double mean, double stddev, Generator& generator, TensorOptions options) {
  return random_tensor(sizes, options, "normal", fill_normal, generator, mean, stddev);
}

// Random in-place fills draw into a contiguous buffer, so the values for a given seed do not
// depend on the destination's strides.
Tensor& Tensor::uniform_(double low, double high, Generator& generator) {
  detail::begin_inplace("uniform_", *this);
  Tensor target = is_contiguous() ? *this : Tensor::empty(sizes(), options());
  ops::fill_uniform(detail::context_for(target), dtype(), target.data_ptr(), numel(), low, high, generator.engine());
  if (!target.is_same(*this)) copy_(target);
  return *this;
}

Tensor& Tensor::normal_(double mean, double stddev, Generator& generator) {
  detail::begin_inplace("normal_", *this);
  Tensor target = is_contiguous() ? *this : Tensor::empty(sizes(), options());
  ops::fill_normal(detail::context_for(target), dtype(), target.data_ptr(), numel(), mean, stddev, generator.engine());
  if (!target.is_same(*this)) copy_(target);
  return *this;
}

}  // namespace sublet
