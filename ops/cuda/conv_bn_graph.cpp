#include "ops/cuda/conv_bn_graph.h"

#include <array>
#include <string>
#include <utility>

#include "core/errors.h"
#include "ops/cuda/conv2d_graph.h"
#include "ops/cuda/conv2d_layout.h"

namespace sublet::ops::cuda {

const char* conv_bn_pattern_name(ConvBnPattern pattern) {
  switch (pattern) {
    case ConvBnPattern::Forward: return "fprop";
    case ConvBnPattern::ScaleBiasReluForward: return "sbr+fprop";
    case ConvBnPattern::ForwardGenStats: return "fprop+genstats";
    case ConvBnPattern::ScaleBiasReluForwardGenStats: return "sbr+fprop+genstats";
    case ConvBnPattern::BackwardData: return "dgrad";
    case ConvBnPattern::BackwardDataDrelu: return "dgrad+drelu";
    case ConvBnPattern::BackwardDataScaleBiasDrelu: return "dgrad+sb+drelu";
    case ConvBnPattern::BackwardDataDreluBnBwdWeights: return "dgrad+drelu+bnbwdw";
    case ConvBnPattern::BackwardFilter: return "wgrad";
    case ConvBnPattern::ScaleBiasReluBackwardFilter: return "sbr+wgrad";
  }
  return "?";
}

ConvBnPattern conv_bn_plain_pattern(ConvBnPattern pattern) {
  switch (pattern) {
    case ConvBnPattern::Forward:
    case ConvBnPattern::ScaleBiasReluForward:
    case ConvBnPattern::ForwardGenStats:
    case ConvBnPattern::ScaleBiasReluForwardGenStats:
      return ConvBnPattern::Forward;
    case ConvBnPattern::BackwardData:
    case ConvBnPattern::BackwardDataDrelu:
    case ConvBnPattern::BackwardDataScaleBiasDrelu:
    case ConvBnPattern::BackwardDataDreluBnBwdWeights:
      return ConvBnPattern::BackwardData;
    case ConvBnPattern::BackwardFilter:
    case ConvBnPattern::ScaleBiasReluBackwardFilter:
      break;
  }
  return ConvBnPattern::BackwardFilter;
}

namespace {

using Dims = std::array<std::int64_t, 4>;

// Makes the graph's tensors: bound ones (recorded with their sizes) and float32 virtual ones.
class TensorMaker {
 public:
  TensorMaker(const Conv2dShape& s, DType dtype, const ConvBnGraphOptions& options)
      : s_(s), dtype_(dtype), options_(options) {}

  Dims x_dims() const { return {s_.batch, s_.in_channels, s_.in_height, s_.in_width}; }
  Dims y_dims() const { return {s_.batch, s_.out_channels, s_.out_height(), s_.out_width()}; }
  Dims w_dims() const { return {s_.out_channels, s_.in_channels / s_.groups, s_.kernel_h, s_.kernel_w}; }
  Dims x_channel_dims() const { return {1, s_.in_channels, 1, 1}; }
  Dims y_channel_dims() const { return {1, s_.out_channels, 1, 1}; }

  // An activation or weight in the call's dtype.
  BackendDescriptor data(std::int64_t uid, const Dims& dims, bool written) {
    return bound(uid, dims, conv_data_type(dtype_), element_size(dtype_), written);
  }
  // A per-channel float32 vector.
  BackendDescriptor stat(std::int64_t uid, const Dims& dims, bool written) {
    return bound(uid, dims, CUDNN_DATA_FLOAT, 4, written);
  }
  // The prologue's per-channel scale or bias (float32 or the call's dtype).
  BackendDescriptor scale_bias(std::int64_t uid, const Dims& dims) {
    return options_.float_scale_bias ? stat(uid, dims, false) : data(uid, dims, false);
  }
  BackendDescriptor intermediate(const Dims& dims) {
    return backend_tensor(next_virtual_++, CUDNN_DATA_FLOAT, dims, conv_strides(dims, s_.format), options_.alignment,
                          true);
  }

