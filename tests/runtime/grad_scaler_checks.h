#pragma once
// The loss-scaled step's checks, run on the CPU (test_grad_scaler_skip.cpp) and on CUDA
// (test_grad_scaler_cuda.cpp) through the same functions: the fused SGD/Adam kernels decide the
// skip on the device on both (the CPU kernels read the flag from host memory by the same path).
//  - skip_changes_nothing: a step with an inf, -inf or NaN in one gradient element changes
//    nothing, bit for bit: parameters, momentum buffers, Adam's moments, per-parameter and global
//    step counts (the bad element sits in the second chunk of a multi-chunk tensor, so every
//    CUDA block must skip, not only the one that saw it);
//  - skipped_first_step: a skipped first step leaves the next one to be the first (SGD's buffer
//    becomes g even with dampening, Adam's bias correction uses t = 1), bit for bit equal to a
//    twin that never saw the skipped step;
//  - scale_sequence: 50 steps with inf injected at chosen steps: the scale after every update
//    (growth after growth_interval clean steps, backoff) equals the host model's sequence, and the
//    counts count only the steps taken;
//  - device_matches_host_path: the fused path (flag read on the device) and the per-parameter
//    path (flag read on the host) give the same scales and counts, and parameters within 1e-12
//    (float64; the paths round a*b+c differently);
//  - plain_steps_continue_the_counts: plain steps after device-decided ones (counts read back
//    from the device) and device-decided ones after plain ones, against a twin that takes plain
//    steps on the unscaled gradients of the steps that were not skipped: bit for bit.
//  - mark_non_finite_flags: ops::mark_non_finite (GradScaler's one-launch check) sets the flag to
//    NaN for an inf, -inf or NaN in the last chunk of a multi-chunk tensor or in a later tensor of
//    the launch, and leaves a clear flag clear (largest finite values included) and a set one set.
// Gradients are random (seeded) times a power-of-two scale, so unscaling is exact and the
// bit-for-bit comparisons against unscaled twins hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fused_optim_support.h"
#include "ops/optim_update.h"
#include "runtime/amp/grad_scaler.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"

namespace sublet::testing {

using MakeScaledOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, bool fused)>;

struct ScaledCase {
  const char* name;
  MakeScaledOptimizer make;
};

inline std::vector<ScaledCase> scaled_cases() {
  return {
      {"sgd momentum dampening weight_decay", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::SGD>(
             std::move(p), optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(1e-3).fused(f));
       }},
      {"sgd nesterov", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::SGD>(std::move(p),
                                             optim::SGDOptions(0.05).momentum(0.9).nesterov(true).fused(f));
       }},
      {"adam l2", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2).weight_decay(0.1).fused(f));
       }},
      {"adamw", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamOptions(1e-2).weight_decay(0.05).fused(f));
       }},
  };
}

// The scale after each of `steps` updates when the steps in `bad` saw a non-finite gradient:
// PyTorch's rule, computed on the host, apart from the device ops under test.
inline std::vector<double> expected_scales(const amp::GradScalerOptions& options, int steps, const std::set<int>& bad) {
  std::vector<double> out;
  double scale = options.init_scale;
  std::int64_t tracker = 0;
  for (int step = 0; step < steps; ++step) {
    if (bad.count(step)) {
      scale *= options.backoff_factor;
      tracker = 0;
    } else if (++tracker == options.growth_interval) {
      scale *= options.growth_factor;
      tracker = 0;
    }
    out.push_back(scale);
  }
  return out;
}

// Seeded N(0, 1) gradients times `scale` (as a scaled backward leaves them), on the parameters'
// device; with `bad`, element 33000 of parameter 4 (40001 elements: the second CUDA chunk) is it.
inline void set_scaled_grads(std::vector<Tensor>& params, std::uint64_t seed, double scale,
                             std::optional<double> bad = std::nullopt) {
  Generator g(seed);
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor grad = randn(params[i].sizes(), g, TensorOptions().dtype(DType::Float64)).mul(scale);
    if (bad && i == 4) grad.data<double>()[33000] = *bad;
    params[i].set_grad(grad.to(params[i].dtype()).to(params[i].device()));
  }
}

// Everything a step may change, as bit patterns (float32 and int64 are exact in float64):
// the parameters ("param.<i>") and the optimizer's state_dict (moments, buffers, counts, lr).
using Snapshot = std::map<std::string, std::vector<std::uint64_t>>;

