// linear_gelu_linear: c_fc -> tanh GELU -> c_proj. The fused node keeps what the three nodes
// would (the input, c_fc's weight, the pre-activation, the hidden activation, c_proj's weight),
// and its backward runs over the [rows, hidden] tensors once each way:
//   forward:  one GEMM writes the pre-activation and the hidden activation (GELU_AUX_BIAS);
//             c_proj is the linear with its bias in the epilogue.
//   backward: c_proj's weight and bias gradients from the hidden activation; one GEMM gives the
//             pre-activation's gradient and fc_bias's gradient (DGELU_BGRAD), never the hidden
//             activation's; then c_fc's weight and input gradients from it.
// Under autocast the node's inputs are the float32 weights and biases themselves: their gradients
// come out of the GEMMs in float32 (runtime/nn/linear_parameter_grads.h); fc_bias's is cast from
// the epilogue's 16-bit sums.
#include "core/tuning.h"
#include "ops/gelu.h"
#include "ops/linear_gelu.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"
#include "runtime/nn/linear_parameter_grads.h"

namespace sublet::nn::functional {
namespace {

using autograd::TensorList;

bool all_defined(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) return false;
  }
  return true;
}

// Whether the operands chain as input [..., in] -> [hidden, in] -> [out, hidden] with both
// biases; anything else goes to the three ops, which raise the errors.
bool shapes_chain(const Tensor& input, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
  return input.dim() >= 1 && w1.dim() == 2 && b1.dim() == 1 && w2.dim() == 2 && b2.dim() == 1 &&
         input.size(-1) == w1.size(1) && b1.size(0) == w1.size(0) && w2.size(1) == w1.size(0) &&
         b2.size(0) == w2.size(0);
}

}  // namespace

