// Memory formats (runtime/memory_format.cpp): the predicates and conversions with PyTorch's tie
// rules, factories and conversions that keep a layout, element-wise ops that keep it (and run it
// as one flat problem), gradients into channels-last leaves, and fused optimizer updates over
// channels-last parameters. Reference: the same computation on NCHW-contiguous tensors.
#include <cmath>

#include "runtime/kernel_args.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/fused_params.h"
#include "runtime/optim/sgd.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::random64;

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;
constexpr MemoryFormat kNCHW = MemoryFormat::Contiguous;

// Largest absolute difference of the logical values; NaN anywhere gives NaN, which fails every
// `<= tol` check below.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double d = std::abs(va[i] - vb[i]);
    if (!(d <= worst)) worst = d;  // keeps a NaN
  }
  return worst;
}

bool is_cl(const Tensor& t) { return t.is_contiguous(kCL); }

TEST(MemoryFormat, ChannelsLastStridesAndPredicates) {
  const Tensor x = random64({2, 3, 4, 5}, 1);
  EXPECT_TRUE(x.is_contiguous(kNCHW));
  EXPECT_FALSE(x.is_contiguous(kCL));
  EXPECT_EQ(x.suggest_memory_format(), kNCHW);
  const Tensor y = x.contiguous(kCL);
  EXPECT_EQ(y.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(y.is_contiguous(kCL));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TRUE(y.is_non_overlapping_and_dense());
  EXPECT_EQ(y.suggest_memory_format(), kCL);
  EXPECT_EQ(max_abs_diff(x, y), 0.0);
  EXPECT_TRUE(y.contiguous(kCL).is_same(y));  // itself when already so
  EXPECT_TRUE(y.to(kCL).is_same(y));
  const Tensor back = y.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(max_abs_diff(x, back), 0.0);
  // The same layout as the permute of an NHWC tensor, as PyTorch defines it.
  const Tensor nhwc = random64({2, 4, 5, 3}, 2).permute({0, 3, 1, 2});
  EXPECT_TRUE(nhwc.is_contiguous(kCL));
  EXPECT_EQ(nhwc.suggest_memory_format(), kCL);
  // A strided (non-dense) view is neither.
  const Tensor sliced = y.slice(3, 0, 5, 2);
  EXPECT_FALSE(sliced.is_contiguous(kCL));
  EXPECT_FALSE(sliced.is_non_overlapping_and_dense());
  EXPECT_THROW(random64({2, 3, 4}, 3).contiguous(kCL), ShapeError);
  EXPECT_FALSE(random64({2, 3, 4}, 3).is_contiguous(kCL));
  EXPECT_EQ(random64({2, 3, 4}, 3).suggest_memory_format(), kNCHW);
}

TEST(MemoryFormat, TiesFollowPyTorch) {
  // C == 1: NCHW-contiguous and channels-last-contiguous at once; the strides decide the
  // suggestion (PyTorch: torch.empty(2,1,4,4) suggests contiguous, .to(channels_last) channels-last).
  const Tensor c1 = random64({2, 1, 4, 4}, 4);
  EXPECT_TRUE(c1.is_contiguous(kCL));
  EXPECT_EQ(c1.suggest_memory_format(), kNCHW);
  const Tensor c1_cl = Tensor::empty({2, 1, 4, 4}, DType::Float64, kCL);
  EXPECT_EQ(c1_cl.strides(), (Shape{16, 1, 4, 1}));
  EXPECT_TRUE(c1_cl.is_contiguous());
  EXPECT_EQ(c1_cl.suggest_memory_format(), kCL);
  // H == W == 1: likewise.
  const Tensor hw1 = random64({2, 3, 1, 1}, 5);
  EXPECT_TRUE(hw1.is_contiguous(kCL));
  EXPECT_EQ(hw1.suggest_memory_format(), kNCHW);
  const Tensor hw1_cl = Tensor::empty({2, 3, 1, 1}, DType::Float64, kCL);
  EXPECT_EQ(hw1_cl.strides(), (Shape{3, 1, 3, 3}));
  EXPECT_TRUE(hw1_cl.is_contiguous());
  EXPECT_EQ(hw1_cl.suggest_memory_format(), kCL);
  // contiguous(format) keeps such a tensor (it is already dense in the format); to(format)
  // gives it the format's strides, as PyTorch's .to(memory_format=...), so it then suggests it.
  EXPECT_TRUE(hw1.contiguous(kCL).is_same(hw1));
  EXPECT_EQ(hw1.to(kCL).strides(), (Shape{3, 1, 3, 3}));
  EXPECT_EQ(hw1.to(kCL).suggest_memory_format(), kCL);
  EXPECT_EQ(c1.to(kCL).suggest_memory_format(), kCL);
  EXPECT_TRUE(hw1_cl.to(kNCHW).is_contiguous());
  EXPECT_EQ(hw1_cl.to(kNCHW).suggest_memory_format(), kNCHW);
  // Flatten after adaptive pooling: a channels-last [N,C,1,1] is also contiguous, so it views.
  EXPECT_EQ(hw1_cl.flatten(1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(hw1_cl.view({2, 3}).strides(), (Shape{3, 1}));
  // N == 1 with a channels-last layout is still channels-last.
  EXPECT_EQ(Tensor::empty({1, 3, 4, 4}, DType::Float64, kCL).suggest_memory_format(), kCL);
}

TEST(MemoryFormat, FactoriesAndConversionsKeepTheLayout) {
  const Tensor x = random64({2, 3, 4, 5}, 6).contiguous(kCL);
  EXPECT_EQ(empty_like(x).strides(), x.strides());
  EXPECT_EQ(zeros_like(x).strides(), x.strides());
  EXPECT_EQ(ones_like(x).strides(), x.strides());
  EXPECT_EQ(ones_like(x).sum().item<double>(), 120.0);
  EXPECT_EQ(x.clone().strides(), x.strides());
  EXPECT_EQ(max_abs_diff(x.clone(), x), 0.0);
  const Tensor f = x.to(DType::Float32);
  EXPECT_TRUE(is_cl(f));
  EXPECT_LE(max_abs_diff(f, x), 1e-6);
  EXPECT_EQ(x.to(Device::cpu()).strides(), x.strides());
  EXPECT_EQ(empty(Shape{2, 3, 4, 5}, TensorOptions(), kCL).strides(), x.strides());
  EXPECT_THROW(Tensor::empty_strided({2, 3}, {4, 1}), ShapeError);  // a gap: not dense
  // copy_ into a channels-last target from an NCHW source keeps the target's layout and values.
  Tensor target = Tensor::empty({2, 3, 4, 5}, DType::Float64, kCL);
  const Tensor source = random64({2, 3, 4, 5}, 7);
  target.copy_(source);
  EXPECT_TRUE(is_cl(target));
  EXPECT_EQ(max_abs_diff(target, source), 0.0);
  target.fill_(2.5);
  EXPECT_EQ(target.sum().item<double>(), 2.5 * 120);
}

TEST(MemoryFormat, ContiguousIsDifferentiable) {
  const Tensor x = random64({2, 3, 4, 5}, 8, true);
  const Tensor w = random64({2, 3, 4, 5}, 9);
  (x.contiguous(kCL) * w).sum().backward();
  EXPECT_EQ(max_abs_diff(x.grad(), w), 0.0);
  EXPECT_TRUE(x.grad().is_contiguous());  // the leaf's own layout
}

TEST(MemoryFormat, CoalescingMakesDenseLayoutsOneFlatRun) {
  const Tensor x = random64({2, 3, 4, 5}, 10).contiguous(kCL);
  const Tensor out = empty_like(x);
  Shape sizes = x.sizes();
  ops::StridedRef o = detail::out_ref(out);
  ops::ConstStridedRef a = detail::in_ref(x);
  ops::ConstStridedRef scalar{x.data_ptr(), Shape{0, 0, 0, 0}};
  detail::coalesce_elementwise(sizes, o, {&a, &scalar});
  EXPECT_EQ(sizes, Shape{120});
  EXPECT_EQ(o.strides, Shape{1});
  EXPECT_EQ(a.strides, Shape{1});
  EXPECT_EQ(scalar.strides, Shape{0});
  // A per-channel operand cannot be flattened; the dims are ordered by the output's strides
  // (N, H, W, C): the channel dimension becomes the innermost, unit-stride one.
  const Tensor bias = random64({1, 3, 1, 1}, 11);
  sizes = x.sizes();
  o = detail::out_ref(out);
  ops::ConstStridedRef b = detail::in_ref("add", bias, x.sizes());
  detail::coalesce_elementwise(sizes, o, {&b});
  EXPECT_EQ(sizes, (Shape{2, 4, 5, 3}));
  EXPECT_EQ(o.strides, (Shape{60, 15, 3, 1}));
  EXPECT_EQ(b.strides, (Shape{0, 0, 0, 1}));
}

TEST(MemoryFormat, ElementwiseOpsKeepChannelsLastAndMatchNchw) {
  const Tensor a = random64({2, 3, 4, 5}, 12);
  const Tensor b = random64({2, 3, 4, 5}, 13);
  const Tensor bias = random64({1, 3, 1, 1}, 14);
  const Tensor ac = a.contiguous(kCL), bc = b.contiguous(kCL);
  struct Case {
    const char* name;
    Tensor nchw, cl;
  };
  const Case cases[] = {
      {"add", a + b, ac + bc},
      {"mul", a * b, ac * bc},
      {"div", a / (b.exp() + 1.0), ac / (bc.exp() + 1.0)},
      {"relu", a.relu(), ac.relu()},
      {"tanh", a.tanh(), ac.tanh()},
      {"clamp", a.clamp(-0.5, 0.5), ac.clamp(-0.5, 0.5)},
      {"maximum", a.maximum(b), ac.maximum(bc)},
      {"bias first", bias + a, bias + ac},  // the first full-size dense operand decides
      {"bias second", a * bias, ac * bias},
      {"scalar", a * 3.0 - 1.0, ac * 3.0 - 1.0},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(is_cl(c.cl)) << c.name << ": " << shape_str(c.cl.strides());
    EXPECT_LE(max_abs_diff(c.nchw, c.cl), 1e-12) << c.name;
  }
  // Mixed layouts follow the first operand, as PyTorch's TensorIterator.
  EXPECT_TRUE((a + bc).is_contiguous());
  EXPECT_TRUE(is_cl(ac + b));
  EXPECT_LE(max_abs_diff(a + bc, a + b), 1e-12);
  // In place: the target keeps its layout, whatever the operands'.
  Tensor t = ac.clone();
  t.add_(b, 2.0).mul_(bc).addcmul_(a, bc, 0.5).clamp_(-1.0, 1.0);
  Tensor r = a.clone();
  r.add_(b, 2.0).mul_(b).addcmul_(a, b, 0.5).clamp_(-1.0, 1.0);
  EXPECT_TRUE(is_cl(t));
  EXPECT_LE(max_abs_diff(t, r), 1e-12);
}

TEST(MemoryFormat, ElementwiseBackwardKeepsChannelsLast) {
  const Tensor a = random64({2, 3, 4, 5}, 15, true);
  const Tensor b = random64({2, 3, 4, 5}, 16, true);
  const Tensor ac = a.detach().contiguous(kCL).requires_grad_();
  const Tensor bc = b.detach().contiguous(kCL).requires_grad_();
  const Tensor up = random64({2, 3, 4, 5}, 17);
  ((a * b).relu().tanh() * up).sum().backward();
  ((ac * bc).relu().tanh() * up).sum().backward();
  EXPECT_TRUE(is_cl(ac.grad()));
  EXPECT_TRUE(is_cl(bc.grad()));
  EXPECT_LE(max_abs_diff(ac.grad(), a.grad()), 1e-12);
  EXPECT_LE(max_abs_diff(bc.grad(), b.grad()), 1e-12);
}

TEST(MemoryFormat, DropoutKeepsTheLayout) {
  const Tensor x = random64({2, 3, 4, 5}, 18).contiguous(kCL).requires_grad_();
  Generator g(3);
  const Tensor y = nn::functional::dropout(x, 0.5, true, g);
  EXPECT_TRUE(is_cl(y));
  y.sum().backward();
  EXPECT_TRUE(is_cl(x.grad()));
  // Kept elements are x / (1 - p) and have gradient 2, dropped ones 0 and 0: the same mask.
  const auto yv = y.to_vector<double>(), xv = x.to_vector<double>(), gv = x.grad().to_vector<double>();
  int kept = 0;
  for (std::size_t i = 0; i < yv.size(); ++i) {
    if (gv[i] == 2.0) {
      ++kept;
      EXPECT_LE(std::abs(yv[i] - 2.0 * xv[i]), 1e-12);
    } else {
      EXPECT_EQ(gv[i], 0.0);
      EXPECT_EQ(yv[i], 0.0);
    }
  }
  EXPECT_GT(kept, 20);
  EXPECT_LT(kept, 100);
}

TEST(MemoryFormat, GradientsAccumulateIntoChannelsLastLeavesInTheirLayout) {
  const Tensor w = random64({4, 3, 2, 2}, 19).contiguous(kCL).requires_grad_();
  const Tensor up = random64({4, 3, 2, 2}, 20);  // NCHW: the incoming gradient is NCHW
  (w * up).sum().backward();
  EXPECT_TRUE(is_cl(w.grad())) << shape_str(w.grad().strides());
  EXPECT_LE(max_abs_diff(w.grad(), up), 1e-12);
  (w * up).sum().backward();  // accumulated in place: still channels-last
  EXPECT_TRUE(is_cl(w.grad()));
  EXPECT_LE(max_abs_diff(w.grad(), up * 2.0), 1e-12);
}

class TwoConvs : public nn::Module {
 public:
  TwoConvs() : Module("TwoConvs") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 4, 3).padding(1)));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 2, 1)));
    scale = register_parameter("scale", ones({2}));
  }
  Tensor forward(const Tensor& x) override {
    return (*conv2)((*conv1)(x).relu()) * scale.view({1, 2, 1, 1});
  }
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  Tensor scale;
};

