// linear_gelu_linear off CUDA: the fused form never applies on the CPU, so the result and all
// five gradients are exactly the three ops'; mismatched operands raise the three ops' errors.
// GPT's MLP on the CPU still runs its submodules (their hooks fire) and matches the function.
// The fused CUDA path: test_linear_gelu_cuda.
#include <gtest/gtest.h>

#include <vector>

#include "core/errors.h"
#include "models/gpt.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::random64;

std::vector<Tensor> operands(std::uint64_t seed) {
  return {random64({2, 3, 12}, seed, true), random64({20, 12}, seed + 1, true), random64({20}, seed + 2, true),
          random64({5, 20}, seed + 3, true), random64({5}, seed + 4, true)};
}

Tensor three_ops(const std::vector<Tensor>& in) {
  return F::linear(F::gelu(F::linear(in[0], in[1], in[2]), F::GeluApproximate::Tanh), in[3], in[4]);
}

TEST(LinearGeluLinear, OnTheCpuIsExactlyTheThreeOps) {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    std::vector<Tensor> a, b;
    for (const Tensor& t : operands(1)) {
      a.push_back(t.detach().to(dtype).requires_grad_(true));
      b.push_back(t.detach().to(dtype).requires_grad_(true));
    }
    EXPECT_FALSE(F::linear_gelu_linear_fused(a[0], a[1], a[2], a[3], a[4]).defined()) << dtype_name(dtype);
    const Tensor out = F::linear_gelu_linear(a[0], a[1], a[2], a[3], a[4]);
    const Tensor reference = three_ops(b);
    ASSERT_EQ(out.sizes(), (Shape{2, 3, 5}));
    EXPECT_EQ(out.to_vector<double>(), reference.to_vector<double>()) << dtype_name(dtype);
    const Tensor upstream = random64({2, 3, 5}, 9).to(dtype);
    out.mul(upstream).sum().backward();
    reference.mul(upstream).sum().backward();
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].grad().defined()) << i;
      EXPECT_EQ(a[i].grad().to_vector<double>(), b[i].grad().to_vector<double>())
          << dtype_name(dtype) << " operand " << i;
    }
  }
}

TEST(LinearGeluLinear, MismatchedOperandsRaiseTheLinearErrors) {
  const std::vector<Tensor> in = operands(20);
  // c_proj expects 19 hidden features, c_fc makes 20.
  EXPECT_THROW(F::linear_gelu_linear(in[0], in[1], in[2], random64({5, 19}, 30), in[4]), ShapeError);
  // A bias of the wrong length.
  EXPECT_THROW(F::linear_gelu_linear(in[0], in[1], random64({7}, 31), in[3], in[4]), ShapeError);
  // The input's last dimension is not c_fc's in_features.
  EXPECT_THROW(F::linear_gelu_linear(random64({4, 11}, 32), in[1], in[2], in[3], in[4]), ShapeError);
}

TEST(LinearGeluLinear, GptMlpOnTheCpuRunsItsModulesAndMatchesTheFunction) {
  models::GPTConfig config;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 16;
  config.block_size = 8;
  config.vocab_size = 32;
  Generator generator(3);
  models::MLP mlp(config, generator);
  int fc_calls = 0, gelu_calls = 0;
  mlp.c_fc->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++fc_calls; });
  mlp.gelu->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor&) { ++gelu_calls; });
  const Tensor x = random64({2, 4, 16}, 40).to(DType::Float32);
  const Tensor out = mlp(x);
  EXPECT_EQ(fc_calls, 1);
  EXPECT_EQ(gelu_calls, 1);
  const Tensor expected =
      F::linear_gelu_linear(x, mlp.c_fc->weight, mlp.c_fc->bias, mlp.c_proj->weight, mlp.c_proj->bias);
  EXPECT_EQ(out.to_vector<float>(), expected.to_vector<float>());
}

}  // namespace
}  // namespace sublet
