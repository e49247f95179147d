// nn::Module: registration and dotted names, train/eval, hooks, zero_grad, in-place conversion.
#include "core/errors.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/linear.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

class Block : public nn::Module {
 public:
  Block() : Module("Block") {
    scale = register_parameter("scale", ones({4}));
    running = register_buffer("running", zeros({4}));
    fc = register_module("fc", std::make_shared<nn::Linear>(4, 3));
  }
  Tensor forward(const Tensor& x) override { return (*fc)(x * scale); }
  Tensor scale, running;
  std::shared_ptr<nn::Linear> fc;
};

std::vector<std::string> names(const nn::Module::NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& [name, t] : list) out.push_back(name);
  return out;
}

TEST(Module, DottedNamesInRegistrationOrder) {
  nn::Sequential net;
  net.push_back(std::make_shared<Block>());
  net.push_back(std::make_shared<nn::Linear>(3, 2));
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"0.scale", "0.fc.weight", "0.fc.bias", "1.weight", "1.bias"}));
  EXPECT_EQ(names(net.named_buffers()), (std::vector<std::string>{"0.running"}));
  EXPECT_TRUE(net.named_parameters(false).empty());
  std::vector<std::string> modules;
  for (auto& [name, m] : net.named_modules()) modules.push_back(name + ":" + m->type_name());
  EXPECT_EQ(modules, (std::vector<std::string>{":Sequential", "0:Block", "0.fc:Linear", "1:Linear"}));
  for (const auto& p : net.parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_EQ(p.storage().category(), memory::BlockCategory::Parameter);
  }
}

TEST(Module, RejectsBadOrRepeatedNames) {
  Block b;
  EXPECT_THROW(b.register_parameter("scale", ones({1})), ValueError);
  EXPECT_THROW(b.register_buffer("fc", ones({1})), ValueError);
  EXPECT_THROW(b.register_parameter("a.b", ones({1})), ValueError);
  EXPECT_THROW(b.parameter("missing"), ValueError);
}

TEST(Module, TrainEvalPropagates) {
  nn::Sequential net;
  auto block = net.push_back(std::make_shared<Block>());
  EXPECT_TRUE(block->fc->is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(block->fc->is_training());
  net.train();
  EXPECT_TRUE(block->fc->is_training());
}

TEST(Module, LinearComputesAffineMap) {
  Generator g(1);
  nn::Linear fc(nn::LinearOptions(5, 3).dtype(DType::Float64), g);
  const Tensor x = testing::random64({4, 5}, 2);
  const auto got = fc(x).to_vector<double>();
  const auto w = fc.weight.to_vector<double>(), b = fc.bias.to_vector<double>(), xv = x.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 3; ++o) {
      double want = b[o];
      for (int k = 0; k < 5; ++k) want += xv[i * 5 + k] * w[o * 5 + k];
      EXPECT_NEAR(got[i * 3 + o], want, 1e-12);
    }
  const double bound = 1 / std::sqrt(5.0);
  for (double v : w) EXPECT_LE(std::abs(v), bound);
  EXPECT_THROW(fc(testing::random64({4, 6}, 3)), ShapeError);
}

TEST(Module, ForwardHooksSeeInputsAndOutputsAndCanBeRemoved) {
  Block b;
  int pre = 0, post = 0;
  Shape seen_out;
  const auto id = b.register_forward_pre_hook([&](nn::Module& m, const Tensor& in) {
    EXPECT_EQ(&m, &b);
    EXPECT_EQ(in.sizes(), (Shape{2, 4}));
    ++pre;
  });
  b.fc->register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
    seen_out = out.sizes();
    ++post;
  });
  b(ones({2, 4}));
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 1);
  EXPECT_EQ(seen_out, (Shape{2, 3}));
  b.remove_hook(id);
  b(ones({2, 4}));
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 2);
}

// BatchNorm2d::forward_relu is the module's other entry point (ResNet blocks call it in place of
// bn then relu): the module's hooks fire for it, a training batch is counted, and it computes
// relu(bn(x) + residual).
TEST(Module, BatchNormForwardReluRunsTheHooksAndCountsTheBatch) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).dtype(DType::Float64));
  int pre = 0, post = 0, backward = 0;
  bn.register_forward_pre_hook([&](nn::Module&, const Tensor&) { ++pre; });
  bn.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
    EXPECT_EQ(out.sizes(), (Shape{2, 3, 4, 4}));
    ++post;
  });
  bn.register_backward_hook([&](nn::Module&, const Tensor& gi, const Tensor&) {
    EXPECT_TRUE(gi.defined());
    ++backward;
  });
  const Tensor x = testing::random64({2, 3, 4, 4}, 8, true), residual = testing::random64({2, 3, 4, 4}, 9);
  const Tensor out = bn.forward_relu(x, residual);
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 1);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
  out.sum().backward();
  EXPECT_EQ(backward, 1);
  nn::BatchNorm2d reference(nn::BatchNorm2dOptions(3).dtype(DType::Float64));
  const Tensor expected = reference(x.detach()).add(residual).relu();
  EXPECT_LE(out.detach().sub(expected).pow(2.0).max().sqrt().item<double>(), 1e-12);
  EXPECT_LE(bn.running_var.sub(reference.running_var).pow(2.0).max().sqrt().item<double>(), 1e-12);
}