inline Snapshot snapshot(const optim::Optimizer& optimizer) {
  const auto bits = [](const Tensor& t) {
    std::vector<std::uint64_t> out;
    for (double v : t.detach().to(Device::cpu()).to(DType::Float64).to_vector<double>())
      out.push_back(std::bit_cast<std::uint64_t>(v));
    return out;
  };
  Snapshot out;
  for (std::size_t i = 0; i < optimizer.params().size(); ++i)
    out["param." + std::to_string(i)] = bits(optimizer.params()[i]);
  for (const auto& [name, tensor] : optimizer.state_dict()) out[name] = bits(tensor);
  return out;
}

// "" when identical (and every value finite: a NaN must not pass as equal to itself), else the
// first entry and element that differ.
inline std::string first_difference(const Snapshot& a, const Snapshot& b) {
  if (a.size() != b.size()) return "entry count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (const auto& [name, values] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return name + " missing";
    if (values.size() != it->second.size()) return name + ": sizes differ";
    for (std::size_t k = 0; k < values.size(); ++k) {
      const double x = std::bit_cast<double>(values[k]), y = std::bit_cast<double>(it->second[k]);
      if (!std::isfinite(x) || !std::isfinite(y)) return name + "[" + std::to_string(k) + "] is not finite";
      if (values[k] != it->second[k])
        return name + "[" + std::to_string(k) + "]: " + std::to_string(x) + " vs " + std::to_string(y);
    }
  }
  return "";
}

inline std::int64_t count_of(const Snapshot& s, const std::string& name) {
  return static_cast<std::int64_t>(std::bit_cast<double>(s.at(name).at(0)));
}

// One scaler step: the device decided (nothing read on the host).
inline void device_step(amp::GradScaler& scaler, optim::Optimizer& optimizer) {
  EXPECT_EQ(scaler.step(optimizer), optim::StepOutcome::DecidedOnDevice);
  scaler.update();
}

inline void skip_changes_nothing(Device device) {
  for (const ScaledCase& c : scaled_cases()) {
    for (const double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()}) {
      SCOPED_TRACE(std::string(c.name) + ", bad value " + std::to_string(bad));
      auto params = make_params(fused_test_shapes(), DType::Float32, device, 11);
      auto optimizer = c.make(params, true);
      amp::GradScaler scaler(device, amp::GradScalerOptions{.init_scale = 1024.0});
      for (int step = 0; step < 2; ++step) {  // the state exists and the counts are 2
        set_scaled_grads(params, 100 + step, 1024.0);
        device_step(scaler, *optimizer);
      }
      set_scaled_grads(params, 200, 1024.0, bad);
      const Snapshot before = snapshot(*optimizer);
      EXPECT_EQ(scaler.step(*optimizer), optim::StepOutcome::DecidedOnDevice);
      const Snapshot after = snapshot(*optimizer);
      EXPECT_EQ(first_difference(before, after), "");
      EXPECT_EQ(count_of(after, "step_count"), 2);
      EXPECT_EQ(count_of(after, "4.step"), 2);
      scaler.update();
      EXPECT_EQ(scaler.current_scale(), 512.0);
      set_scaled_grads(params, 201, 512.0);  // and the next finite step steps
      device_step(scaler, *optimizer);
      EXPECT_EQ(optimizer->param_step(4), 3);
      EXPECT_NE(first_difference(before, snapshot(*optimizer)), "");
    }
  }
}

inline void skipped_first_step(Device device) {
  for (const ScaledCase& c : scaled_cases()) {
    SCOPED_TRACE(c.name);
    auto a = make_params(fused_test_shapes(), DType::Float32, device, 12);
    auto b = make_params(fused_test_shapes(), DType::Float32, device, 12);
    auto opt_a = c.make(a, true);
    auto opt_b = c.make(b, true);
    amp::GradScaler scaler_a(device, amp::GradScalerOptions{.init_scale = 1024.0});
    amp::GradScaler scaler_b(device, amp::GradScalerOptions{.init_scale = 512.0});
    set_scaled_grads(a, 300, 1024.0, std::numeric_limits<double>::infinity());
    device_step(scaler_a, *opt_a);  // skipped: the state is created, nothing counted
    EXPECT_EQ(opt_a->step_count(), 0);
    for (int step = 0; step < 2; ++step) {
      set_scaled_grads(a, 301 + step, 512.0);
      set_scaled_grads(b, 301 + step, 512.0);
      device_step(scaler_a, *opt_a);
      device_step(scaler_b, *opt_b);
      EXPECT_EQ(first_difference(snapshot(*opt_a), snapshot(*opt_b)), "") << "step " << step;
    }
    EXPECT_EQ(opt_a->param_step(0), 2);
  }
}

