#pragma once
// How the CUDA conv2d picks cuDNN algorithms; the CPU path ignores these.
//  - benchmark: time every algorithm on the first call of each shape (cudnnFind*Ex, with a
//    workspace from the caching allocator) instead of trusting the heuristics, as PyTorch's
//    torch.backends.cudnn.benchmark = True.
//  - allow_tf32: let float32 convolutions run on tensor cores with TF32 inputs (10-bit
//    mantissa), as PyTorch's default torch.backends.cudnn.allow_tf32 = True. Off by default here
//    so that GPU results stay within float32 rounding of the CPU's.
//  - benchmark_limit: with benchmark, how many of cuDNN's engine configurations to time per
//    shape (0 = all), as torch.backends.cudnn.benchmark_limit (default 10 there and here).
// The diagnostic TuningOptions::log_conv_plans (core/tuning.h) prints, for each new shape, the
// engines considered and their times to stderr.
// Set these before the first convolution of a shape: choices are cached per shape and setting.
namespace sublet::ops {

struct ConvAlgorithmSettings {
  bool benchmark = false;
  bool allow_tf32 = false;
  int benchmark_limit = 10;
};

ConvAlgorithmSettings conv_algorithm_settings();
void set_conv_algorithm_settings(const ConvAlgorithmSettings& settings);

}  // namespace sublet::ops
