// Autograd from several threads at once: grad mode is per thread and the engine keeps no shared
// state, so concurrent training steps on separate models give the single-threaded gradients.
#include <thread>

#include "runtime/autograd/grad_mode.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

std::vector<double> train_step_gradient(std::uint64_t seed) {
  Tensor w = testing::random64({16, 8}, seed, true);
  const Tensor x = testing::random64({32, 16}, seed + 100);
  for (int i = 0; i < 20; ++i) {
    w.set_grad(Tensor());
    x.matmul(w).tanh().pow(2.0).mean().backward();
  }
  return w.grad().to_vector<double>();
}

TEST(AutogradThreads, ConcurrentBackwardMatchesSerial) {
  constexpr int kThreads = 4;
  std::vector<std::vector<double>> serial(kThreads), parallel(kThreads);
  for (int t = 0; t < kThreads; ++t) serial[t] = train_step_gradient(t + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { parallel[t] = train_step_gradient(t + 1); });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(parallel[t], serial[t]) << "thread " << t;
}

TEST(AutogradThreads, GradModeIsPerThread) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread([&] { other_thread_enabled = autograd::grad_mode_enabled(); }).join();
  EXPECT_TRUE(other_thread_enabled);
  EXPECT_FALSE(autograd::grad_mode_enabled());
}

}  // namespace
}  // namespace sublet
