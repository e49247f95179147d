// The fused CUDA cross-entropy (ops/cuda/cross_entropy.cu) against the float64 CPU kernel on the
// same logits (16-bit ones widened exactly), for float32, float64, bfloat16 and float16: class
// counts that are and are not multiples of the 16-byte vector (rows then start at every offset
// within it, so the head and tail elements are read alone), buffers that start off a 16-byte
// boundary, ignored rows, label smoothing, and rows of infinities and NaNs.
//
// Tolerances. The row log-sum-exp and the loss: float32 accumulation (GPU) against float64. The
// log-sum-exp is off by the sum's relative error (a thread's ~C/2048 + 8 additions, 8 tree levels,
// a few ulps of the fast exponential: under 4e-6 for C = 50304) plus its own rounding, so atol
// 1e-5 and rtol 1e-6. A gradient element scale * (p - share) is off by p times that error, plus
// its rounding to the stored type: scale * p * 1e-5 and rtol 1e-6 (float32), half an ulp of the
// 16-bit type (tests/ops/half_test_support.h). float64: exp and float64 sums, 1e-12 throughout.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/loss.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kIgnore = -100;

template <typename T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline constexpr bool kHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

template <typename T>
struct Tolerance {
  static constexpr bool exact = std::is_same_v<T, double>;
  static constexpr double stats_rtol = exact ? 1e-12 : 1e-6;
  static constexpr double stats_atol = exact ? 1e-12 : 1e-5;
  static constexpr double grad_p_rtol = exact ? 1e-12 : 1e-5;  // times scale * p
  static double grad_rtol() {
    if constexpr (kHalf<T>) return HalfTolerance<T>::rounding_rtol + 1e-6;
    return exact ? 1e-12 : 1e-6;
  }
  static double grad_atol() {
    if constexpr (kHalf<T>) return HalfTolerance<T>::rounding_atol;
    return 0.0;
  }
};

// Where the buffers start: this many elements past a 16-byte-aligned block.
struct Offsets {
  std::size_t logits = 0;
  std::size_t grad = 0;
};

struct Results {
  std::vector<double> row_lse;
  double loss = 0;
  std::vector<double> grad;
};

template <typename T>
double widen(T v) {
  return static_cast<double>(v);  // exact for every type here
}

// The float64 CPU kernel on the logits as stored in T.
template <typename T>
Results cpu_reference(const ClassScoresShape& s, const std::vector<T>& logits, const std::vector<std::int64_t>& targets,
                      const CrossEntropyParams& params, double grad_loss) {
  std::vector<double> wide(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) wide[i] = widen(logits[i]);
  Results r;
  r.row_lse.resize(static_cast<std::size_t>(s.batch));
  r.grad.resize(logits.size());
  const Context cpu = Context::for_device(Device::cpu());
  cross_entropy_forward(cpu, s, DType::Float64, wide.data(), targets.data(), params, &r.loss, r.row_lse.data());
  cross_entropy_backward(cpu, s, DType::Float64, &grad_loss, wide.data(), targets.data(), r.row_lse.data(), params,
                         r.grad.data());
  return r;
}

template <typename T>
Results run_on_gpu(const ClassScoresShape& s, const std::vector<T>& logits, const std::vector<std::int64_t>& targets,
                   const CrossEntropyParams& params, double grad_loss, Offsets at) {
  using A = AccOf<T>;
  std::vector<T> padded(at.logits, T(0.0f));
  padded.insert(padded.end(), logits.begin(), logits.end());
  DeviceBuffer<T> d_logits(padded), d_grad(logits.size() + at.grad);
  DeviceBuffer<std::int64_t> d_targets(targets);
  DeviceBuffer<A> d_loss(1), d_lse(static_cast<std::size_t>(s.batch)), d_grad_loss(std::vector<A>{static_cast<A>(grad_loss)});
  const Context g = gpu_context();
  cross_entropy_forward(g, s, DTypeOf<T>::value, d_logits.get() + at.logits, d_targets.get(), params, d_loss.get(),
                        d_lse.get());
  cross_entropy_backward(g, s, DTypeOf<T>::value, d_grad_loss.get(), d_logits.get() + at.logits, d_targets.get(),
                         d_lse.get(), params, d_grad.get() + at.grad);
  Results r;
  for (A v : d_lse.download()) r.row_lse.push_back(static_cast<double>(v));
  r.loss = static_cast<double>(d_loss.download()[0]);
  const std::vector<T> grad = d_grad.download();
  for (std::size_t i = at.grad; i < grad.size(); ++i) r.grad.push_back(widen(grad[i]));
  return r;
}