TEST(MemoryFormat, ModuleToChannelsLastConvertsInPlaceForAnOptimizerMadeBefore) {
  TwoConvs model;
  const Tensor weight_handle = model.conv1->weight;
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  model.to(kCL);
  EXPECT_TRUE(weight_handle.is_same(model.conv1->weight));
  bool optimizer_sees_it = false;
  for (const Tensor& p : optimizer.params()) optimizer_sees_it = optimizer_sees_it || p.is_same(weight_handle);
  EXPECT_TRUE(optimizer_sees_it);
  EXPECT_EQ(weight_handle.suggest_memory_format(), kCL);
  EXPECT_TRUE(weight_handle.requires_grad());
  EXPECT_EQ(weight_handle.storage().category(), memory::BlockCategory::Parameter);
  EXPECT_EQ(model.conv2->weight.suggest_memory_format(), kCL);  // a 1x1 kernel too
  EXPECT_TRUE(model.scale.is_contiguous());  // not 4-D: untouched
}

// Three steps of SGD with momentum or Adam, fused (the flat kernels over channels-last
// buffers) or not, on a copy of the model converted to channels-last after its first step (its
// optimizer state exists in NCHW by then and must follow), against the NCHW original.
template <typename Optimizer, typename Options>
void expect_same_training(const Options& options) {
  TwoConvs nchw, cl;
  cl.load_state_dict(nchw.state_dict());
  Optimizer opt_nchw(nchw.parameters(), options);
  Optimizer opt_cl(cl.parameters(), options);
  const Tensor x = testing::random32({2, 3, 6, 6}, 21);
  const Tensor target = testing::random32({2, 2, 6, 6}, 22);
  for (int step = 0; step < 3; ++step) {
    if (step == 1) cl.to(kCL);
    const Tensor x_cl = step >= 1 ? x.contiguous(kCL) : x;
    opt_nchw.zero_grad();
    opt_cl.zero_grad();
    const Tensor loss_nchw = ((nchw(x) - target) * (nchw(x) - target)).mean();
    const Tensor loss_cl = ((cl(x_cl) - target) * (cl(x_cl) - target)).mean();
    loss_nchw.backward();
    loss_cl.backward();
    EXPECT_LE(std::abs(loss_nchw.item<double>() - loss_cl.item<double>()), 1e-5) << "step " << step;
    if (step >= 1) {
      EXPECT_TRUE(is_cl(cl.conv1->weight.grad())) << "step " << step;
      EXPECT_EQ(cl.conv1->weight.suggest_memory_format(), kCL);
    }
    opt_nchw.step();
    opt_cl.step();
  }
  EXPECT_TRUE(is_cl(cl.conv1->weight));  // updated in place, in its layout
  const auto p_nchw = nchw.parameters();
  const auto p_cl = cl.parameters();
  for (std::size_t i = 0; i < p_nchw.size(); ++i) EXPECT_LE(max_abs_diff(p_nchw[i], p_cl[i]), 1e-5) << i;
}

TEST(MemoryFormat, FusedSgdOverChannelsLastParametersMatchesNchw) {
  expect_same_training<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
}

TEST(MemoryFormat, UnfusedSgdOverChannelsLastParametersMatchesNchw) {
  expect_same_training<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).fused(false));
}

TEST(MemoryFormat, FusedAdamOverChannelsLastParametersMatchesNchw) {
  expect_same_training<optim::Adam>(optim::AdamOptions(1e-2));
}

TEST(MemoryFormat, FusedUpdateSeesChannelsLastParametersAsDense) {
  TwoConvs model;
  model.to(kCL);
  (model(testing::random32({2, 3, 6, 6}, 23)).sum()).backward();
  std::vector<std::size_t> all(model.parameters().size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const auto fused = optim::detail::fused_params(model.parameters(), all);
  ASSERT_TRUE(fused.usable);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(detail::same_layout(fused.grads[i].sizes(), fused.grads[i].strides(), model.parameters()[i].strides()))
        << i;
  }
}

}  // namespace
}  // namespace sublet