inline void scale_sequence(Device device) {
  const amp::GradScalerOptions options{.init_scale = 1024.0, .growth_interval = 4};
  const std::set<int> bad = {3, 4, 10, 21, 22, 23, 37, 49};
  constexpr int kSteps = 50;
  const std::vector<double> expected = expected_scales(options, kSteps, bad);
  ASSERT_GT(*std::max_element(expected.begin(), expected.end()), options.init_scale) << "the sequence must grow";
  ASSERT_LT(*std::min_element(expected.begin(), expected.end()), options.init_scale) << "and back off";
  for (const ScaledCase& c : scaled_cases()) {
    SCOPED_TRACE(c.name);
    auto params = make_params(fused_test_shapes(), DType::Float32, device, 13);
    auto optimizer = c.make(params, true);
    amp::GradScaler scaler(device, options);
    std::vector<double> scales;
    for (int step = 0; step < kSteps; ++step) {
      const double scale = step == 0 ? options.init_scale : expected[static_cast<std::size_t>(step) - 1];
      set_scaled_grads(params, 400 + static_cast<std::uint64_t>(step), scale,
                       bad.count(step) ? std::optional<double>(std::numeric_limits<double>::infinity()) : std::nullopt);
      device_step(scaler, *optimizer);
      scales.push_back(scaler.current_scale());
    }
    EXPECT_EQ(scales, expected);
    const auto taken = static_cast<std::int64_t>(kSteps - static_cast<int>(bad.size()));
    EXPECT_EQ(optimizer->step_count(), taken);
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(optimizer->param_step(i), taken) << "parameter " << i;
    EXPECT_EQ(scaler.growth_tracker(), 0) << "bad step 49 restarts the count";
  }
}

inline void device_matches_host_path(Device device) {
  const amp::GradScalerOptions options{.init_scale = 1024.0, .growth_interval = 3};
  const std::set<int> bad = {0, 5, 6, 12, 19};
  constexpr int kSteps = 24;
  for (const ScaledCase& c : scaled_cases()) {
    SCOPED_TRACE(c.name);
    auto on_device = make_params(fused_test_shapes(), DType::Float64, device, 14);
    auto on_host = make_params(fused_test_shapes(), DType::Float64, device, 14);
    auto fused = c.make(on_device, true);
    auto per_parameter = c.make(on_host, false);
    amp::GradScaler scaler_d(device, options), scaler_h(device, options);
    for (int step = 0; step < kSteps; ++step) {
      const std::optional<double> inject =
          bad.count(step) ? std::optional<double>(std::numeric_limits<double>::quiet_NaN()) : std::nullopt;
      set_scaled_grads(on_device, 500 + static_cast<std::uint64_t>(step), scaler_d.current_scale(), inject);
      set_scaled_grads(on_host, 500 + static_cast<std::uint64_t>(step), scaler_h.current_scale(), inject);
      EXPECT_EQ(scaler_d.step(*fused), optim::StepOutcome::DecidedOnDevice);
      const optim::StepOutcome host_read = bad.count(step) ? optim::StepOutcome::Skipped : optim::StepOutcome::Stepped;
      EXPECT_EQ(scaler_h.step(*per_parameter), host_read) << "step " << step;
      scaler_d.update();
      scaler_h.update();
      EXPECT_EQ(scaler_d.current_scale(), scaler_h.current_scale()) << "step " << step;
    }
    EXPECT_EQ(fused->step_count(), per_parameter->step_count());
    EXPECT_EQ(fused->step_count(), kSteps - static_cast<int>(bad.size()));
    EXPECT_EQ(fused->param_step(3), per_parameter->param_step(3));
    EXPECT_LE(max_relative_difference(on_device, on_host), 1e-12);
    auto start = make_params(fused_test_shapes(), DType::Float64, device, 14);
    EXPECT_GT(max_relative_difference(on_device, start), 1e-4) << "the parameters moved";
  }
}

