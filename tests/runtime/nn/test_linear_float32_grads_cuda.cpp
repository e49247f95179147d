// The float32 weight and bias gradients of the fused CUDA linear nodes under bfloat16/float16
// autocast (runtime/nn/linear_parameter_grads.h, ops::linear_weight_grad_float32): the gradients
// are float32, agree with the 16-bit-then-cast way (SUBLET_NO_FLOAT32_WEIGHT_GRADIENTS=1) within
// one 16-bit rounding, and lie closer to float64 on the same 16-bit operands than it does (they
// skip that rounding); the input gradients are the same bits either way; a parameter is still
// cast once per guard when the fused and unfused linears share it; GPT's losses over a few
// optimizer steps agree with the switch on and off. Odd sizes and sizes 1 included.
// A GPU-only binary: run it on the GPU machine with SUBLET_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/tuning.h"
#include "memory/history.h"
#include "memory/registry.h"
#include "models/gpt.h"
#include "ops/linear_bias.h"
#include "ops/linear_gelu.h"
#include "runtime/autocast.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/adam.h"
#include "tests/runtime/nn/cuda_parity.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::normalized_error;
using testing::parity_tolerance;
using testing::random64;

// Float32 accumulation of exact 16-bit products, against float64: float32's parity tolerance.
const double kFloat32Accumulation = parity_tolerance(DType::Float32);

Tensor on_gpu_leaf(const Tensor& values) {
  Tensor t = values.to(DType::Float32).to(Device::cuda(0));
  t.requires_grad_(true);
  return t;
}

// The values as autocast's 16-bit copy holds them, in float64 on the CPU.
Tensor as_low64(const Tensor& values, DType low) {
  return values.to(DType::Float32).to(low).to(DType::Float64);
}

struct Grads {
  std::vector<Tensor> of;  // one gradient per leaf, in the leaves' order
};

// Backward of sum(f(leaves) * upstream) under autocast, the float32 gradients on or off.
Grads autocast_grads(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& values,
                     const Tensor& upstream, DType low, bool float32_gradients) {
  const ScopedTuning scope([&](TuningOptions& t) { t.float32_weight_gradients = float32_gradients; });
  std::vector<Tensor> leaves;
  for (const Tensor& v : values) leaves.push_back(on_gpu_leaf(v));
  Tensor out;
  {
    AutocastGuard autocast(low);
    out = f(leaves);
  }
  EXPECT_EQ(out.dtype(), low);
  out.mul(upstream.to(low).to(Device::cuda(0))).sum().backward();
  Grads g;
  for (const Tensor& leaf : leaves) g.of.push_back(leaf.grad());
  return g;
}

struct LinearShape {
  Shape rows;  // the input's leading dimensions
  std::int64_t k, n;
};

std::string text(const LinearShape& s, DType low) {
  return std::string(dtype_name(low)) + " rows " + shape_str(s.rows) + ", " + std::to_string(s.k) + " -> " +
         std::to_string(s.n);
}

Tensor linear_of(const std::vector<Tensor>& in) { return F::linear(in[0], in[1], in[2]); }