bool within(double got, double want, double tolerance) {
  if (std::isnan(got) && std::isnan(want)) return true;
  if (got == want) return true;  // equal infinities
  return std::abs(got - want) <= tolerance;
}

// Names the first few mismatches; tolerance(i) is element i's allowance.
template <typename Allowance>
void expect_within(const std::vector<double>& got, const std::vector<double>& want, Allowance tolerance,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (within(got[i], want[i], tolerance(i))) continue;
    if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << ", float64 " << want[i];
    ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " elements outside the tolerance";
}

template <typename T>
void check(const ClassScoresShape& s, const std::vector<T>& logits, const std::vector<std::int64_t>& targets,
           double smoothing, const std::string& name, Offsets at = {}) {
  using Tol = Tolerance<T>;
  const std::string what = name + " " + dtype_name(DTypeOf<T>::value) + " C=" + std::to_string(s.classes) +
                           " smoothing " + std::to_string(smoothing);
  const CrossEntropyParams params{smoothing, kIgnore};
  const double grad_loss = 0.7;
  const Results want = cpu_reference(s, logits, targets, params, grad_loss);
  const Results got = run_on_gpu(s, logits, targets, params, grad_loss, at);
  const auto stats_tolerance = [&](const std::vector<double>& reference) {
    return [&reference](std::size_t i) { return Tol::stats_atol + Tol::stats_rtol * std::abs(reference[i]); };
  };
  expect_within(got.row_lse, want.row_lse, stats_tolerance(want.row_lse), what + " row log-sum-exp");
  expect_within({got.loss}, {want.loss}, [&](std::size_t) { return Tol::stats_atol + Tol::stats_rtol * std::abs(want.loss); },
                what + " loss");
  std::int64_t counted = 0;
  for (std::int64_t t : targets) counted += t != kIgnore;
  const double scale = grad_loss / static_cast<double>(counted);
  expect_within(got.grad, want.grad, [&](std::size_t i) {
    const std::size_t n = i / static_cast<std::size_t>(s.classes);
    const double p = std::exp(widen(logits[i]) - want.row_lse[n]);
    return Tol::grad_p_rtol * scale * p + Tol::grad_rtol() * std::abs(want.grad[i]) + Tol::grad_atol();
  }, what + " gradient");
  for (std::int64_t n = 0; n < s.batch; ++n) {  // exactly zero, not merely small
    if (targets[static_cast<std::size_t>(n)] != kIgnore) continue;
    for (std::int64_t j = 0; j < s.classes; ++j) {
      ASSERT_EQ(got.grad[static_cast<std::size_t>(n * s.classes + j)], 0.0) << what << " ignored row " << n << " class " << j;
    }
  }
}

template <typename T>
std::vector<T> random_logits(std::int64_t count, std::uint64_t seed) {
  std::vector<T> out;
  for (double v : random_values<double>(count, seed, -4, 4)) out.push_back(static_cast<T>(v));
  return out;
}

// (7n + 3) mod C, with sample 1 ignored when there are more than two.
std::vector<std::int64_t> spread_targets(const ClassScoresShape& s) {
  std::vector<std::int64_t> targets(static_cast<std::size_t>(s.batch));
  for (std::int64_t n = 0; n < s.batch; ++n) targets[static_cast<std::size_t>(n)] = (n * 7 + 3) % s.classes;
  if (s.batch > 2) targets[1] = kIgnore;
  return targets;
}

template <typename T>
void check_class_counts() {
  for (std::int64_t classes : {1, 2, 7, 9, 1000, 50257, 50304}) {
    const ClassScoresShape s{classes > 1000 ? 5 : 13, classes};
    const std::vector<T> logits = random_logits<T>(s.numel(), 200 + static_cast<std::uint64_t>(classes));
    for (double smoothing : {0.0, 0.1}) check(s, logits, spread_targets(s), smoothing, "random");
  }
}

