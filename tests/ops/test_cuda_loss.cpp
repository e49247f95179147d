// log_softmax, nll_loss and cross_entropy (with label smoothing and ignored samples) on the GPU
// against the CPU. log_softmax and nll_loss keep double row statistics on both devices; only
// summation order differs: float32 rtol 1e-6, atol 1e-7; float64 rtol 1e-12, atol 1e-14. The
// CUDA cross-entropy accumulates float32 rows in float32 (the CPU in double): rtol 1e-5 there.
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "core/errors.h"
#include "ops/loss.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check(std::int64_t batch, std::int64_t classes, double smoothing, const std::string& what) {
  const double rtol = std::is_same_v<T, float> ? 1e-6 : 1e-12, atol = std::is_same_v<T, float> ? 1e-7 : 1e-14;
  const ClassScoresShape s{batch, classes};
  const DType dtype = DTypeOf<T>::value;
  const auto logits = random_values<T>(s.numel(), 111, -4, 4);
  const auto grad_output = random_values<T>(s.numel(), 112);
  std::vector<std::int64_t> targets(batch);
  for (std::int64_t n = 0; n < batch; ++n) targets[n] = (n * 7 + 3) % classes;
  if (batch > 3) targets[1] = -100;  // ignored: no loss, zero gradient, not counted in the mean
  const std::vector<T> grad_loss{static_cast<T>(0.7)};
  const Context cpu = Context::for_device(Device::cpu());
  std::vector<std::int64_t> nll_targets = targets;
  for (std::int64_t& t : nll_targets) t = t < 0 ? 0 : t;

  std::vector<T> log_probs(s.numel()), lsm_grad(s.numel()), nll(1), nll_grad(s.numel()), ce(1), ce_grad(s.numel());
  log_softmax_forward(cpu, s, dtype, logits.data(), log_probs.data());
  log_softmax_backward(cpu, s, dtype, grad_output.data(), log_probs.data(), lsm_grad.data());
  nll_loss_forward(cpu, s, dtype, log_probs.data(), nll_targets.data(), nll.data());
  nll_loss_backward(cpu, s, dtype, grad_loss.data(), nll_targets.data(), nll_grad.data());
  const CrossEntropyParams params{smoothing, -100};
  std::vector<T> lse(batch);
  cross_entropy_forward(cpu, s, dtype, logits.data(), targets.data(), params, ce.data(), lse.data());
  cross_entropy_backward(cpu, s, dtype, grad_loss.data(), logits.data(), targets.data(), lse.data(), params,
                         ce_grad.data());

  DeviceBuffer<T> d_logits(logits), d_grad_output(grad_output), d_grad_loss(grad_loss);
  DeviceBuffer<std::int64_t> d_targets(targets), d_nll_targets(nll_targets);
  DeviceBuffer<T> d_lse(batch);
  DeviceBuffer<T> d_log_probs(s.numel()), d_lsm_grad(s.numel()), d_nll(1), d_nll_grad(s.numel()), d_ce(1),
      d_ce_grad(s.numel());
  const Context g = gpu_context();
  log_softmax_forward(g, s, dtype, d_logits.get(), d_log_probs.get());
  log_softmax_backward(g, s, dtype, d_grad_output.get(), d_log_probs.get(), d_lsm_grad.get());
  nll_loss_forward(g, s, dtype, d_log_probs.get(), d_nll_targets.get(), d_nll.get());
  nll_loss_backward(g, s, dtype, d_grad_loss.get(), d_nll_targets.get(), d_nll_grad.get());
  cross_entropy_forward(g, s, dtype, d_logits.get(), d_targets.get(), params, d_ce.get(), d_lse.get());
  cross_entropy_backward(g, s, dtype, d_grad_loss.get(), d_logits.get(), d_targets.get(), d_lse.get(), params,
                         d_ce_grad.get());

  expect_close(d_log_probs.download(), log_probs, rtol, atol, what + " log_softmax");
  expect_close(d_lsm_grad.download(), lsm_grad, rtol, atol * classes, what + " log_softmax grad");
  expect_close(d_nll.download(), nll, rtol, atol, what + " nll_loss");
  expect_close(d_nll_grad.download(), nll_grad, rtol, atol, what + " nll_loss grad");
  const double ce_rtol = std::is_same_v<T, float> ? 1e-5 : rtol;
  expect_close(d_ce.download(), ce, ce_rtol, atol, what + " cross_entropy");
  expect_close(d_lse.download(), lse, ce_rtol, atol, what + " cross_entropy row log-sum-exp");
  expect_close(d_ce_grad.download(), ce_grad, ce_rtol, atol, what + " cross_entropy grad");
}

}  // namespace

TEST(CudaLoss, LossesMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("losses against the CPU");
  check<float>(32, 10, 0.0, "float C=10");
  check<float>(32, 10, 0.1, "float C=10 smoothing 0.1");
  check<float>(5, 1000, 0.2, "float C=1000 smoothing 0.2");
  check<double>(17, 300, 0.1, "double C=300 smoothing 0.1");
}

TEST(CudaLoss, TargetOutOfRangeThrowsNamingTheSample) {
  SUBLET_SKIP_WITHOUT_GPU("target validation of the CUDA losses");
  const ClassScoresShape s{4, 3};
  DeviceBuffer<float> logits(random_values<float>(12, 113)), loss(1), lse(4);
  DeviceBuffer<std::int64_t> targets(std::vector<std::int64_t>{0, 2, 3, -1});
  try {
    cross_entropy_forward(gpu_context(), s, DType::Float32, logits.get(), targets.get(), {}, loss.get(), lse.get());
    FAIL() << "cross_entropy accepted target 3 for 3 classes";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("target 3 of sample 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nll_loss_forward(gpu_context(), s, DType::Float32, logits.get(), targets.get(), loss.get()),
               ValueError);
}
