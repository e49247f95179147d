// Memory behaviour of tensors and autograd as seen through the allocator's statistics.
#include "runtime/autograd/function.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::cpu_allocated;

TEST(MemoryRelease, TemporariesAndGraphsGiveEverythingBack) {
  const std::size_t before = cpu_allocated();
  {
    Tensor w = testing::random64({256, 256}, 1, true);
    Tensor x = testing::random64({64, 256}, 2);
    Tensor loss = x.matmul(w).relu().mean();
    loss.backward();
    EXPECT_GT(cpu_allocated(), before);
  }
  EXPECT_EQ(cpu_allocated(), before);
}

TEST(MemoryRelease, ActivationMemoryFallsDuringBackward) {
  constexpr std::int64_t kElements = 1 << 20;  // 4 MiB per float32 activation
  constexpr int kLayers = 6;
  Tensor x = testing::random32({kElements}, 3).requires_grad_(true);
  Tensor h = x;
  std::vector<std::shared_ptr<autograd::Node>> nodes;
  for (int i = 0; i < kLayers; ++i) {
    h = (h * 0.5).tanh();  // tanh saves its output: one 4 MiB activation per layer
    nodes.push_back(h.grad_fn());
  }
  Tensor loss = h.sum();
  h = Tensor();  // only the graph's saved tensors keep the activations now
  const std::size_t at_start = cpu_allocated();
  EXPECT_GE(at_start, static_cast<std::size_t>(kLayers) * kElements * 4);
  // The first layer's tanh runs last: by then the other layers' activations must be gone.
  std::size_t before_last_node = 0;
  nodes.front()->register_pre_hook([&](const autograd::TensorList&) { before_last_node = cpu_allocated(); });
  nodes.clear();
  loss.backward();
  const std::size_t at_end = cpu_allocated();
  EXPECT_LT(before_last_node, at_start - static_cast<std::size_t>(kLayers - 3) * kElements * 4);
  EXPECT_LT(at_end, at_start);
  EXPECT_TRUE(x.grad().defined());
}

TEST(MemoryRelease, RetainGraphKeepsSavedTensors) {
  Tensor x = testing::random32({1 << 18}, 4).requires_grad_(true);
  Tensor loss = x.exp().exp().sum();
  const std::size_t at_start = cpu_allocated();
  loss.backward({}, true);
  x.set_grad(Tensor());
  EXPECT_EQ(cpu_allocated(), at_start);  // saved activations still held
  loss.backward();
  x.set_grad(Tensor());
  EXPECT_LT(cpu_allocated(), at_start);  // now released
}

TEST(MemoryRelease, SavedActivationsAreTagged) {
  Tensor x = testing::random32({16}, 5).requires_grad_(true);
  Tensor y = x.exp();
  EXPECT_EQ(y.storage().category(), memory::BlockCategory::Activation);
  EXPECT_EQ(x.storage().category(), memory::BlockCategory::Unknown);
}

}  // namespace
}  // namespace sublet
