// nn::checkpoint (runtime/nn/checkpoint.h): a checkpointed block gives bit-identical gradients
// on the CPU (dropout included), updates batch norm's running statistics once, and holds less
// memory between forward and backward.
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
