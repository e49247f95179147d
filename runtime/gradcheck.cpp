#include "runtime/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet {

GradcheckResult gradcheck_report(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  bool any_flagged = false;
  for (const auto& x : inputs) any_flagged = any_flagged || (x.defined() && x.requires_grad());
  std::vector<bool> checked(inputs.size(), false);
  std::vector<Tensor> leaves(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    checked[i] = x.defined() && (any_flagged ? x.requires_grad() : x.dtype() == DType::Float64);
    if (checked[i] && (x.dtype() != DType::Float64 || !x.device().is_cpu())) {
      throw DTypeError("gradcheck: checked input " + std::to_string(i) + " must be a float64 CPU tensor, got " +
                       x.to_string());
    }
    leaves[i] = checked[i] ? x.detach().clone().requires_grad_(true) : x;
  }

  Generator generator(options.seed);
  Tensor output = fn(leaves);
  if (!output.requires_grad()) throw Error("gradcheck: the output does not depend on any checked input");
  const Tensor weights = randn(output.sizes(), generator, output.options());
  (output * weights).sum().backward();
  output = Tensor();

  auto objective = [&] {
    NoGradGuard no_grad;
    return (fn(leaves) * weights).sum().item<double>();
  };

  GradcheckResult result;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!checked[i]) continue;
    const Tensor grad = leaves[i].grad();
    const std::vector<double> analytic = grad.defined() ? grad.to_vector<double>()
                                                        : std::vector<double>(leaves[i].numel(), 0.0);
    double* data = leaves[i].data<double>();
    for (std::int64_t j = 0; j < leaves[i].numel(); ++j) {
      const double original = data[j];
      data[j] = original + options.eps;
      const double plus = objective();
      data[j] = original - options.eps;
      const double minus = objective();
      data[j] = original;
      const double numeric = (plus - minus) / (2.0 * options.eps);
      const double error = std::abs(analytic[j] - numeric) /
                           std::max({1.0, std::abs(analytic[j]), std::abs(numeric)});
      // Written so that a NaN error (a NaN or infinite gradient on either side) is the worst
      // one and stays: `error > max` alone is false for NaN and would hide it.
      const bool worse = !(error <= result.max_error) || result.worst.empty();
      if (worse && !std::isnan(result.max_error)) {
        result.max_error = error;
        result.worst = "input " + std::to_string(i) + ", element " + std::to_string(j) + ": analytic " +
                       std::to_string(analytic[j]) + ", numeric " + std::to_string(numeric);
      }
    }
  }
  return result;
}

double gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  return gradcheck_report(fn, inputs, options).max_error;
}

}  // namespace sublet
