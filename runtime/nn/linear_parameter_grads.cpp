#include "runtime/nn/linear_parameter_grads.h"

#include "core/tuning.h"
#include "ops/linear_bias.h"
#include "runtime/autocast.h"
#include "runtime/kernel_args.h"

namespace sublet::nn::detail {

FusedParameter fused_parameter(const Tensor& t) {
  if (tuning().float32_weight_gradients && t.defined() && t.dtype() == DType::Float32 && amp::casts_to_lower({t})) {
    return FusedParameter{t, amp::lower_data(t)};
  }
  const Tensor lowered = amp::to_lower(t);
  return FusedParameter{lowered, lowered};
}

LinearParameterGrads linear_parameter_grads(const Tensor& grad_out, const Tensor& x, bool want_weight,
                                            DType weight_dtype, bool want_bias, DType bias_dtype) {
  const DType dtype = grad_out.dtype();
  const std::int64_t n = grad_out.size(1);
  LinearParameterGrads grads;
  const bool float32_gemm = want_weight && weight_dtype == DType::Float32 && dtype != DType::Float32 &&
                            ops::has_linear_weight_grad_float32(grad_out.device(), dtype);
  if (float32_gemm) {
    const std::int64_t m = grad_out.size(0), k = x.size(1);
    const TensorOptions float32 = grad_out.options().dtype(DType::Float32);
    Tensor weight = Tensor::empty({n, k}, float32);
    const bool with_bias = want_bias && bias_dtype == DType::Float32;
    Tensor bias = with_bias ? Tensor::empty({n}, float32) : Tensor();
    const ops::Context ctx = sublet::detail::context_for(grad_out);
    const auto run = [&](Tensor* bias_out) {
      return ops::linear_weight_grad_float32(ctx, dtype, {m, k, n}, static_cast<float*>(weight.data_ptr()),
                                             bias_out ? static_cast<float*>(bias_out->data_ptr()) : nullptr,
                                             grad_out.data_ptr(), x.data_ptr());
    };
    if (with_bias && run(&bias)) {
      grads.weight = weight;
      grads.bias = bias;
    } else if (run(nullptr)) {  // the bias-gradient epilogue declined: the GEMM alone
      grads.weight = weight;
    }
  }
  if (want_weight && !grads.weight.defined()) grads.weight = grad_out.t().matmul(x).to(weight_dtype);
  if (want_bias && !grads.bias.defined()) grads.bias = sublet::detail::sum_to(grad_out, {n}).to(bias_dtype);
  return grads;
}

}  // namespace sublet::nn::detail