TEST(LinearFloat32GradsCuda, FusedLinearWritesFloat32GradientsCloserToFloat64) {
  SUBLET_SKIP_WITHOUT_GPU("the fused linear's float32 weight and bias gradients under autocast");
  const std::vector<LinearShape> shapes = {{{64}, 96, 48}, {{3, 11}, 33, 17}, {{1}, 1, 1}, {{2, 3, 16}, 64, 40},
                                           {{5}, 8, 24}};
  std::uint64_t seed = 100;
  for (DType low : {DType::BFloat16, DType::Float16}) {
    for (const LinearShape& s : shapes) {
      const std::string what = text(s, low);
      Shape x_sizes = s.rows, out_sizes = s.rows;
      x_sizes.push_back(s.k);
      out_sizes.push_back(s.n);
      const std::vector<Tensor> values = {random64(x_sizes, seed), random64({s.n, s.k}, seed + 1),
                                          random64({s.n}, seed + 2)};
      const Tensor upstream = random64(out_sizes, seed + 3);
      seed += 4;
      const std::int64_t fallbacks = ops::linear_bias_fallbacks();
      const Grads now = autocast_grads(linear_of, values, upstream, low, true);
      // Whether the fused forward and the float32 gradient GEMM (with its bias epilogue) took every
      // call: cuBLASLt takes multiples of 8; an odd size it may decline, and the unfused way runs.
      const bool fused = ops::linear_bias_fallbacks() == fallbacks;
      if (s.k % 8 == 0 && s.n % 8 == 0) EXPECT_TRUE(fused) << what;
      const Grads before = autocast_grads(linear_of, values, upstream, low, false);

      // float64 on the 16-bit operands the GEMMs read.
      const Tensor x2 = as_low64(values[0], low).reshape({-1, s.k});
      const Tensor u2 = as_low64(upstream, low).reshape({-1, s.n});
      const Tensor w_ref = u2.t().matmul(x2), b_ref = u2.sum({0});
      const Tensor grads_ref[] = {Tensor(), w_ref, b_ref};
      const char* names[] = {"input", "weight", "bias"};
      for (int i : {1, 2}) {
        ASSERT_TRUE(now.of[i].defined()) << what << " " << names[i];
        EXPECT_EQ(now.of[i].dtype(), DType::Float32) << what << " " << names[i];
        EXPECT_EQ(before.of[i].dtype(), DType::Float32) << what << " " << names[i];
        EXPECT_EQ(now.of[i].sizes(), values[i].sizes()) << what << " " << names[i];
        const double err_now = normalized_error(now.of[i], grads_ref[i]);
        const double err_before = normalized_error(before.of[i], grads_ref[i]);
        EXPECT_LE(err_now, parity_tolerance(low)) << what << " " << names[i];
        EXPECT_LE(err_before, parity_tolerance(low)) << what << " " << names[i];
        EXPECT_LE(normalized_error(now.of[i], before.of[i]), parity_tolerance(low)) << what << " " << names[i];
        if (fused) {
          EXPECT_LE(err_now, kFloat32Accumulation) << what << " " << names[i] << ": float32 accumulation, no 16-bit rounding";
          EXPECT_LE(err_now, err_before) << what << " " << names[i] << ": one rounding fewer";
        }
      }
      EXPECT_TRUE(now.of[1].is_contiguous()) << what << ": row-major like the weight";
      EXPECT_EQ(normalized_error(now.of[0], before.of[0]), 0.0) << what << ": the input's gradient is unchanged";
    }
  }
}

