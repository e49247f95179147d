// The autograd engine: gradients, accumulation, retain_graph, grad mode, multi-output nodes,
// custom ops through record(), hooks, and very deep graphs.
#include <algorithm>

#include "core/errors.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using autograd::TensorList;

Tensor param(std::vector<double> values, const Shape& sizes) {
  return Tensor::from_vector(values, sizes, TensorOptions().requires_grad(true));
}

TEST(Autograd, HandComputedGradients) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor y = param({4, 5, 6}, {3});
  // z = sum(x * y + x^2) -> dz/dx = y + 2x, dz/dy = x
  Tensor z = (x * y + x.pow(2.0)).sum();
  EXPECT_EQ(z.grad_fn()->name(), "sum");
  z.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 9, 12}));
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(x.grad().storage().category(), memory::BlockCategory::Gradient);
}

// An op whose backward gives 5 x its incoming gradient, added into the gradient already collected
// for its input when the engine offers one (BackwardContext::gradient_sum_target), as a convolution's
// input pass does with cuDNN's beta = 1.
Tensor times_five_summing_in_place(const Tensor& input, std::vector<bool>& offered) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = input * 5.0;
  }
  autograd::record("times_five", {input}, {out},
                   [&offered](const TensorList& grads, const autograd::BackwardContext& context) {
    Tensor target = context.gradient_sum_target(0);
    offered.push_back(target.defined());
    if (!target.defined()) return TensorList{grads[0] * 5.0};
    target.add_(grads[0], 5.0);
    return TensorList{target};
  });
  return out;
}

TEST(Autograd, ANodeMayAddItsGradientIntoTheOneAlreadyCollected) {
  Tensor x = param({1, 2, 3}, {3});
  const Tensor h = x * 2.0;  // h's gradient is collected from the two ops below
  std::vector<bool> offered;
  const Tensor first = times_five_summing_in_place(h, offered);
  const Tensor second = times_five_summing_in_place(h, offered);
  (first + second).sum().backward();
  // The later op runs first and finds nothing collected; the earlier one adds into its result.
  EXPECT_EQ(offered, (std::vector<bool>{false, true}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{20, 20, 20}));  // 2 x (5 + 5), added once
}

TEST(Autograd, NoGradientIsOfferedWhenShared) {
  Tensor x = param({1, 2}, {2});
  const Tensor h = x * 1.0;
  std::vector<bool> offered;
  const Tensor summed = times_five_summing_in_place(h, offered);
  // h is also a root, with a gradient the caller still holds: it is h's collected gradient when
  // times_five runs, and adding into it would change the caller's tensor.
  const Tensor h_grad = ones({2}, DType::Float64);
  autograd::backward({h, summed}, {h_grad, ones({2}, DType::Float64)});
  EXPECT_EQ(offered, (std::vector<bool>{false}));
  EXPECT_EQ(h_grad.to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));  // 1 + 5
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = param({1, -2}, {2});
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6, 6}));
  x.set_grad(Tensor());
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, -4}));
}

TEST(Autograd, SharedSubexpressionAndBroadcastGradients) {
  Tensor w = param({1, 2, 3}, {3});
  Tensor b = param({0.5}, {1});
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor h = x * w + b;          // w and b broadcast over rows
  Tensor loss = (h * h).sum();   // h used twice
  loss.backward();
  // dL/dh = 2h; dL/dw[j] = sum_i 2 h[i,j] x[i,j]; dL/db = sum 2h
  const auto hv = (x * w.detach() + 0.5).to_vector<double>();
  const auto xv = x.to_vector<double>();
  double db = 0;
  for (int j = 0; j < 3; ++j) {
    const double want = 2 * hv[j] * xv[j] + 2 * hv[3 + j] * xv[3 + j];
    EXPECT_DOUBLE_EQ(w.grad().to_vector<double>()[j], want);
  }
  for (double v : hv) db += 2 * v;
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), db);
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = param({2}, {1});
  Tensor y = x.exp().sum();
  y.backward({}, true);
  y.backward();
  EXPECT_NEAR(x.grad().item<double>(), 2 * std::exp(2.0), 1e-12);
  testing::expect_throw_with([&] { y.backward(); }, {"retain_graph", "sum"});
}

TEST(Autograd, NoGradDetachAndLeafRules) {
  Tensor x = param({1, 2}, {2});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  Tensor y = x * 2.0;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  const Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.storage().is_same(y.storage()));
  EXPECT_THROW(y.requires_grad_(false), ValueError);
  testing::expect_throw_with([&] { d.sum().backward(); }, {"does not require grad"});
  testing::expect_throw_with([&] { y.backward(); }, {"one-element", "[2]"});
  // A non-scalar root with an explicit gradient.
  y.backward(Tensor::from_vector(std::vector<double>{1, 10}, {2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 20}));
}

TEST(Autograd, MultiOutputNodeWithIndices) {
  Tensor x = param({1, 5, 3, 7, 2, 4}, {2, 3});
  auto [values, indices] = x.max(1);
  EXPECT_TRUE(values.requires_grad());
  EXPECT_FALSE(indices.requires_grad());
  ASSERT_NE(values.grad_fn(), nullptr);
  EXPECT_EQ(values.grad_fn()->name(), "max");
  (values * 2.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 2, 0, 2, 0, 0}));
}

// A custom op with two outputs defined through record(), only one of which is used: the other
// output's gradient arrives as zeros.
std::pair<Tensor, Tensor> split_scale(const Tensor& x) {
  Tensor a, b;
  {
    NoGradGuard no_grad;
    a = x * 2.0;
    b = x * 3.0;
  }
  autograd::record("split_scale", {x}, {a, b}, [](const TensorList& g) {
    EXPECT_EQ(g.size(), 2u);
    EXPECT_TRUE(g[0].defined() && g[1].defined());
    return TensorList{g[0] * 2.0 + g[1] * 3.0};
  });
  return {a, b};
}

