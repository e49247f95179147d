#include "ops/cpu/batch_norm_relu_cpu.h"

#include <omp.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/cpu/batch_norm_cpu_detail.h"

namespace sublet::ops::cpu {

namespace {

// A scratch run for the masked gradient when the caller wants no grad_residual to hold it. Eigen's
// vectorised sum starts its packets at the first aligned element, so the order of its additions
// depends on the address modulo the packet size: the scratch run is placed at the address of
// grad_output's run modulo 64 bytes, so that the sums equal batch norm's over the masked
// gradient (which lives where grad_output does) bit for bit.
template <typename T>
class ScratchRun {
 public:
  explicit ScratchRun(std::int64_t len) : storage_(static_cast<std::size_t>(len) + kAlign / sizeof(T)) {}
  T* like(const T* other) {
    const auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
    const auto want = reinterpret_cast<std::uintptr_t>(other) % kAlign;
    const std::uintptr_t shift = (want + kAlign - base % kAlign) % kAlign;  // a multiple of sizeof(T)
    return storage_.data() + shift / sizeof(T);
  }

 private:
  static constexpr std::uintptr_t kAlign = 64;
  std::vector<T> storage_;
};

// masked = grad_output where output > 0, else 0 (as BinaryOp::ReluBackward); keep[i] records
// output > 0 for the second pass, which then reads a byte per element instead of output's T.
template <typename T>
void mask_run(const T* grad_output, const T* output, std::int64_t len, T* masked, std::uint8_t* keep) {
  for (std::int64_t i = 0; i < len; ++i) {
    const T g = grad_output[i];  // read unconditionally: a blend, not a masked load
    const bool positive = output[i] > T(0);
    keep[i] = positive ? 1 : 0;
    masked[i] = positive ? g : T(0);
  }
}

// masked = grad_output where keep, else 0: mask_run's values again, from its record.
template <typename T>
void remask_run(const T* grad_output, const std::uint8_t* keep, std::int64_t len, T* masked) {
  for (std::int64_t i = 0; i < len; ++i) {
    const T g = grad_output[i];
    masked[i] = keep[i] != 0 ? g : T(0);
  }
}

// This thread's channels [first, last) of an OpenMP parallel region: contiguous blocks, so that
// each image's runs of them are one contiguous stretch of memory.
struct ChannelRange {
  std::int64_t first, last;
};
ChannelRange thread_channels(std::int64_t channels) {
  const std::int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
  return {channels * thread / threads, channels * (thread + 1) / threads};
}

}  // namespace

// Every pass walks image by image over the thread's channels (not channel by channel over the
// images): each step reads a contiguous stretch of (last - first) runs instead of one H*W run
// per image, which the hardware prefetchers follow; in a training step the activations come
// from memory, not cache, and at 7x7 a run is only 196 bytes. Each channel still sums its runs
// in image order, so the values are those of batch norm's kernels bit for bit.
template <typename T>
void batch_norm_relu_forward_training(const BatchNormShape& s, const T* input, const T* residual,
                                      const T* weight, const T* bias, T* running_mean, T* running_var,
                                      double momentum, double eps, T* output, T* save_mean, T* save_invstd) {
  const std::int64_t spatial = s.spatial();
#pragma omp parallel
  {
    const ChannelRange range = thread_channels(s.channels);
    const std::int64_t mine = range.last - range.first;
    std::vector<detail::Moments> moments(static_cast<std::size_t>(mine));
    std::vector<T> scales(moments.size()), shifts(moments.size());
    auto run_at = [&](std::int64_t n, std::int64_t c) { return (n * s.channels + c) * spatial; };
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t c = range.first; c < range.last; ++c) {
        detail::add_run(moments[c - range.first], input + run_at(n, c), spatial);
      }
    }
    for (std::int64_t c = range.first; c < range.last; ++c) {
      const std::int64_t i = c - range.first;
      const detail::Moments& m = moments[i];
      const detail::ScaleShift affine = detail::channel_statistics(
          m.mean, m.squares, m.count, c, weight, bias, running_mean, running_var, momentum, eps, save_mean,
          save_invstd);
      scales[i] = static_cast<T>(affine.scale);
      shifts[i] = static_cast<T>(affine.shift);
    }
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t c = range.first; c < range.last; ++c) {
        const std::int64_t i = c - range.first, offset = run_at(n, c);
        const T scale = scales[i], shift = shifts[i];
        const T* x = input + offset;
        T* y = output + offset;
        // Rounded as batch norm's output, then the add, then relu (x > 0 ? x : 0, NaN to 0).
        if (residual != nullptr) {
          const T* r = residual + offset;
          for (std::int64_t k = 0; k < spatial; ++k) {
            const T normalised = x[k] * scale + shift;
            const T sum = normalised + r[k];
            y[k] = sum > T(0) ? sum : T(0);
          }
        } else {
          for (std::int64_t k = 0; k < spatial; ++k) {
            const T normalised = x[k] * scale + shift;
            y[k] = normalised > T(0) ? normalised : T(0);
          }
        }
      }
    }
  }
}