  std::vector<ConvBnBoundTensor> take_bound() { return std::move(bound_); }

 private:
  BackendDescriptor bound(std::int64_t uid, const Dims& dims, cudnnDataType_t type, std::size_t bytes, bool written) {
    bound_.push_back({uid, dims[0] * dims[1] * dims[2] * dims[3], bytes, written});
    return backend_tensor(uid, type, dims, conv_strides(dims, s_.format), options_.alignment);
  }

  const Conv2dShape& s_;
  DType dtype_;
  ConvBnGraphOptions options_;
  std::int64_t next_virtual_ = 1000;
  std::vector<ConvBnBoundTensor> bound_;
};

void set_alpha_beta(BackendDescriptor& op, cudnnBackendAttributeName_t alpha_name,
                    cudnnBackendAttributeName_t beta_name) {
  const float alpha = 1.0f, beta = 0.0f;
  op.set(alpha_name, CUDNN_TYPE_FLOAT, &alpha, 1);
  op.set(beta_name, CUDNN_TYPE_FLOAT, &beta, 1);
}

BackendDescriptor forward_operation(const Conv2dShape& s, DType dtype, const BackendDescriptor& x,
                                    const BackendDescriptor& w, const BackendDescriptor& y) {
  const BackendDescriptor conv = convolution_descriptor(s, dtype);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
  set_alpha_beta(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA);
  op.finalize();
  return op;
}

BackendDescriptor backward_data_operation(const Conv2dShape& s, DType dtype, const BackendDescriptor& dy,
                                          const BackendDescriptor& w, const BackendDescriptor& dx) {
  const BackendDescriptor conv = convolution_descriptor(s, dtype);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, dy);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, w);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, dx);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, conv);
  set_alpha_beta(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA);
  op.finalize();
  return op;
}

BackendDescriptor backward_filter_operation(const Conv2dShape& s, DType dtype, const BackendDescriptor& x,
                                            const BackendDescriptor& dy, const BackendDescriptor& dw) {
  const BackendDescriptor conv = convolution_descriptor(s, dtype);
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, dy);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, dw);
  op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, conv);
  set_alpha_beta(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                 CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA);
  op.finalize();
  return op;
}

BackendDescriptor gen_stats_operation(const BackendDescriptor& y, const BackendDescriptor& sum,
                                      const BackendDescriptor& sqsum) {
  const cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, &mode, 1);
  op.set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math, 1);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum);
  op.set_descriptor(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sqsum);
  op.finalize();
  return op;
}

struct BnBackwardWeightsTensors {
  const BackendDescriptor *x, *mean, *inv_std, *scale, *dy, *dscale, *dbias, *eq_dy_scale, *eq_x_scale, *eq_bias;
};

BackendDescriptor bn_backward_weights_operation(const BnBackwardWeightsTensors& t) {
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  BackendDescriptor op(CUDNN_BACKEND_OPERATION_BN_BWD_WEIGHTS_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math, 1);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_X_DESC, *t.x);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_MEAN_DESC, *t.mean);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_INVSTD_DESC, *t.inv_std);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_BN_SCALE_DESC, *t.scale);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DY_DESC, *t.dy);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_SCALE_DESC, *t.dscale);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_DBN_BIAS_DESC, *t.dbias);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_DY_SCALE_DESC, *t.eq_dy_scale);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_X_SCALE_DESC, *t.eq_x_scale);
  op.set_descriptor(CUDNN_ATTR_OPERATION_BN_BWD_WEIGHTS_EQ_BIAS, *t.eq_bias);
  op.finalize();
  return op;
}

// relu(x * scale + bias) into a virtual tensor: the prologue of the fused forward and wgrad.
void scale_bias_relu(TensorMaker& t, std::vector<BackendDescriptor>& ops, const BackendDescriptor& x,
                     const BackendDescriptor& activated) {
  const BackendDescriptor scale = t.scale_bias(kConvBnScale, t.x_channel_dims());
  const BackendDescriptor bias = t.scale_bias(kConvBnBias, t.x_channel_dims());
  const BackendDescriptor scaled = t.intermediate(t.x_dims());
  const BackendDescriptor shifted = t.intermediate(t.x_dims());
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_MUL, x, &scale, scaled));
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_ADD, scaled, &bias, shifted));
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_RELU_FWD, shifted, nullptr, activated));
}

