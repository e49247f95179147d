// The CPU's fused batch norm + residual + ReLU kernels (ops/cpu/batch_norm_relu_cpu.cpp) against a
// naive float64 reference, at channel counts and batches that do not split evenly over the OpenMP
// threads, and the same values bit for bit whatever the thread count (each channel is summed by
// one thread, in image order).
#include "ops/batch_norm_relu.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "nn_test_support.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::max_relative_error;
using testing::random_values;

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;
// Float64 kernels against a float64 reference that sums in another order.
constexpr double kTolerance = 1e-9;

// Sets the OpenMP thread count for a scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ScopedThreads() { omp_set_num_threads(previous_); }

 private:
  int previous_;
};

// 64-byte aligned storage: the kernels' vectorised sums start at the first aligned element, so
// a buffer's address modulo the vector width changes the order of the additions. Runs compared
// bit for bit must see the same alignment.
template <typename T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U>
  Aligned64(const Aligned64<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const Aligned64<U>&) const { return true; }
};
using Values = std::vector<double, Aligned64<double>>;

struct Results {
  Values output, mean, invstd, running_mean, running_var;
  Values grad_input, grad_weight, grad_bias, grad_residual;
};

struct Inputs {
  BatchNormShape shape;
  Values x, residual, weight, bias, grad_output;
};

Values aligned(const std::vector<double>& values) { return Values(values.begin(), values.end()); }

Inputs make_inputs(const BatchNormShape& s, std::uint64_t seed) {
  const std::int64_t numel = s.batch * s.channels * s.spatial();
  return {s, aligned(random_values<double>(numel, seed)), aligned(random_values<double>(numel, seed + 1)),
          aligned(random_values<double>(s.channels, seed + 2, 0.5, 1.5)),
          aligned(random_values<double>(s.channels, seed + 3)), aligned(random_values<double>(numel, seed + 4))};
}

Results run_fused(const Inputs& in) {
  const BatchNormShape& s = in.shape;
  Results r;
  r.output.resize(in.x.size());
  r.mean.resize(s.channels);
  r.invstd.resize(s.channels);
  r.running_mean.assign(s.channels, 0.0);
  r.running_var.assign(s.channels, 1.0);
  batch_norm_relu_forward_training(cpu_context(), s, DType::Float64, in.x.data(), in.residual.data(), in.weight.data(),
                                   in.bias.data(), r.running_mean.data(), r.running_var.data(), kMomentum, kEps,
                                   r.output.data(), r.mean.data(), r.invstd.data());
  r.grad_input.resize(in.x.size());
  r.grad_residual.resize(in.x.size());
  r.grad_weight.resize(s.channels);
  r.grad_bias.resize(s.channels);
  batch_norm_relu_backward_training(cpu_context(), s, DType::Float64, in.grad_output.data(), r.output.data(),
                                    in.x.data(), in.weight.data(), r.mean.data(), r.invstd.data(),
                                    r.grad_input.data(), r.grad_weight.data(), r.grad_bias.data(),
                                    r.grad_residual.data());
  return r;
}

