// linear: the matmul with the transposed weight (a view: cuBLAS reads it transposed in place)
// and a broadcast bias add, each its own node. On CUDA, with a bias, one fused node instead:
// the bias goes into the GEMM's epilogue (ops/linear_bias.h) and backward is the same matmuls
// and column sum the two nodes would run. Under autocast the node's inputs are the float32 weight
// and bias themselves, so their gradients come out of the GEMM in float32
// (runtime/nn/linear_parameter_grads.h).
#include "ops/linear_bias.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"
#include "runtime/nn/linear_parameter_grads.h"

namespace sublet::nn::functional {
namespace {

using autograd::TensorList;

// The fused forward and its node, or an undefined tensor where it does not apply (not CUDA, mixed
// devices or dtypes, no kernel, or the kernel declined the shape): the caller then takes the
// two-node way, which also raises the errors for mismatched operands.
Tensor linear_with_bias_epilogue(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // Under autocast all three are computed in the 16-bit type (the leaf weight and bias copies from
  // the cast cache).
  const Device device = input.device();
  if (!device.is_cuda() || weight.device() != device || bias.device() != device) return Tensor();
  const Tensor x = amp::to_lower(input);
  const nn::detail::FusedParameter wp = nn::detail::fused_parameter(weight), bp = nn::detail::fused_parameter(bias);
  const Tensor& w = wp.data;
  const Tensor& b = bp.data;
  if (w.dtype() != x.dtype() || b.dtype() != x.dtype() || !ops::has_linear_bias(device, x.dtype())) return Tensor();
  const std::int64_t k = w.size(1), n = w.size(0);
  if (k == 0 || x.numel() == 0) return Tensor();
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 1);
  out_sizes.push_back(n);
  Tensor out, x2;
  {
    NoGradGuard no_grad;  // layout copies are internal: the node below covers the whole op
    x2 = x.reshape({-1, k}).contiguous();
    const Tensor wc = w.contiguous(), bc = b.contiguous();
    out = Tensor::empty(out_sizes, x.options());
    const ops::LinearBiasGeometry g{x2.size(0), k, n};
    if (!ops::linear_bias(sublet::detail::context_for(out), x.dtype(), g, out.data_ptr(), x2.data_ptr(), wc.data_ptr(),
                          bc.data_ptr())) {
      return Tensor();
    }
  }
  const Tensor& w_in = wp.input;
  const Tensor& b_in = bp.input;
  if (autograd::any_requires_grad({x, w_in, b_in})) {
    const bool need_x = x.requires_grad(), need_w = w_in.requires_grad(), need_b = b_in.requires_grad();
    autograd::record("linear", {x, w_in, b_in}, {out},
                     [saved_x = need_w ? autograd::save(x2) : Tensor(), saved_w = need_x ? autograd::save(w) : Tensor(),
                      need_w, need_b, w_dtype = w_in.dtype(), b_dtype = b_in.dtype(), dtype = x.dtype(),
                      n](const TensorList& grads) {
                       AutocastGuard no_autocast(DType::BFloat16, false);  // the products in g's dtype, as the matmul node
                       const Tensor g = grads[0].to(dtype);
                       Tensor gx;
                       // What the matmul node computes for input @ weight.t(): dX = dY W and the
                       // weight's gradient dY^T X, row-major like the weight (one product over all
                       // rows), in float32 for a float32 weight.
                       if (saved_w.defined()) gx = g.matmul(saved_w);
                       if (!need_w && !need_b) return TensorList{gx, Tensor(), Tensor()};
                       const nn::detail::LinearParameterGrads p = nn::detail::linear_parameter_grads(
                           g.reshape({-1, n}).contiguous(), saved_x, need_w, w_dtype, need_b, b_dtype);
                       return TensorList{gx, p.weight, p.bias};
                     });
  }
  return out;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const char* op = "linear";
  sublet::detail::check_defined(op, input);
  sublet::detail::check_defined(op, weight);
  nn::detail::check_rank(op, "weight", weight, 2, "(out_features, in_features)");
  if (input.dim() < 1 || input.size(-1) != weight.size(1)) {
    throw ShapeError("linear: input of shape " + shape_str(input.sizes()) + " does not end in in_features = " +
                     std::to_string(weight.size(1)) + " (weight " + shape_str(weight.sizes()) + ")");
  }
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0))) {
    throw ShapeError("linear: bias must be [" + std::to_string(weight.size(0)) + "], got " + shape_str(bias.sizes()));
  }
  if (bias.defined()) {
    Tensor fused = linear_with_bias_epilogue(input, weight, bias);
    if (fused.defined()) return fused;
  }
  // Under autocast the leaf weight is cast before the transpose (a view would miss the cast
  // cache), and the bias with it, so the output stays in the 16-bit type as torch's F.linear.
  Tensor out = input.matmul(amp::to_lower(weight).t());
  return bias.defined() ? out + amp::to_lower(bias) : out;
}

}  // namespace sublet::nn::functional
