// nn::checkpoint (runtime/nn/checkpoint.h): a checkpointed block gives bit-identical gradients
// on the CPU (dropout included), updates batch norm's running statistics once, and holds less
// memory between forward and backward, and no more than the plain block in backward.
#include <gtest/gtest.h>

#include <memory>

#include "memory/registry.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/checkpoint.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/linear.h"

namespace sublet::nn {
namespace {

struct Net {
  Generator init{3}, drops{11};
  std::shared_ptr<Sequential> block = std::make_shared<Sequential>();
  std::shared_ptr<Conv2d> head;
  Net() {
    block->push_back(std::make_shared<Conv2d>(Conv2dOptions(3, 8, 3).padding(1), init));
    block->push_back(std::make_shared<BatchNorm2d>(8));
    block->push_back(std::make_shared<ReLU>());
    block->push_back(std::make_shared<Dropout>(DropoutOptions(0.3), drops));
    block->push_back(std::make_shared<Conv2d>(Conv2dOptions(8, 8, 3).padding(1), init));
    head = std::make_shared<Conv2d>(Conv2dOptions(8, 2, 3).padding(1), init);
    for (const Tensor& b : block->buffers()) initial_buffers.push_back(b.clone());
  }
  std::vector<Tensor> initial_buffers;  // batch norm's running statistics before any step
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> all = block->parameters();
    for (const Tensor& p : head->parameters()) all.push_back(p);
    return all;
  }
};

struct StepResult {
  std::vector<std::vector<float>> grads, buffers;
  std::vector<float> input_grad;
  std::size_t allocated_between = 0;  // bytes held after forward, before backward
};

// One forward and backward from the same state: the generators and buffers reset first.
StepResult step(Net& net, const Tensor& x, bool checkpointed) {
  net.drops.manual_seed(11);
  {
    NoGradGuard no_grad;
    std::vector<Tensor> buffers = net.block->buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(net.initial_buffers[i]);
  }
  for (Tensor p : net.parameters()) p.set_grad(Tensor());
  Tensor input = x.detach().requires_grad_(true);
  const std::size_t before = memory_allocated(Device::cpu());
  Tensor y;
  {
    Tensor h = checkpointed ? checkpoint(net.block, input) : (*net.block)(input);
    y = (*net.head)(h).pow(2.0).sum();
  }
  StepResult r;
  r.allocated_between = memory_allocated(Device::cpu()) - before;
  y.backward();
  for (const Tensor& p : net.parameters()) r.grads.push_back(p.grad().to_vector<float>());
  for (const Tensor& b : net.block->buffers()) r.buffers.push_back(b.to(DType::Float32).to_vector<float>());
  r.input_grad = input.grad().to_vector<float>();
  return r;
}

TEST(Checkpoint, GradientsAreBitIdenticalWithDropoutAndBatchNorm) {
  Net net;
  Generator data(7);
  const Tensor x = randn({4, 3, 12, 12}, data);
  const StepResult plain = step(net, x, false);
  const StepResult recomputed = step(net, x, true);
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i) EXPECT_EQ(plain.grads[i], recomputed.grads[i]) << "parameter " << i;
  EXPECT_EQ(plain.input_grad, recomputed.input_grad);
  // Running statistics updated once, as without the checkpoint.
  for (std::size_t i = 0; i < plain.buffers.size(); ++i) EXPECT_EQ(plain.buffers[i], recomputed.buffers[i]) << "buffer " << i;
  // The block's inner activations are not held between forward and backward.
  EXPECT_LT(recomputed.allocated_between, plain.allocated_between);
}

// relu(conv2(relu(bn(conv1(x)))) + x): the input is used twice, as a ResNet block's.
class Residual : public Module {
 public:
  explicit Residual(Generator& init) : Module("Residual") {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(Conv2dOptions(8, 8, 3).padding(1), init));
    bn = register_module("bn", std::make_shared<BatchNorm2d>(8));
    conv2 = register_module("conv2", std::make_shared<Conv2d>(Conv2dOptions(8, 8, 3).padding(1), init));
  }
  Tensor forward(const Tensor& x) override { return ((*conv2)((*bn)((*conv1)(x)).relu()) + x).relu(); }
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn;
};

// What backward holds (above what was allocated before the forward) once the block's first
// layer is done, and the gradients.
std::pair<std::size_t, std::vector<std::vector<float>>> held_after_first_layer(const std::shared_ptr<Residual>& block,
                                                                               const Tensor& x, bool checkpointed) {
  for (Tensor p : block->parameters()) p.set_grad(Tensor());
  Tensor input = x.detach().requires_grad_(true);
  const std::size_t before = memory_allocated(Device::cpu());
  std::size_t held = 0;
  const auto hook = block->conv1->register_backward_hook(
      [&](Module&, const Tensor&, const Tensor&) { held = memory_allocated(Device::cpu()) - before; });
  (checkpointed ? checkpoint(block, input) : (*block)(input)).pow(2.0).sum().backward();
  block->conv1->remove_hook(hook);
  std::vector<std::vector<float>> grads{input.grad().to_vector<float>()};
  for (const Tensor& p : block->parameters()) grads.push_back(p.grad().to_vector<float>());
  return {held, grads};
}

// The recomputed backward lets go of what the plain one lets go of: the recomputed output and
// the incoming gradient once used, and the input's first gradient is not copied (held to the
// end of the block's backward, those were two activations more than the plain backward's).
TEST(Checkpoint, RecomputedBackwardHoldsNoMoreThanThePlainOne) {
  Generator init(5), data(6);
  auto block = std::make_shared<Residual>(init);
  const Tensor x = randn({16, 8, 32, 32}, data);
  const auto [plain_held, plain_grads] = held_after_first_layer(block, x, false);
  const auto [recomputed_held, recomputed_grads] = held_after_first_layer(block, x, true);
  EXPECT_EQ(recomputed_grads, plain_grads);
  ASSERT_GT(plain_held, 0u) << "the hook did not run";
  const std::size_t activation = static_cast<std::size_t>(x.nbytes());
  EXPECT_LE(recomputed_held, plain_held + activation / 4) << "one activation is " << activation << " bytes";
}

TEST(Checkpoint, TheWrapperModuleIsTheSameFunction) {
  Net net;
  auto wrapped = std::make_shared<Checkpoint>(net.block);
  EXPECT_EQ(wrapped->parameters().size(), net.block->parameters().size());
  Generator data(8);
  const Tensor x = randn({2, 3, 6, 6}, data);
  net.block->eval();  // no dropout, running statistics: both calls compute the same
  NoGradGuard no_grad;
  EXPECT_EQ((*wrapped)(x).to_vector<float>(), (*net.block)(x).to_vector<float>());
}

}  // namespace
}  // namespace sublet::nn