// relu(batch_norm(x) + residual) and its gradients, channel by channel in float64.
Results run_reference(const Inputs& in) {
  const BatchNormShape& s = in.shape;
  const std::int64_t hw = s.spatial();
  const double count = static_cast<double>(s.batch * hw);
  Results r;
  r.output.resize(in.x.size());
  r.grad_input.resize(in.x.size());
  r.grad_residual.resize(in.x.size());
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t i) { return static_cast<std::size_t>((n * s.channels + c) * hw + i); };
  for (std::int64_t c = 0; c < s.channels; ++c) {
    double sum = 0, squares = 0;
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t i = 0; i < hw; ++i) sum += in.x[at(n, c, i)];
    const double mean = sum / count;
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t i = 0; i < hw; ++i) squares += std::pow(in.x[at(n, c, i)] - mean, 2);
    const double invstd = 1.0 / std::sqrt(squares / count + kEps);
    r.mean.push_back(mean);
    r.invstd.push_back(invstd);
    r.running_mean.push_back(kMomentum * mean);
    r.running_var.push_back((1 - kMomentum) + kMomentum * squares / (count - 1));
    double grad_sum = 0, grad_xhat_sum = 0;
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t k = at(n, c, i);
        const double xhat = (in.x[k] - mean) * invstd;
        const double y = xhat * in.weight[c] + in.bias[c] + in.residual[k];
        r.output[k] = y > 0 ? y : 0;
        r.grad_residual[k] = y > 0 ? in.grad_output[k] : 0;
        grad_sum += r.grad_residual[k];
        grad_xhat_sum += r.grad_residual[k] * xhat;
      }
    }
    r.grad_bias.push_back(grad_sum);
    r.grad_weight.push_back(grad_xhat_sum);
    for (std::int64_t n = 0; n < s.batch; ++n) {
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t k = at(n, c, i);
        const double xhat = (in.x[k] - mean) * invstd;
        r.grad_input[k] = in.weight[c] * invstd * (r.grad_residual[k] - grad_sum / count - xhat * grad_xhat_sum / count);
      }
    }
  }
  return r;
}

std::vector<std::pair<std::string, std::vector<double>>> fields(const Results& r) {
  std::vector<std::pair<std::string, std::vector<double>>> all;
  for (const auto& [name, values] : {std::pair<const char*, const Values*>{"output", &r.output},
                                     {"save_mean", &r.mean},
                                     {"save_invstd", &r.invstd},
                                     {"running_mean", &r.running_mean},
                                     {"running_var", &r.running_var},
                                     {"grad_input", &r.grad_input},
                                     {"grad_weight", &r.grad_weight},
                                     {"grad_bias", &r.grad_bias},
                                     {"grad_residual", &r.grad_residual}}) {
    all.emplace_back(name, std::vector<double>(values->begin(), values->end()));
  }
  return all;
}

// Channel counts below, at and above the blocks of 1 to 4 threads, none a multiple of 2 or 3
// but one; odd batches; runs that are not a multiple of the vector width.
std::vector<BatchNormShape> uneven_shapes() {
  return {{5, 7, 9, 9}, {3, 13, 7, 7}, {7, 1, 5, 3}, {2, 3, 1, 1}, {9, 17, 4, 5}, {4, 16, 6, 6}};
}

TEST(BatchNormReluCpu, MatchesTheFloat64ReferenceAtUnevenSplits) {
  std::uint64_t seed = 900;
  for (const BatchNormShape& s : uneven_shapes()) {
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE("[" + std::to_string(s.batch) + ", " + std::to_string(s.channels) + ", " + std::to_string(s.height) +
                   ", " + std::to_string(s.width) + "] on " + std::to_string(threads) + " threads");
      const Inputs in = make_inputs(s, seed += 10);
      ScopedThreads scope(threads);
      const Results fused = run_fused(in), reference = run_reference(in);
      const auto got = fields(fused), want = fields(reference);
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_LE(max_relative_error(got[i].second, want[i].second), kTolerance) << got[i].first;
      }
    }
  }
}

TEST(BatchNormReluCpu, ValuesDoNotDependOnTheThreadCount) {
  std::uint64_t seed = 1900;
  for (const BatchNormShape& s : uneven_shapes()) {
    const Inputs in = make_inputs(s, seed += 10);
    Results one;
    {
      ScopedThreads scope(1);
      one = run_fused(in);
    }
    for (const int threads : {2, 3, 4}) {
      ScopedThreads scope(threads);
      const Results many = run_fused(in);
      const auto got = fields(many), want = fields(one);
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].second, want[i].second)
            << got[i].first << " on " << threads << " threads, channels " << s.channels << ", batch " << s.batch;
      }
    }
  }
}

}  // namespace
}  // namespace sublet::ops