std::vector<BackendDescriptor> forward_operations(TensorMaker& t, const Conv2dShape& s, DType dtype, bool prologue,
                                                  bool gen_stats) {
  std::vector<BackendDescriptor> ops;
  const BackendDescriptor x = t.data(kConvBnX, t.x_dims(), false);
  const BackendDescriptor w = t.data(kConvBnW, t.w_dims(), false);
  const BackendDescriptor y = t.data(kConvBnY, t.y_dims(), true);
  if (prologue) {
    const BackendDescriptor activated = t.intermediate(t.x_dims());
    scale_bias_relu(t, ops, x, activated);
    ops.push_back(forward_operation(s, dtype, activated, w, y));
  } else {
    ops.push_back(forward_operation(s, dtype, x, w, y));
  }
  if (gen_stats) {
    const BackendDescriptor sum = t.stat(kConvBnSum, t.y_channel_dims(), true);
    const BackendDescriptor sqsum = t.stat(kConvBnSqSum, t.y_channel_dims(), true);
    ops.push_back(gen_stats_operation(y, sum, sqsum));
  }
  return ops;
}

std::vector<BackendDescriptor> backward_data_operations(TensorMaker& t, const Conv2dShape& s, DType dtype,
                                                        ConvBnPattern pattern) {
  std::vector<BackendDescriptor> ops;
  const BackendDescriptor dy = t.data(kConvBnDy, t.y_dims(), false);
  const BackendDescriptor w = t.data(kConvBnW, t.w_dims(), false);
  const BackendDescriptor dx = t.data(kConvBnDx, t.x_dims(), true);
  if (pattern == ConvBnPattern::BackwardData) {
    ops.push_back(backward_data_operation(s, dtype, dy, w, dx));
    return ops;
  }
  const BackendDescriptor dgrad = t.intermediate(t.x_dims());
  ops.push_back(backward_data_operation(s, dtype, dy, w, dgrad));
  if (pattern == ConvBnPattern::BackwardDataDrelu) {
    const BackendDescriptor relu_x = t.data(kConvBnReluX, t.x_dims(), false);
    ops.push_back(relu_backward_operation(dgrad, relu_x, dx));
    return ops;
  }
  const BackendDescriptor x = t.data(kConvBnX, t.x_dims(), false);
  const BackendDescriptor scale = t.scale_bias(kConvBnScale, t.x_channel_dims());
  const BackendDescriptor bias = t.scale_bias(kConvBnBias, t.x_channel_dims());
  const BackendDescriptor relu_input = t.intermediate(t.x_dims());
  if (pattern == ConvBnPattern::BackwardDataScaleBiasDrelu) {
    const BackendDescriptor scaled = t.intermediate(t.x_dims());
    ops.push_back(pointwise_operation(CUDNN_POINTWISE_MUL, x, &scale, scaled));
    ops.push_back(pointwise_operation(CUDNN_POINTWISE_ADD, scaled, &bias, relu_input));
    ops.push_back(relu_backward_operation(dgrad, relu_input, dx));
    return ops;
  }
  // BackwardDataDreluBnBwdWeights: the batch norm's output recomputed from its saved statistics.
  const BackendDescriptor mean = t.stat(kConvBnMean, t.x_channel_dims(), false);
  const BackendDescriptor inv_std = t.stat(kConvBnInvStd, t.x_channel_dims(), false);
  const BackendDescriptor centred = t.intermediate(t.x_dims());
  const BackendDescriptor normalised = t.intermediate(t.x_dims());
  const BackendDescriptor scaled = t.intermediate(t.x_dims());
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_ADD, x, &mean, centred, -1.0f));
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_MUL, centred, &inv_std, normalised));
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_MUL, normalised, &scale, scaled));
  ops.push_back(pointwise_operation(CUDNN_POINTWISE_ADD, scaled, &bias, relu_input));
  ops.push_back(relu_backward_operation(dgrad, relu_input, dx));
  const BackendDescriptor dscale = t.stat(kConvBnDScale, t.x_channel_dims(), true);
  const BackendDescriptor dbias = t.stat(kConvBnDBias, t.x_channel_dims(), true);
  const BackendDescriptor eq_dy_scale = t.stat(kConvBnEqDyScale, t.x_channel_dims(), true);
  const BackendDescriptor eq_x_scale = t.stat(kConvBnEqXScale, t.x_channel_dims(), true);
  const BackendDescriptor eq_bias = t.stat(kConvBnEqBias, t.x_channel_dims(), true);
  ops.push_back(bn_backward_weights_operation(
      {&x, &mean, &inv_std, &scale, &dx, &dscale, &dbias, &eq_dy_scale, &eq_x_scale, &eq_bias}));
  return ops;
}