template <typename T>
void batch_norm_relu_backward_training(const BatchNormShape& s, const T* grad_output, const T* output,
                                       const T* input, const T* weight, const T* save_mean,
                                       const T* save_invstd, T* grad_input, T* grad_weight, T* grad_bias,
                                       T* grad_residual) {
  const std::int64_t spatial = s.spatial();
  const double count = static_cast<double>(s.batch * spatial);
#pragma omp parallel
  {
    const ChannelRange range = thread_channels(s.channels);
    const std::int64_t mine = range.last - range.first;
    // Each thread's scratch; unused where grad_residual holds the masked gradient. keep: which
    // elements of the thread's runs (in the order visited) pass the ReLU, for the second pass.
    ScratchRun<T> scratch(grad_residual != nullptr ? 0 : spatial);
    const bool second_pass = grad_input != nullptr && grad_residual == nullptr;
    std::unique_ptr<std::uint8_t[]> keep(new std::uint8_t[second_pass ? s.batch * mine * spatial : spatial]);
    std::vector<detail::GradSums> sums(static_cast<std::size_t>(mine));
    auto run_at = [&](std::int64_t n, std::int64_t c) { return (n * s.channels + c) * spatial; };
    auto keep_at = [&](std::int64_t n, std::int64_t c) {
      return second_pass ? keep.get() + (n * mine + c - range.first) * spatial : keep.get();
    };
    // The masked run at offset: in grad_residual (which is it), or in the scratch run.
    auto masked_run = [&](std::int64_t offset) {
      return grad_residual != nullptr ? grad_residual + offset : scratch.like(grad_output + offset);
    };
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t c = range.first; c < range.last; ++c) {
        const std::int64_t offset = run_at(n, c);
        T* masked = masked_run(offset);
        mask_run(grad_output + offset, output + offset, spatial, masked, keep_at(n, c));
        detail::add_grad_sums(sums[c - range.first], static_cast<const T*>(masked), input + offset, spatial,
                              static_cast<T>(save_mean[c]));
      }
    }
    std::vector<detail::InputGradCoefficients> coefficients(sums.size());
    for (std::int64_t c = range.first; c < range.last; ++c) {
      const detail::GradSums& sum = sums[c - range.first];
      const double invstd = save_invstd[c];
      if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(sum.grad_times_centered * invstd);
      if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(sum.grad);
      coefficients[c - range.first] =
          detail::input_grad_coefficients(sum, count, weight ? static_cast<double>(weight[c]) : 1.0, invstd);
    }
    if (grad_input != nullptr) {
      for (std::int64_t n = 0; n < s.batch; ++n) {
        for (std::int64_t c = range.first; c < range.last; ++c) {
          const std::int64_t offset = run_at(n, c);
          T* masked = masked_run(offset);
          if (grad_residual == nullptr) remask_run(grad_output + offset, keep_at(n, c), spatial, masked);
          detail::input_grad_run(coefficients[c - range.first], static_cast<T>(save_mean[c]), masked,
                                 input + offset, spatial, grad_input + offset);
        }
      }
    }
  }
}

#define SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(T)                                                              \
  template void batch_norm_relu_forward_training<T>(const BatchNormShape&, const T*, const T*, const T*,       \
                                                    const T*, T*, T*, double, double, T*, T*, T*);             \
  template void batch_norm_relu_backward_training<T>(const BatchNormShape&, const T*, const T*, const T*,      \
                                                     const T*, const T*, const T*, T*, T*, T*, T*);
SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(float)
SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU(double)
#undef SUBLET_INSTANTIATE_BATCH_NORM_RELU_CPU

}  // namespace sublet::ops::cpu