TEST(Module, BackwardHooksFireInReverseLayerOrder) {
  nn::Sequential net;
  auto first = net.push_back(std::make_shared<nn::Linear>(4, 3));
  auto second = net.push_back(std::make_shared<nn::Linear>(3, 2));
  std::vector<std::string> events;
  Tensor second_grad_input, first_grad_output;
  for (auto [name, layer] : {std::pair{"first", first}, std::pair{"second", second}}) {
    const std::string n = name;
    layer->register_backward_pre_hook([&events, n](nn::Module&, const Tensor& g) {
      events.push_back(n + ".pre");
      EXPECT_TRUE(g.defined());
    });
    layer->register_backward_hook([&, n](nn::Module&, const Tensor& gi, const Tensor& go) {
      events.push_back(n + ".post");
      EXPECT_TRUE(go.defined());
      if (n == "second") second_grad_input = gi;
      if (n == "first") {
        EXPECT_FALSE(gi.defined());  // the data input does not require grad
        first_grad_output = go;
      }
    });
  }
  const Tensor x = testing::random32({5, 4}, 7);
  net(x).pow(2.0).sum().backward();
  EXPECT_EQ(events, (std::vector<std::string>{"second.pre", "second.post", "first.pre", "first.post"}));
  // What reached the second layer's input is what left the first layer's output.
  ASSERT_TRUE(second_grad_input.defined());
  EXPECT_EQ(second_grad_input.to_vector<float>(), first_grad_output.to_vector<float>());
  EXPECT_TRUE(first->weight.grad().defined());
}

TEST(Module, StateDictRoundTrip) {
  Generator g1(1), g2(2);
  nn::Sequential a, b;
  a.push_back(std::make_shared<nn::Linear>(nn::LinearOptions(4, 3), g1));
  b.push_back(std::make_shared<nn::Linear>(nn::LinearOptions(4, 3), g2));
  const Tensor x = testing::random32({2, 4}, 3);
  EXPECT_NE(a(x).to_vector<float>(), b(x).to_vector<float>());
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(a(x).to_vector<float>(), b(x).to_vector<float>());
  EXPECT_FALSE(b.parameters()[0].storage().is_same(a.parameters()[0].storage()));  // copied
  auto partial = a.state_dict();
  partial.pop_back();
  partial.emplace_back("0.extra", zeros({1}));
  testing::expect_throw_with([&] { b.load_state_dict(partial); }, {"missing [0.bias]", "unexpected [0.extra]"});
  b.load_state_dict(partial, false);  // non-strict: loads what matches
  auto wrong = a.state_dict();
  wrong[0].second = zeros({3, 5});
  testing::expect_throw_with([&] { b.load_state_dict(wrong); }, {"0.weight", "[3, 5]", "[3, 4]"});
  Block block;
  EXPECT_EQ(names(block.state_dict()), (std::vector<std::string>{"scale", "fc.weight", "fc.bias", "running"}));
}

TEST(Module, BackwardAfterTheModuleIsGoneSkipsItsHooks) {
  int calls = 0;
  Tensor loss, weight;
  {
    auto fc = std::make_shared<nn::Linear>(3, 2);
    fc->register_backward_pre_hook([&](nn::Module&, const Tensor&) { ++calls; });
    weight = fc->weight;
    loss = (*fc)(ones({4, 3})).sum();
  }
  loss.backward();
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(weight.grad().defined());
}

TEST(Module, ZeroGradFreesGradientsAndToConvertsInPlace) {
  Block b;
  Tensor held = b.fc->weight;  // e.g. an optimizer's handle
  b(ones({2, 4})).sum().backward();
  EXPECT_TRUE(held.grad().defined());
  const std::size_t with_grads = testing::cpu_allocated();
  b.zero_grad();
  EXPECT_FALSE(held.grad().defined());
  EXPECT_LT(testing::cpu_allocated(), with_grads);
  const auto before = held.to_vector<double>();
  b.to(DType::Float64);
  EXPECT_EQ(held.dtype(), DType::Float64);
  EXPECT_EQ(b.running.dtype(), DType::Float64);
  EXPECT_EQ(held.to_vector<double>(), before);
  EXPECT_EQ(held.storage().category(), memory::BlockCategory::Parameter);
  b(ones({2, 4}, DType::Float64)).sum().backward();
  EXPECT_EQ(held.grad().dtype(), DType::Float64);
}

}  // namespace
}  // namespace sublet
