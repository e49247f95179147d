#pragma once
// Checks a differentiable function's backward against central finite differences, in float64.
//
//   double err = gradcheck([](const std::vector<Tensor>& x) { return x[0].matmul(x[1]).relu(); },
//                          {randn({3, 4}, gen, DType::Float64), randn({4, 5}, gen, DType::Float64)});
//   EXPECT_LE(err, 1e-6);
//
// The scalar compared is sum(fn(inputs) * w) with w random (seeded), so every output element and
// every gradient path counts. Checked inputs: those with requires_grad set, or, when none is
// set, every float64 input (int64 inputs such as labels pass through). Checked inputs must be
// float64. Error per element: |analytic - numeric| / max(1, |analytic|, |numeric|), i.e.
// relative for large gradients and absolute for small ones. CPU tensors only. A NaN or
// infinite gradient (analytic or numeric) makes max_error NaN, which fails every `<=` check.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace sublet {

struct GradcheckOptions {
  double eps = 1e-6;
  std::uint64_t seed = 1234;  // for the output weights w
};

struct GradcheckResult {
  double max_error = 0.0;
  std::string worst;  // "input 1, element 5: analytic 0.25, numeric 0.2500001"
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck_report(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                                 GradcheckOptions options = {});
// The max error of gradcheck_report.
double gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace sublet