// Rows: all -inf; NaN first; NaN in the middle; -inf but for the last class; one +inf; finite.
template <typename T>
void check_special_rows(std::int64_t classes) {
  const ClassScoresShape s{6, classes};
  std::vector<T> logits = random_logits<T>(s.numel(), 300);
  const auto at = [&](std::int64_t n, std::int64_t j) -> T& { return logits[static_cast<std::size_t>(n * classes + j)]; };
  for (std::int64_t j = 0; j < classes; ++j) at(0, j) = static_cast<T>(-kInf);
  at(1, 0) = static_cast<T>(kNaN);
  at(2, classes / 2) = static_cast<T>(kNaN);
  for (std::int64_t j = 0; j + 1 < classes; ++j) at(3, j) = static_cast<T>(-kInf);
  at(4, classes / 3) = static_cast<T>(kInf);
  const std::vector<std::int64_t> targets{0, 0, classes - 1, 0, 0, classes / 2};
  for (double smoothing : {0.0, 0.1}) check(s, logits, targets, smoothing, "special rows");
}

}  // namespace

TEST(CudaCrossEntropy, MatchesFloat64ForEveryDtypeAndClassCount) {
  SUBLET_SKIP_WITHOUT_GPU("the fused cross-entropy against the float64 CPU kernel");
  check_class_counts<float>();
  check_class_counts<double>();
  check_class_counts<BFloat16>();
  check_class_counts<Float16>();
}

TEST(CudaCrossEntropy, BuffersOffA16ByteBoundary) {
  SUBLET_SKIP_WITHOUT_GPU("cross-entropy rows that start inside a 16-byte vector");
  for (std::int64_t classes : {50257, 50304}) {
    const ClassScoresShape s{4, classes};
    const auto targets = spread_targets(s);
    // Logits and gradient at the same offset (vectors after a head), then at different ones
    // (the gradient written one element at a time).
    for (const Offsets at : {Offsets{1, 1}, Offsets{3, 0}}) {
      const std::string name = "offsets " + std::to_string(at.logits) + "/" + std::to_string(at.grad);
      check(s, random_logits<BFloat16>(s.numel(), 400), targets, 0.1, name, at);
      check(s, random_logits<Float16>(s.numel(), 401), targets, 0.0, name, at);
      check(s, random_logits<float>(s.numel(), 402), targets, 0.1, name, at);
      check(s, random_logits<double>(s.numel(), 403), targets, 0.0, name, at);
    }
  }
}

TEST(CudaCrossEntropy, InfinityAndNaNRowsMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cross-entropy of rows with infinities and NaNs");
  for (std::int64_t classes : {7, 50257}) {
    check_special_rows<float>(classes);
    check_special_rows<double>(classes);
    check_special_rows<BFloat16>(classes);
    check_special_rows<Float16>(classes);
  }
}

TEST(CudaCrossEntropy, EveryRowIgnoredGivesNaNAndZeroGradient) {
  SUBLET_SKIP_WITHOUT_GPU("cross-entropy with every target ignored");
  const ClassScoresShape s{3, 50257};
  const std::vector<std::int64_t> targets(3, kIgnore);
  const Results r = run_on_gpu(s, random_logits<BFloat16>(s.numel(), 500), targets, {0.0, kIgnore}, 1.0, {});
  EXPECT_TRUE(std::isnan(r.loss)) << r.loss;  // 0/0, as PyTorch
  for (double g : r.grad) ASSERT_EQ(g, 0.0);
}

TEST(CudaCrossEntropy, RepeatedRunsGiveIdenticalBits) {
  SUBLET_SKIP_WITHOUT_GPU("determinism of the fused cross-entropy");
  const ClassScoresShape s{8, 50257};
  const std::vector<BFloat16> logits = random_logits<BFloat16>(s.numel(), 600);
  const auto targets = spread_targets(s);
  const Results first = run_on_gpu(s, logits, targets, {0.1, kIgnore}, 1.0, {});
  const Results second = run_on_gpu(s, logits, targets, {0.1, kIgnore}, 1.0, {});
  EXPECT_EQ(first.loss, second.loss);
  EXPECT_EQ(first.row_lse, second.row_lse);
  EXPECT_EQ(first.grad, second.grad);
}