Tensor linear_gelu_linear_fused(const Tensor& input, const Tensor& fc_weight, const Tensor& fc_bias,
                                const Tensor& proj_weight, const Tensor& proj_bias) {
  if (!tuning().gelu_epilogue || !all_defined({input, fc_weight, fc_bias, proj_weight, proj_bias})) return Tensor();
  const Device device = input.device();
  if (!device.is_cuda()) return Tensor();
  for (const Tensor& t : {fc_weight, fc_bias, proj_weight, proj_bias}) {
    if (t.device() != device) return Tensor();
  }
  if (!shapes_chain(input, fc_weight, fc_bias, proj_weight, proj_bias)) return Tensor();
  // Under autocast all five are computed in the 16-bit type (the leaf weights' and biases' copies
  // from the cast cache).
  const Tensor x = amp::to_lower(input);
  const nn::detail::FusedParameter w1p = nn::detail::fused_parameter(fc_weight), b1p = nn::detail::fused_parameter(fc_bias);
  const nn::detail::FusedParameter w2p = nn::detail::fused_parameter(proj_weight),
                                   b2p = nn::detail::fused_parameter(proj_bias);
  const Tensor &w1 = w1p.data, &b1 = b1p.data, &w2 = w2p.data, &b2 = b2p.data;
  const DType dtype = x.dtype();
  for (const Tensor& t : {w1, b1, w2, b2}) {
    if (t.dtype() != dtype) return Tensor();
  }
  if (!ops::has_linear_gelu(device, dtype) || x.numel() == 0) return Tensor();
  const std::int64_t k = w1.size(1), n = w1.size(0), out_features = w2.size(0);

  Tensor x2, w1c, w2c, pre, hidden, out;
  {
    NoGradGuard no_grad;  // layout copies and c_proj are internal: the node below covers the whole op
    x2 = x.reshape({-1, k}).contiguous();
    w1c = w1.contiguous();
    w2c = w2.contiguous();
    const std::int64_t m = x2.size(0);
    pre = Tensor::empty({m, n}, x.options());
    hidden = Tensor::empty({m, n}, x.options());
    if (!ops::linear_gelu_forward(sublet::detail::context_for(x2), dtype, {m, k, n}, hidden.data_ptr(),
                                  pre.data_ptr(), x2.data_ptr(), w1c.data_ptr(), b1.contiguous().data_ptr())) {
      return Tensor();
    }
    Shape out_sizes(x.sizes().begin(), x.sizes().end() - 1);
    out_sizes.push_back(out_features);
    out = linear(hidden, w2c, b2).reshape(out_sizes);
  }
  const TensorList inputs{x, w1p.input, b1p.input, w2p.input, b2p.input};
  if (autograd::any_requires_grad(inputs)) {
    const bool need_x = x.requires_grad(), need_w1 = w1p.input.requires_grad(), need_b1 = b1p.input.requires_grad();
    const bool need_w2 = w2p.input.requires_grad(), need_b2 = b2p.input.requires_grad();
    const bool need_pre = need_x || need_w1 || need_b1;
    // The gradients' dtypes: float32 for the float32 parameters the node takes as they are.
    const DType w1_dtype = w1p.input.dtype(), b1_dtype = b1p.input.dtype(), w2_dtype = w2p.input.dtype(),
                b2_dtype = b2p.input.dtype();
    autograd::record(
        "linear_gelu_linear", inputs, {out},
        [saved_x = need_w1 ? autograd::save(x2) : Tensor(), saved_w1 = need_x ? autograd::save(w1c) : Tensor(),
         saved_pre = need_pre ? autograd::save(pre) : Tensor(),
         saved_hidden = need_w2 ? autograd::save(hidden) : Tensor(),
         saved_w2 = need_pre ? autograd::save(w2c) : Tensor(), input_sizes = x.sizes(), dtype, n, out_features, need_x,
         need_w1, need_b1, need_w2, need_b2, need_pre, w1_dtype, b1_dtype, w2_dtype,
         b2_dtype](const TensorList& grads) {
          AutocastGuard no_autocast(DType::BFloat16, false);  // the products in the forward's dtype
          const Tensor g = grads[0].to(dtype).reshape({-1, out_features}).contiguous();
          const std::int64_t m = g.size(0);
          Tensor gx, gw1, gb1, gw2, gb2;
          // A weight's gradient is dY^T X, row-major like the weight (one product over all rows).
          const nn::detail::LinearParameterGrads proj =
              nn::detail::linear_parameter_grads(g, saved_hidden, need_w2, w2_dtype, need_b2, b2_dtype);
          gw2 = proj.weight;
          gb2 = proj.bias;
          if (need_pre) {
            Tensor grad_pre = Tensor::empty({m, n}, g.options());
            Tensor grad_b1 = Tensor::empty({n}, g.options());
            const ops::Context ctx = sublet::detail::context_for(g);
            // The switch is read again here, so that a test can send a fused forward's backward the unfused way.
            if (!tuning().gelu_epilogue ||
                !ops::linear_gelu_backward(ctx, dtype, {m, out_features, n}, grad_pre.data_ptr(), grad_b1.data_ptr(),
                                           g.data_ptr(), saved_w2.data_ptr(), saved_pre.data_ptr())) {
              const Tensor grad_hidden = g.matmul(saved_w2).contiguous();
              ops::gelu_backward(ctx, dtype, grad_hidden.numel(), GeluApproximate::Tanh, grad_hidden.data_ptr(),
                                 saved_pre.data_ptr(), grad_pre.data_ptr());
              grad_b1 = sublet::detail::sum_to(grad_pre, {n});
            }
            if (need_b1) gb1 = grad_b1.to(b1_dtype);
            if (need_w1) {
              gw1 = nn::detail::linear_parameter_grads(grad_pre, saved_x, true, w1_dtype, false, b1_dtype).weight;
            }
            if (need_x) gx = grad_pre.matmul(saved_w1).reshape(input_sizes);
          }
          return TensorList{gx, gw1, gb1, gw2, gb2};
        });
  }
  return out;
}

Tensor linear_gelu_linear(const Tensor& input, const Tensor& fc_weight, const Tensor& fc_bias,
                          const Tensor& proj_weight, const Tensor& proj_bias) {
  Tensor fused = linear_gelu_linear_fused(input, fc_weight, fc_bias, proj_weight, proj_bias);
  if (fused.defined()) return fused;
  return linear(gelu(linear(input, fc_weight, fc_bias), GeluApproximate::Tanh), proj_weight, proj_bias);
}

}  // namespace sublet::nn::functional