inline void plain_steps_continue_the_counts(Device device) {
  for (const ScaledCase& c : scaled_cases()) {
    SCOPED_TRACE(c.name);
    auto a = make_params(fused_test_shapes(), DType::Float32, device, 15);
    auto b = make_params(fused_test_shapes(), DType::Float32, device, 15);
    auto opt_a = c.make(a, true);
    auto opt_b = c.make(b, true);
    amp::GradScaler scaler(device, amp::GradScalerOptions{.init_scale = 256.0, .growth_interval = 2});
    const std::set<int> bad = {1, 4};
    std::uint64_t seed = 600;
    const auto scaled_steps = [&](int first, int count) {  // a: loss-scaled; b: plain, on the steps taken
      for (int step = first; step < first + count; ++step, ++seed) {
        const bool skip = bad.count(step) != 0;
        set_scaled_grads(a, seed, scaler.current_scale(),
                         skip ? std::optional<double>(std::numeric_limits<double>::infinity()) : std::nullopt);
        device_step(scaler, *opt_a);
        if (skip) continue;
        set_scaled_grads(b, seed, 1.0);
        opt_b->step();
      }
    };
    const auto plain_steps = [&](int count) {
      for (int k = 0; k < count; ++k, ++seed) {
        set_scaled_grads(a, seed, 1.0);
        set_scaled_grads(b, seed, 1.0);
        opt_a->step();
        opt_b->step();
      }
    };
    scaled_steps(0, 6);  // 4 taken, counts left on the device
    plain_steps(2);      // reads them back first
    EXPECT_EQ(first_difference(snapshot(*opt_a), snapshot(*opt_b)), "") << "after scaled, then plain steps";
    EXPECT_EQ(opt_a->param_step(0), 6);
    scaled_steps(6, 3);  // counts written to the device from the host first
    EXPECT_EQ(first_difference(snapshot(*opt_a), snapshot(*opt_b)), "") << "after plain, then scaled steps";
    plain_steps(1);
    EXPECT_EQ(opt_a->step_count(), 10);
    EXPECT_EQ(first_difference(snapshot(*opt_a), snapshot(*opt_b)), "") << "at the end";
  }
}

// The arrays: 7 elements, then 3 * 32768 + 5 (four chunks of the CUDA kernel), then 3; `bad`
// (when given) replaces element `at` of array `which`; every other value is finite.
inline float non_finite_flag(Device device, DType dtype, float initial, std::optional<double> bad = std::nullopt,
                             std::size_t which = 0, std::int64_t at = 0) {
  const std::vector<std::int64_t> sizes = {7, 3 * 32768 + 5, 3};
  const auto cpu = TensorOptions().dtype(dtype);
  std::vector<Tensor> arrays;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Tensor t = full({sizes[i]}, i == 1 ? -std::numeric_limits<float>::max() : 1.5, cpu);
    if (bad && i == which) {
      if (dtype == DType::Float32) t.data<float>()[at] = static_cast<float>(*bad);
      else t.data<double>()[at] = *bad;
    }
    arrays.push_back(t.to(device));
  }
  std::vector<ops::FiniteCheckTensor> list;
  for (const Tensor& t : arrays) list.push_back({t.data_ptr(), t.numel()});
  Tensor flag = full({1}, initial, TensorOptions().dtype(DType::Float32).device(device));
  ops::mark_non_finite(ops::Context::for_device(device), dtype, list, flag.data<float>());
  return flag.to(Device::cpu()).data<float>()[0];
}

inline void mark_non_finite_flags(Device device) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype_name(dtype));
    EXPECT_EQ(non_finite_flag(device, dtype, 0.0f), 0.0f) << "finite values (the largest included) leave it clear";
    EXPECT_TRUE(std::isnan(non_finite_flag(device, dtype, std::numeric_limits<float>::quiet_NaN())))
        << "a set flag stays set";
    for (double bad : {inf, -inf, nan}) {
      SCOPED_TRACE(bad);
      EXPECT_TRUE(std::isnan(non_finite_flag(device, dtype, 0.0f, bad, 1, 3 * 32768 + 4))) << "the last chunk's last element";
      EXPECT_TRUE(std::isnan(non_finite_flag(device, dtype, 0.0f, bad, 2, 0))) << "the launch's last tensor";
    }
  }
}

}  // namespace sublet::testing
