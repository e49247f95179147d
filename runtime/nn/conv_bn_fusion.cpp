#include "runtime/nn/conv_bn_fusion.h"

#include "core/tuning.h"

namespace sublet::nn {

namespace {

functional::Conv2dFuncOptions func_options(const Conv2d& conv) {
  const Conv2dOptions& o = conv.options();
  return functional::Conv2dFuncOptions().stride(o.stride()).padding(o.padding()).dilation(o.dilation()).groups(o.groups());
}

}  // namespace

bool conv_bn_fusion_applies(const Tensor& input, std::initializer_list<const Conv2d*> convs,
                            std::initializer_list<const BatchNorm2d*> norms) {
  const ConvBnFusion mode = tuning().conv_bn_fusion;
  if (mode == ConvBnFusion::Off || (mode == ConvBnFusion::Auto && !input.device().is_cuda())) return false;
  const DType dtype = input.dtype();
  if (dtype != DType::Float32 && dtype != DType::BFloat16 && dtype != DType::Float16) return false;
  for (const BatchNorm2d* bn : norms) {
    const BatchNorm2dOptions& o = bn->options();
    if (!bn->is_training() || !o.affine() || !o.track_running_stats() || !o.momentum().has_value() ||
        bn->weight.dtype() != DType::Float32) {
      return false;
    }
  }
  for (const Conv2d* conv : convs) {
    if (conv->bias.defined()) return false;
  }
  return true;
}

functional::Conv2dSums conv_with_sums(const Conv2d& conv, const Tensor& input) {
  return functional::conv2d_with_sums(input, conv.weight, func_options(conv));
}

functional::Conv2dSums bn_relu_conv(BatchNorm2d& bn, const functional::Conv2dSums& input, const Conv2d& conv,
                                    bool want_sums) {
  const BatchNorm2dOptions& o = bn.options();
  return functional::batch_norm_relu_conv2d(input, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                            o.momentum().value_or(0.1), o.eps(), bn.num_batches_tracked, conv.weight,
                                            func_options(conv), want_sums);
}

}  // namespace sublet::nn