TEST(Autograd, CustomMultiOutputOp) {
  Tensor x = param({1, 1}, {2});
  auto [a, b] = split_scale(x);
  EXPECT_EQ(a.grad_fn(), b.grad_fn());
  EXPECT_EQ(b.output_nr(), 1u);
  b.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 3}));
}

// Two gradients meet at h: the engine sums them into the buffered one in place when only its
// buffer holds it, and otherwise into a new tensor: a gradient that a backward function hands out
// while keeping a handle (here the test's `kept`) must not change.
TEST(Autograd, GradientSumsInPlaceOnlyIntoTensorsNobodyElseHolds) {
  Tensor x = param({1, 2}, {2});
  Tensor h = x * 1.0;
  Tensor fresh = (h * 3.0 + h * 5.0).sum();  // both of h's gradients are new tensors
  fresh.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{8, 8}));

  Tensor y = param({1, 2}, {2});
  Tensor g = y * 1.0;
  const Tensor kept = Tensor::from_vector(std::vector<double>{10, 20}, {2});
  Tensor b = g * 4.0;  // recorded first: its gradient reaches g second
  Tensor a;
  {
    NoGradGuard no_grad;
    a = g * 1.0;
  }
  autograd::record("hands_out_kept", {g}, {a}, [kept](const TensorList&) { return TensorList{kept}; });
  (a + b).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{14, 24}));
  EXPECT_EQ(kept.to_vector<double>(), (std::vector<double>{10, 20}));
}

TEST(Autograd, WrongGradientShapeIsReported) {
  Tensor x = param({1, 2, 3}, {3});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * 1.0;
  }
  autograd::record("broken_op", {x}, {y}, [](const TensorList&) { return TensorList{ones({2}, DType::Float64)}; });
  testing::expect_throw_with([&] { y.sum().backward(); }, {"broken_op", "[2]", "[3]"});
}

TEST(Autograd, RecordRefusesAnInputAsOutput) {
  // Attaching a grad_fn to an input would turn a leaf into a non-leaf and loop the graph.
  Tensor x = param({1, 2}, {2});
  testing::expect_throw_with(
      [&] { autograd::record("identity", {x}, {x}, [](const TensorList& g) { return g; }); }, {"identity", "detach"});
  EXPECT_TRUE(x.is_leaf());
}

TEST(Autograd, NodeHooksAndHookPoint) {
  Tensor x = param({1, 2}, {2});
  Tensor h = x * 3.0;
  std::vector<std::string> order;
  Tensor seen_grad;
  h.grad_fn()->register_pre_hook([&](const TensorList& g) {
    order.push_back("pre");
    seen_grad = g[0];
  });
  h.grad_fn()->register_post_hook([&](const TensorList& gi, const TensorList&) {
    order.push_back("post");
    EXPECT_EQ(gi[0].to_vector<double>(), (std::vector<double>{18, 36}));
  });
  auto outs = autograd::hook_point("module_out", {h}, [&](const TensorList& g) {
    order.push_back("module");
    EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{6, 12}));
  });
  EXPECT_TRUE(outs[0].storage().is_same(h.storage()));
  (outs[0] * outs[0]).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"module", "pre", "post"}));
  EXPECT_EQ(seen_grad.to_vector<double>(), (std::vector<double>{6, 12}));
  EXPECT_EQ(seen_grad.storage().category(), memory::BlockCategory::Gradient);  // made by backward
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{18, 36}));
}

TEST(Autograd, HookPointPassesUntrackedTensorsThrough) {
  Tensor x = param({1, 2}, {2});
  const Tensor data = ones({2}, DType::Float64);
  TensorList seen;
  auto outs = autograd::hook_point("pair", {data, x}, [&](const TensorList& g) { seen = g; });
  EXPECT_TRUE(outs[0].is_same(data));
  EXPECT_FALSE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].is_same(x));
  (outs[0] * outs[1]).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[0].defined());
  EXPECT_EQ(seen[1].to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(Autograd, ModifyingASavedTensorInPlaceIsCaught) {
  Tensor w = param({1, 2}, {2});
  Tensor x = Tensor::from_vector(std::vector<double>{3, 4}, {2});
  Tensor loss = (x * w).sum();  // mul saves x (for w's gradient)
  x.mul_(10.0);                 // x does not require grad: allowed, but the saved alias goes stale
  testing::expect_throw_with([&] { loss.backward(); }, {"modified in place", "[2]"});
  // Out-of-place updates and updates after backward are fine.
  Tensor y = Tensor::from_vector(std::vector<double>{3, 4}, {2});
  Tensor loss2 = (y * w).sum();
  loss2.backward();
  y.mul_(10.0);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3, 4}));
}

TEST(Autograd, DeepChainRunsWithoutRecursion) {
  Tensor x = param({1.0}, {1});
  Tensor h = x;
  constexpr int kDepth = 100000;
  for (int i = 0; i < kDepth; ++i) h = h + 1e-6;
  h.sum().backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 1.0);
  h = Tensor();  // destroying the 100k-node graph must not recurse either
  SUCCEED();
}

TEST(Autograd, ViewGradients) {
  Tensor x = param({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x.t().narrow(0, 1, 2).reshape({4}) * Tensor::from_vector(std::vector<double>{1, 10, 100, 1000}, {4});
  y.sum().backward();
  // x.t() = [[1,4],[2,5],[3,6]]; rows 1..2 = [2,5,3,6] -> x positions (0,1),(1,1),(0,2),(1,2)
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 100, 0, 10, 1000}));
}

}  // namespace
}  // namespace sublet