TEST(LinearFloat32GradsCuda, Float32AndSixteenBitLeavesKeepTheirGradientDtypes) {
  SUBLET_SKIP_WITHOUT_GPU("the fused linear without autocast and with 16-bit leaves");
  const std::vector<Tensor> values = {random64({6, 16}, 200), random64({8, 16}, 201), random64({8}, 202)};
  const Tensor upstream = random64({6, 8}, 203);
  // Without autocast: float32 throughout, as before.
  std::vector<Tensor> leaves;
  for (const Tensor& v : values) leaves.push_back(on_gpu_leaf(v));
  F::linear(leaves[0], leaves[1], leaves[2]).mul(upstream.to(DType::Float32).to(Device::cuda(0))).sum().backward();
  EXPECT_EQ(leaves[1].grad().dtype(), DType::Float32);
  EXPECT_LE(normalized_error(leaves[1].grad(), upstream.t().matmul(values[0].to(DType::Float32).to(DType::Float64))),
            1e-5);
  // 16-bit leaves under autocast: nothing to cast, 16-bit gradients.
  Tensor w = values[1].to(DType::BFloat16).to(Device::cuda(0)), b = values[2].to(DType::BFloat16).to(Device::cuda(0));
  w.requires_grad_(true);
  b.requires_grad_(true);
  Tensor out;
  {
    AutocastGuard autocast(DType::BFloat16);
    out = F::linear(values[0].to(DType::Float32).to(Device::cuda(0)), w, b);
  }
  out.sum().backward();
  EXPECT_EQ(w.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(b.grad().dtype(), DType::BFloat16);
}

std::size_t autocast_allocations(const memory::AllocationHistory& history, std::size_t bytes) {
  std::size_t n = 0;
  for (const memory::HistoryEvent& e : history.events()) {
    if (e.kind == memory::AllocatorEventKind::Alloc && e.category == memory::BlockCategory::Autocast &&
        e.requested_size == bytes) {
      ++n;
    }
  }
  return n;
}

// The fused linear (with a bias) and the two-node one (without) share one weight, in both orders:
// one cast of it per guard, and its gradient the sum of both uses.
TEST(LinearFloat32GradsCuda, AWeightSharedWithTheUnfusedLinearIsCastOnce) {
  SUBLET_SKIP_WITHOUT_GPU("the weight-cast cache shared by the fused and the unfused linear");
  for (bool fused_first : {true, false}) {
    const std::string what = fused_first ? "fused first" : "unfused first";
    auto& allocator = memory::allocator_for(Device::cuda(0));
    memory::AllocationHistory history;
    history.attach(allocator);
    const Tensor xv = random64({6, 40}, 300), wv = random64({24, 40}, 301), bv = random64({24}, 302);
    const Tensor x = xv.to(DType::Float32).to(Device::cuda(0));
    const Tensor w = on_gpu_leaf(wv), b = on_gpu_leaf(bv);
    Tensor y;
    {
      AutocastGuard autocast(DType::BFloat16);
      if (fused_first) {
        y = F::linear(x, w, b).sum() + F::linear(x, w, Tensor()).sum();
      } else {
        y = F::linear(x, w, Tensor()).sum() + F::linear(x, w, b).sum();
      }
      EXPECT_EQ(amp::autocast_cached_casts(), 2u) << what << ": the weight and the bias";
    }
    history.detach();
    EXPECT_EQ(autocast_allocations(history, 24 * 40 * 2), 1u) << what << ": the weight is cast once";
    y.backward();
    ASSERT_TRUE(w.grad().defined()) << what;
    EXPECT_EQ(w.grad().dtype(), DType::Float32) << what;
    // Each use contributes 1^T x (x as bfloat16) to every row of the weight's gradient.
    const Tensor x_low = as_low64(xv, DType::BFloat16);
    const Tensor expected = ones({24, 6}, DType::Float64).matmul(x_low).mul(2.0);
    EXPECT_LE(normalized_error(w.grad(), expected), parity_tolerance(DType::BFloat16)) << what;
    EXPECT_LE(normalized_error(b.grad(), full({24}, 6.0, DType::Float64)), kFloat32Accumulation) << what;
  }
}

struct MlpShape {
  Shape rows;
  std::int64_t in, hidden, out;
};

std::vector<Tensor> mlp_values(const MlpShape& s, std::uint64_t seed) {
  Shape input_sizes = s.rows;
  input_sizes.push_back(s.in);
  return {random64(input_sizes, seed), random64({s.hidden, s.in}, seed + 1).mul(1.0 / std::sqrt(double(s.in))),
          random64({s.hidden}, seed + 2).mul(0.5),
          random64({s.out, s.hidden}, seed + 3).mul(1.0 / std::sqrt(double(s.hidden))),
          random64({s.out}, seed + 4).mul(0.5)};
}

// The fused node where cuBLASLt takes the shape, else the three ops (counted by linear_gelu_fallbacks).
Tensor mlp_fused(const std::vector<Tensor>& in) { return F::linear_gelu_linear(in[0], in[1], in[2], in[3], in[4]); }

Tensor mlp_reference(const std::vector<Tensor>& in) {
  return F::linear(F::gelu(F::linear(in[0], in[1], in[2]), F::GeluApproximate::Tanh), in[3], in[4]);
}

TEST(LinearFloat32GradsCuda, FusedMlpWritesFloat32GradientsOfAllFourParameters) {
  SUBLET_SKIP_WITHOUT_GPU("linear_gelu_linear's float32 weight and bias gradients under autocast");
  const ScopedTuning epilogue([](TuningOptions& t) { t.gelu_epilogue = true; });  // the fused node, whatever the default
  const std::vector<MlpShape> shapes = {{{3, 16}, 64, 256, 64}, {{5}, 24, 40, 17}, {{1}, 8, 8, 1}};
  std::uint64_t seed = 400;
  for (DType low : {DType::BFloat16, DType::Float16}) {
    for (const MlpShape& s : shapes) {
      const std::string what = std::string(dtype_name(low)) + " rows " + shape_str(s.rows) + ", " +
                               std::to_string(s.in) + " -> " + std::to_string(s.hidden) + " -> " +
                               std::to_string(s.out);
      const std::vector<Tensor> values = mlp_values(s, seed);
      Shape out_sizes = s.rows;
      out_sizes.push_back(s.out);
      const Tensor upstream = random64(out_sizes, seed + 5);
      seed += 6;
      const std::int64_t gelu_fallbacks = ops::linear_gelu_fallbacks();
      const std::int64_t linear_fallbacks = ops::linear_bias_fallbacks();
      const Grads now = autocast_grads(mlp_fused, values, upstream, low, true);
      if (&s == &shapes.front()) {
        EXPECT_EQ(ops::linear_gelu_fallbacks(), gelu_fallbacks) << what << ": the fused MLP takes GPT-like widths";
        EXPECT_EQ(ops::linear_bias_fallbacks(), linear_fallbacks) << what << ": and the float32 gradient GEMMs";
      }
      const Grads before = autocast_grads(mlp_fused, values, upstream, low, false);

      // float64 on the 16-bit operands; the forward's 16-bit activations make bfloat16's error.
      std::vector<Tensor> cpu;
      for (const Tensor& v : values) {
        Tensor c = as_low64(v, low);
        c.requires_grad_(true);
        cpu.push_back(c);
      }
      mlp_reference(cpu).mul(as_low64(upstream, low)).sum().backward();
      const double tolerance = low == DType::BFloat16 ? 4e-2 : 1e-2;
      const char* names[] = {"input", "fc weight", "fc bias", "proj weight", "proj bias"};
      for (std::size_t i = 1; i < values.size(); ++i) {
        ASSERT_TRUE(now.of[i].defined()) << what << " " << names[i];
        EXPECT_EQ(now.of[i].dtype(), DType::Float32) << what << " " << names[i];
        EXPECT_EQ(now.of[i].sizes(), values[i].sizes()) << what << " " << names[i];
        EXPECT_LE(normalized_error(now.of[i], cpu[i].grad()), tolerance) << what << " " << names[i];
        EXPECT_LE(normalized_error(now.of[i], before.of[i]), parity_tolerance(low)) << what << " " << names[i];
      }
      EXPECT_EQ(normalized_error(now.of[0], before.of[0]), 0.0) << what << ": the input's gradient is unchanged";
    }
  }
}

// Losses of a small GPT over a few AdamW steps under bfloat16 autocast, float32 gradients on and
// off: the same first loss bits (the forward is the same), later losses within bfloat16's rounding
// of the gradients.
std::vector<float> gpt_losses(bool float32_gradients, std::vector<DType>* grad_dtypes) {
  const ScopedTuning scope([&](TuningOptions& t) { t.float32_weight_gradients = float32_gradients; });
  models::GPTConfig config;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 64;
  config.block_size = 32;
  config.vocab_size = 96;
  config.seed = 11;
  models::GPT model(config);
  model.to(Device::cuda(0));
  optim::AdamW optimizer(model.parameters(), optim::AdamOptions(3e-3));
  std::vector<std::int64_t> ids(4 * 33);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 37 + i / 7) % 96);
  const Tensor tokens = Tensor::from_vector(ids, {4, 33}).to(Device::cuda(0));
  const Tensor inputs = tokens.narrow(1, 0, 32).contiguous(), targets = tokens.narrow(1, 1, 32).contiguous();
  std::vector<float> losses;
  for (int step = 0; step < 4; ++step) {
    model.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DType::BFloat16);
      loss = F::cross_entropy(model(inputs).reshape({-1, 96}), targets.reshape({-1}));
    }
    loss.backward();
    if (step == 0) {
      for (const Tensor& p : model.parameters()) grad_dtypes->push_back(p.grad().dtype());
    }
    optimizer.step();
    losses.push_back(loss.to(Device::cpu()).to(DType::Float32).item<float>());
  }
  return losses;
}

TEST(LinearFloat32GradsCuda, GptLossesAgreeWithTheSwitchOnAndOff) {
  SUBLET_SKIP_WITHOUT_GPU("GPT training steps with float32 weight gradients on and off");
  std::vector<DType> dtypes_now, dtypes_before;
  const std::vector<float> now = gpt_losses(true, &dtypes_now);
  const std::vector<float> before = gpt_losses(false, &dtypes_before);
  ASSERT_EQ(now.size(), before.size());
  EXPECT_EQ(now[0], before[0]) << "the forward does not depend on the switch";
  for (std::size_t i = 0; i < now.size(); ++i) {
    EXPECT_TRUE(std::isfinite(now[i])) << "step " << i;
    EXPECT_NEAR(now[i], before[i], 1e-2 * std::fabs(before[i])) << "step " << i;
  }
  EXPECT_LT(now.back(), now.front()) << "it learns";
  for (DType d : dtypes_now) EXPECT_EQ(d, DType::Float32);
  EXPECT_EQ(dtypes_now, dtypes_before);
}

}  // namespace
}  // namespace sublet
