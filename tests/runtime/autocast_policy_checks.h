#pragma once
// The autocast policy checks (runtime/autocast.h), written once over the device: the CPU
// suite runs them in tests/runtime/test_autocast.cpp, the GPU suite in test_autocast_cuda.cpp.
// Each says which op ran in which dtype by the dtypes of its outputs, and that the parameters
// and their gradients stay float32.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "memory/history.h"
#include "memory/registry.h"
#include "runtime/autocast.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/linear.h"
#include "runtime/tensor.h"

namespace sublet::testing {

namespace F = nn::functional;

inline Tensor random_on(Device device, const Shape& sizes, std::uint64_t seed, bool requires_grad = false) {
  Generator g(seed);
  Tensor t = randn(sizes, g).to(device);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

inline bool all_finite(const Tensor& t) {
  for (float v : t.to(DType::Float32).to(Device::cpu()).to_vector<float>())
    if (!std::isfinite(v)) return false;
  return true;
}

// conv2d, linear and matmul run in the autocast dtype; log_softmax, softmax, layer_norm,
// cross_entropy, nll_loss and sum/mean in float32; an element-wise op of a 16-bit and a float32
// tensor in float32.
inline void check_op_dtypes(Device device, DType low) {
  const Tensor x = random_on(device, {2, 3, 6, 6}, 1), w = random_on(device, {4, 3, 3, 3}, 2, true);
  const Tensor b = random_on(device, {4}, 3, true), labels = Tensor::from_vector<std::int64_t>({0, 3}, {2}).to(device);
  nn::Linear linear(8, 4);
  linear.to(device);
  AutocastGuard autocast(low);
  EXPECT_TRUE(amp::autocast_is_enabled());
  EXPECT_EQ(amp::autocast_dtype(), low);
  const Tensor y = F::conv2d(x, w, b, F::Conv2dFuncOptions().padding(1));
  EXPECT_EQ(y.dtype(), low) << "conv2d";
  const Tensor h = linear(random_on(device, {2, 8}, 4));
  EXPECT_EQ(h.dtype(), low) << "linear (its bias cast with its weight)";
  const Tensor m = random_on(device, {2, 8}, 5).matmul(random_on(device, {8, 4}, 6));
  EXPECT_EQ(m.dtype(), low) << "matmul";
  EXPECT_EQ(F::log_softmax(h, 1).dtype(), DType::Float32) << "log_softmax";
  EXPECT_EQ(F::cross_entropy(h, labels).dtype(), DType::Float32) << "cross_entropy";
  EXPECT_EQ(F::nll_loss(h, labels).dtype(), DType::Float32) << "nll_loss";
  // The transformer ops: layer_norm and softmax in float32; the cross-entropy of 16-bit logits
  // gives a float32 loss (read in 16 bits on the GPU); GELU follows its input; batched matmul
  // and linear on [B, T, C] in the 16-bit type.
  const Tensor seq = random_on(device, {2, 3, 8}, 8);
  EXPECT_EQ(F::layer_norm(h, {4}).dtype(), DType::Float32) << "layer_norm";
  EXPECT_EQ(F::softmax(h, -1).dtype(), DType::Float32) << "softmax";
  EXPECT_EQ(F::gelu(h, F::GeluApproximate::Tanh).dtype(), low) << "gelu follows its input";
  EXPECT_EQ(linear(seq).dtype(), low) << "linear on [B, T, C]";
  EXPECT_EQ(seq.matmul(random_on(device, {2, 8, 5}, 9)).dtype(), low) << "batched matmul";
  const Tensor seq_logits = linear(seq);
  const Tensor seq_labels = Tensor::from_vector<std::int64_t>({0, 3, -100, 1, 2, 2}, {2, 3}).to(device);
  EXPECT_EQ(F::cross_entropy(seq_logits, seq_labels).dtype(), DType::Float32) << "cross_entropy on [B, T, V]";
  EXPECT_EQ(y.sum().dtype(), DType::Float32) << "sum";
  EXPECT_EQ(y.mean({0, 2, 3}).dtype(), DType::Float32) << "mean";
  EXPECT_EQ(y.relu().dtype(), low) << "relu follows its input";
  EXPECT_EQ((h + m).dtype(), low) << "two 16-bit operands stay 16-bit";
  EXPECT_EQ((h + random_on(device, {2, 4}, 7)).dtype(), DType::Float32) << "16-bit + float32 promotes";
  // float64 is never cast, as in PyTorch.
  const Tensor d = random_on(device, {2, 2}, 8).to(DType::Float64);
  EXPECT_EQ(d.matmul(d).dtype(), DType::Float64);
}

// Master weights: the parameters and their gradients stay float32, and the gradients are those
// of the float32 model within the 16-bit type's precision.
inline void check_master_weights(Device device, DType low, double rtol) {
  const Tensor x = random_on(device, {4, 3, 5, 5}, 11), labels = Tensor::from_vector<std::int64_t>({0, 1, 2, 1}, {4}).to(device);
  const auto loss_of = [&](const Tensor& w, const Tensor& v) {
    const Tensor y = F::conv2d(x, w, {}, F::Conv2dFuncOptions().padding(1)).relu();
    return F::cross_entropy(y.flatten(1).matmul(v), labels);
  };
  Tensor w = random_on(device, {2, 3, 3, 3}, 12, true), v = random_on(device, {50, 3}, 13, true);
  Tensor loss;
  {
    AutocastGuard autocast(low);
    loss = loss_of(w, v);
  }
  EXPECT_EQ(loss.dtype(), DType::Float32);
  loss.backward();
  ASSERT_TRUE(w.grad().defined() && v.grad().defined());
  EXPECT_EQ(w.dtype(), DType::Float32);
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_EQ(v.grad().dtype(), DType::Float32);
  EXPECT_TRUE(all_finite(w.grad()) && all_finite(v.grad()));
  const Tensor w16_grad = w.grad(), v16_grad = v.grad();
  w.set_grad({});
  v.set_grad({});
  loss_of(w, v).backward();
  const auto rel_err = [](const Tensor& got, const Tensor& want) {
    const double scale = want.to(Device::cpu()).to(DType::Float64).pow(2).sum().item<double>();
    const double err = (got - want).to(Device::cpu()).to(DType::Float64).pow(2).sum().item<double>();
    return std::sqrt(err / scale);
  };
  const double ew = rel_err(w16_grad, w.grad()), ev = rel_err(v16_grad, v.grad());
  EXPECT_TRUE(ew <= rtol) << "conv weight gradient off the float32 one by " << ew << " (relative, L2)";
  EXPECT_TRUE(ev <= rtol) << "matmul weight gradient off the float32 one by " << ev << " (relative, L2)";
}

// Guards nest and restore what they found; a disabled guard switches autocast off inside.
inline void check_nesting(Device device) {
  const Tensor a = random_on(device, {3, 4}, 21), b = random_on(device, {4, 2}, 22);
  EXPECT_FALSE(amp::autocast_is_enabled());
  {
    AutocastGuard outer(DType::BFloat16);
    EXPECT_EQ(a.matmul(b).dtype(), DType::BFloat16);
    {
      AutocastGuard off(DType::BFloat16, /*enabled=*/false);
      EXPECT_FALSE(amp::autocast_is_enabled());
      EXPECT_EQ(a.matmul(b).dtype(), DType::Float32) << "a disabled guard runs float32 as is";
      {
        AutocastGuard inner(DType::Float16);
        EXPECT_EQ(a.matmul(b).dtype(), DType::Float16);
      }
      EXPECT_FALSE(amp::autocast_is_enabled());
    }
    EXPECT_TRUE(amp::autocast_is_enabled());
    EXPECT_EQ(amp::autocast_dtype(), DType::BFloat16);
    EXPECT_EQ(a.matmul(b).dtype(), DType::BFloat16);
  }
  EXPECT_FALSE(amp::autocast_is_enabled());
  EXPECT_EQ(a.matmul(b).dtype(), DType::Float32);
}

inline std::size_t autocast_allocations(const memory::AllocationHistory& history, std::size_t bytes) {
  std::size_t n = 0;
  for (const memory::HistoryEvent& e : history.events())
    if (e.kind == memory::AllocatorEventKind::Alloc && e.category == memory::BlockCategory::Autocast &&
        (bytes == 0 || e.requested_size == bytes))
      ++n;
  return n;
}

// A parameter used twice within a guard is cast once; the cache goes when the outermost guard
// exits; the casts are tagged "autocast" in the allocation history.
inline void check_weight_cast_cache(Device device, DType low) {
  auto& allocator = memory::allocator_for(device);
  memory::AllocationHistory history;
  history.attach(allocator);
  const Tensor w = random_on(device, {16, 24}, 31, true);
  const Tensor x1 = random_on(device, {8, 16}, 32), x2 = random_on(device, {5, 16}, 33);
  const std::size_t w_bytes = 16 * 24 * element_size(low);
  Tensor y1, y2;
  {
    AutocastGuard outer(low);
    y1 = x1.matmul(w);
    {
      AutocastGuard inner(low);  // a nested guard shares the outermost guard's cache
      y2 = x2.matmul(w);
    }
    EXPECT_EQ(amp::autocast_cached_casts(), 1u);
    EXPECT_EQ(autocast_allocations(history, w_bytes), 1u) << "the weight is cast once";
    // A tensor that does not require grad (an activation) is cast at each use, not cached.
    const Tensor z = x1.matmul(w);
    EXPECT_EQ(amp::autocast_cached_casts(), 1u);
  }
  EXPECT_EQ(amp::autocast_cached_casts(), 0u) << "the outermost guard's exit drops the cache";
  {
    AutocastGuard again(low);
    (void)x1.matmul(w);
  }
  EXPECT_EQ(autocast_allocations(history, w_bytes), 2u) << "a new outermost guard casts again";
  EXPECT_GE(autocast_allocations(history, 0), 4u) << "the activations' casts are tagged too";
  history.detach();
  bool named = false;
  for (const memory::HistoryEvent& e : history.events())
    named = named || std::string(memory::category_name(e.category)) == "autocast";
  EXPECT_TRUE(named);
  (y1.sum() + y2.sum()).backward();
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

// amp::lower_data (the fused CUDA linear nodes' way to a parameter's 16-bit copy, without a cast
// node) and to_lower share one cast per parameter and guard, in either order, and the cast node
// that to_lower attaches to lower_data's copy carries the gradient back to the float32 leaf.
inline void check_lower_data_shares_the_cast_cache(Device device, DType low) {
  auto& allocator = memory::allocator_for(device);
  memory::AllocationHistory history;
  history.attach(allocator);
  const Tensor w = random_on(device, {16, 24}, 51, true), v = random_on(device, {16, 24}, 52, true);
  const Tensor x = random_on(device, {8, 16}, 53);
  const std::size_t w_bytes = 16 * 24 * element_size(low);
  EXPECT_EQ(amp::lower_data(w).data_ptr(), w.data_ptr()) << "no guard: the tensor itself";
  Tensor y;
  {
    AutocastGuard autocast(low);
    const Tensor data = amp::lower_data(w);
    EXPECT_EQ(data.dtype(), low);
    EXPECT_FALSE(data.requires_grad()) << "no cast node";
    EXPECT_EQ(amp::autocast_cached_casts(), 1u);
    y = x.matmul(w);  // to_lower finds lower_data's copy
    EXPECT_EQ(amp::to_lower(w).data_ptr(), data.data_ptr());
    EXPECT_TRUE(amp::to_lower(w).requires_grad());
    EXPECT_EQ(autocast_allocations(history, w_bytes), 1u) << "lower_data then to_lower: one cast";
    const Tensor lowered = amp::to_lower(v);
    EXPECT_EQ(amp::lower_data(v).data_ptr(), lowered.data_ptr());
    EXPECT_FALSE(amp::lower_data(v).requires_grad());
    EXPECT_EQ(autocast_allocations(history, w_bytes), 2u) << "to_lower then lower_data: one cast";
    EXPECT_EQ(amp::autocast_cached_casts(), 2u);
  }
  history.detach();
  EXPECT_EQ(amp::autocast_cached_casts(), 0u);
  y.sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  // d sum(x w) / dw = x^T 1, from the 16-bit x the product saw.
  const auto got = w.grad().to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const auto want =
      x.to(low).to(Device::cpu()).to(DType::Float64).t().matmul(ones({8, 24}, DType::Float64)).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    scale = std::fmax(scale, std::fabs(want[i]));
    worst = std::fmax(worst, std::fabs(got[i] - want[i]));
  }
  EXPECT_LE(worst, 2e-2 * scale);
}

}  // namespace sublet::testing