std::vector<BackendDescriptor> backward_filter_operations(TensorMaker& t, const Conv2dShape& s, DType dtype,
                                                          bool prologue) {
  std::vector<BackendDescriptor> ops;
  const BackendDescriptor x = t.data(kConvBnX, t.x_dims(), false);
  const BackendDescriptor dy = t.data(kConvBnDy, t.y_dims(), false);
  const BackendDescriptor dw = t.data(kConvBnW, t.w_dims(), true);
  if (prologue) {
    const BackendDescriptor activated = t.intermediate(t.x_dims());
    scale_bias_relu(t, ops, x, activated);
    ops.push_back(backward_filter_operation(s, dtype, activated, dy, dw));
  } else {
    ops.push_back(backward_filter_operation(s, dtype, x, dy, dw));
  }
  return ops;
}

}  // namespace

ConvBnGraph build_conv_bn_graph(cudnnHandle_t handle, ConvBnPattern pattern, const Conv2dShape& shape, DType dtype,
                                const ConvBnGraphOptions& options) {
  if (dtype == DType::Float64 || !(dtype == DType::Float32 || conv_is_half(dtype))) {
    throw DTypeError(std::string("conv2d + batch norm (cuDNN graph): expected float32, bfloat16 or float16, got ") +
                     dtype_name(dtype));
  }
  TensorMaker tensors(shape, dtype, options);
  ConvBnGraph built;
  built.pattern = pattern;
  switch (pattern) {
    case ConvBnPattern::Forward:
    case ConvBnPattern::ScaleBiasReluForward:
    case ConvBnPattern::ForwardGenStats:
    case ConvBnPattern::ScaleBiasReluForwardGenStats:
      built.operations = forward_operations(
          tensors, shape, dtype,
          pattern == ConvBnPattern::ScaleBiasReluForward || pattern == ConvBnPattern::ScaleBiasReluForwardGenStats,
          pattern == ConvBnPattern::ForwardGenStats || pattern == ConvBnPattern::ScaleBiasReluForwardGenStats);
      break;
    case ConvBnPattern::BackwardData:
    case ConvBnPattern::BackwardDataDrelu:
    case ConvBnPattern::BackwardDataScaleBiasDrelu:
    case ConvBnPattern::BackwardDataDreluBnBwdWeights:
      built.operations = backward_data_operations(tensors, shape, dtype, pattern);
      break;
    case ConvBnPattern::BackwardFilter:
    case ConvBnPattern::ScaleBiasReluBackwardFilter:
      built.operations =
          backward_filter_operations(tensors, shape, dtype, pattern == ConvBnPattern::ScaleBiasReluBackwardFilter);
      break;
  }
  std::vector<const BackendDescriptor*> ops;
  for (const BackendDescriptor& op : built.operations) ops.push_back(&op);
  auto [graph, status] = operation_graph(handle, ops);
  built.graph = std::move(graph);
  built.status = status;
  built.bound = tensors.take_bound();
  return built;
}

}  // namespace sublet::ops::cuda
