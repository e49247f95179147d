// Index checks captured into a CUDA graph (ops/captured_index_checks.h, ops/cuda/index_check.h),
// op by op: each replay searches the indices the captured input holds then, writes its verdict
// to pinned host memory, and throw_first_failure() throws the eager call's error for a bad one;
// the op itself stays inside its table (embedding: a zero row; nll_loss and cross_entropy: a NaN
// loss). Without checks installed, a capture records none (the replays run unchecked).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/pinned_host.h"
#include "ops/captured_index_checks.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/step/cuda_graph.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

namespace F = nn::functional;

const Device kGpu = Device::cuda(0);

Tensor ids(const std::vector<std::int64_t>& values) {
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}).to(kGpu);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "(no error)";
}

ops::CapturedIndexChecks reserved_checks() {
  ops::CapturedIndexChecks checks;
  checks.reserve(memory::pinned_allocator(), memory::pinned_host_stream(), 8);
  return checks;
}

TEST(CapturedIndexChecksCuda, EmbeddingIdsAreCheckedOnEveryReplay) {
  SUBLET_SKIP_WITHOUT_GPU("embedding ids checked inside CUDA graph replays");
  Generator gen(5);
  const Tensor table = randn({6, 4}, gen).to(kGpu);
  const Tensor good = ids({0, 5, 2}), bad = ids({0, 9, 2});
  const std::string eager = error_of([&] { F::embedding(table, bad); });
  EXPECT_NE(eager.find("embedding: id 9 at position 1 is outside the table of 6 embeddings"), std::string::npos) << eager;

  const std::vector<float> expected = F::embedding(table, good).to(Device::cpu()).to_vector<float>();  // eager first
  Tensor input = good.clone(), out;
  ops::CapturedIndexChecks checks = reserved_checks();
  CudaGraph graph(kGpu);
  graph.capture([&] {
    const ops::CapturedIndexChecksScope scope(checks);
    out = F::embedding(table, input);
  });
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_NO_THROW(checks.throw_first_failure());  // nothing replayed yet
  graph.replay();
  graph.synchronize();
  EXPECT_NO_THROW(checks.throw_first_failure());
  EXPECT_EQ(out.to(Device::cpu()).to_vector<float>(), expected);

  input.copy_(bad);
  graph.replay();
  graph.synchronize();
  EXPECT_EQ(error_of([&] { checks.throw_first_failure(); }), eager);
  const std::vector<float> rows = out.to(Device::cpu()).to_vector<float>();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(rows[4 + c], 0.0f) << "the bad id's row reads as zeros";

  input.copy_(good);
  graph.replay();
  graph.synchronize();
  EXPECT_NO_THROW(checks.throw_first_failure());
}

TEST(CapturedIndexChecksCuda, LossTargetsAreCheckedOnEveryReplay) {
  SUBLET_SKIP_WITHOUT_GPU("loss targets checked inside CUDA graph replays");
  Generator gen(6);
  const Tensor logits = randn({4, 3}, gen).to(kGpu);
  const Tensor log_probs = F::log_softmax(logits, 1);
  const Tensor good = ids({0, 2, -100, 1}), bad = ids({0, 2, 3, 1});
  const std::string eager_ce = error_of([&] { F::cross_entropy(logits, bad); });
  EXPECT_NE(eager_ce.find("cross_entropy: target 3 of sample 2 is outside [0, 3)"), std::string::npos) << eager_ce;
  const Tensor good_nll = ids({0, 2, 1, 1});
  const std::string eager_nll = error_of([&] { F::nll_loss(log_probs, bad); });
  EXPECT_NE(eager_nll.find("nll_loss: target 3 of sample 2 is outside [0, 3)"), std::string::npos) << eager_nll;

  EXPECT_TRUE(std::isfinite(F::cross_entropy(logits, good).item<float>()));  // eager first
  EXPECT_TRUE(std::isfinite(F::nll_loss(log_probs, good_nll).item<float>()));
  Tensor ce_targets = good.clone(), nll_targets = good_nll.clone(), ce, nll;
  ops::CapturedIndexChecks checks = reserved_checks();
  CudaGraph graph(kGpu);
  graph.capture([&] {
    const ops::CapturedIndexChecksScope scope(checks);
    ce = F::cross_entropy(logits, ce_targets);  // -100: the ignore index passes
    nll = F::nll_loss(log_probs, nll_targets);
  });
  ASSERT_EQ(checks.size(), 2u);
  graph.replay();
  graph.synchronize();
  EXPECT_NO_THROW(checks.throw_first_failure());
  EXPECT_TRUE(std::isfinite(ce.item<float>()));
  EXPECT_TRUE(std::isfinite(nll.item<float>()));

  nll_targets.copy_(bad);  // only the second check fails
  graph.replay();
  graph.synchronize();
  EXPECT_EQ(error_of([&] { checks.throw_first_failure(); }), eager_nll);
  EXPECT_TRUE(std::isnan(nll.item<float>()));
  EXPECT_TRUE(std::isfinite(ce.item<float>()));

  ce_targets.copy_(bad);  // both fail: the first captured is reported
  graph.replay();
  graph.synchronize();
  EXPECT_EQ(error_of([&] { checks.throw_first_failure(); }), eager_ce);
  EXPECT_TRUE(std::isnan(ce.item<float>()));
}

TEST(CapturedIndexChecksCuda, WithoutChecksInstalledACaptureRecordsNone) {
  SUBLET_SKIP_WITHOUT_GPU("a capture without installed checks");
  Generator gen(7);
  const Tensor table = randn({6, 4}, gen).to(kGpu);
  const Tensor input = ids({0, 5, 2});
  (void)F::embedding(table, input);  // eager first
  ops::CapturedIndexChecks checks = reserved_checks();
  Tensor out;
  CudaGraph graph(kGpu);
  graph.capture([&] { out = F::embedding(table, input); });
  graph.replay();
  graph.synchronize();
  EXPECT_EQ(checks.size(), 0u);
  EXPECT_EQ(ops::captured_index_checks(), nullptr);
}

}  // namespace
}  // namespace sublet
