// scaled_dot_product_attention on the GPU. float32 and float64 (cuBLAS, scores materialised)
// against the CPU reference; both bfloat16/float16 paths - cuDNN's fused flash attention and
// sublet's fused kernels, each forced with SUBLET_ATTENTION_BACKEND's setting - against the
// float32 path on the same 16-bit inputs, forward and dQ, dK, dV, at head dims 16-128 (and, on
// cuDNN, other multiples of 8) and lengths on and off the 64-row tiles (1 included), causal and
// not, with the default and another scale; the causal mask's extent at tile boundaries; q, k, v
// read in place from one projection, and packed_self_attention's packed gradient; cuDNN's plans
// replayed in a CUDA graph; which head dims fall back or fail under each setting; and the fused
// paths' peak memory at T = 4096 against one T x T score matrix. Errors are
// max |got - expected| / max |expected| (dQ and dK: at least the dV scale, for the one-key case
// where they vanish); NaN fails every check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>
#include <sstream>
#include <cstdio>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/tuning.h"
#include "memory/registry.h"
#include "runtime/autocast.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/step/cuda_graph.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

namespace F = nn::functional;
const Device kGpu = Device::cuda(0);

double largest_magnitude(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::Float64).pow(2.0).max().sqrt().item<double>();
}

// The largest difference over the larger of the expected tensor's largest magnitude and
// `scale_floor`. With one key the query and key gradients vanish (the softmax of one score is 1
// whatever the score): their rounding is then measured against the value gradient's scale, the
// size a gradient of this op has, instead of against zero.
double relative_error(const Tensor& got, const Tensor& expected, double scale_floor = 0.0) {
  const Tensor e = expected.to(Device::cpu()).to(DType::Float64);
  const Tensor g = got.to(Device::cpu()).to(DType::Float64);
  const double scale = std::max(largest_magnitude(e), scale_floor);
  return g.sub(e).pow(2.0).max().sqrt().item<double>() / scale;
}

struct Pass {
  Tensor out, dq, dk, dv;
};

// Forward and backward of the op on copies of the given tensors (on their device and dtype).
Pass run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& grad, bool causal,
         std::optional<double> scale = std::nullopt) {
  Tensor qi = q.detach().clone().requires_grad_(), ki = k.detach().clone().requires_grad_();
  Tensor vi = v.detach().clone().requires_grad_();
  const Tensor out = F::scaled_dot_product_attention(qi, ki, vi, causal, scale);
  out.backward(grad);
  return {out, qi.grad(), ki.grad(), vi.grad()};
}

// The 16-bit attention of the scope runs on `backend` (SUBLET_ATTENTION_BACKEND's setting).
ScopedTuning use_backend(AttentionBackend backend) {
  return ScopedTuning([backend](TuningOptions& o) { o.attention_backend = backend; });
}

constexpr AttentionBackend kFusedBackends[] = {AttentionBackend::Cudnn, AttentionBackend::Sublet};

struct Case {
  std::int64_t batch, heads, query_len, key_len, head_dim;
  bool causal;
};
std::string name(const Case& c) {
  std::ostringstream text;
  text << "B" << c.batch << " H" << c.heads << " L" << c.query_len << " S" << c.key_len << " D" << c.head_dim
       << (c.causal ? " causal" : "");
  return text.str();
}

struct Inputs {
  Tensor q, k, v, grad;
};
Inputs random_inputs(const Case& c, std::uint64_t seed, DType dtype) {
  Generator gen(seed);
  const TensorOptions options = TensorOptions().dtype(DType::Float32);
  Inputs in{randn({c.batch, c.heads, c.query_len, c.head_dim}, gen, options),
            randn({c.batch, c.heads, c.key_len, c.head_dim}, gen, options),
            randn({c.batch, c.heads, c.key_len, c.head_dim}, gen, options),
            randn({c.batch, c.heads, c.query_len, c.head_dim}, gen, options)};
  in.q = in.q.to(dtype);
  in.k = in.k.to(dtype);
  in.v = in.v.to(dtype);
  in.grad = in.grad.to(dtype);
  return in;
}

void expect_close(const Pass& got, const Pass& expected, double out_tolerance, double grad_tolerance,
                  const std::string& what) {
  const double gradient_scale = largest_magnitude(expected.dv);
  const double e_out = relative_error(got.out, expected.out), e_dv = relative_error(got.dv, expected.dv);
  const double e_dq = relative_error(got.dq, expected.dq, gradient_scale);
  const double e_dk = relative_error(got.dk, expected.dk, gradient_scale);
  std::printf("  %-40s out %.2e dq %.2e dk %.2e dv %.2e\n", what.c_str(), e_out, e_dq, e_dk, e_dv);
  EXPECT_TRUE(e_out <= out_tolerance) << what << " out " << e_out;
  EXPECT_TRUE(e_dq <= grad_tolerance) << what << " dq " << e_dq;
  EXPECT_TRUE(e_dk <= grad_tolerance) << what << " dk " << e_dk;
  EXPECT_TRUE(e_dv <= grad_tolerance) << what << " dv " << e_dv;
}

Pass on_gpu(const Inputs& in, bool causal, std::optional<double> scale = std::nullopt) {
  return run(in.q.to(kGpu), in.k.to(kGpu), in.v.to(kGpu), in.grad.to(kGpu), causal, scale);
}

Inputs widened(const Inputs& in) {
  return {in.q.to(DType::Float32), in.k.to(DType::Float32), in.v.to(DType::Float32), in.grad.to(DType::Float32)};
}

// Two roundings to 16 bits on the way (P or dS, and the output) at 2^-8 (bfloat16) or 2^-11.
double out_tolerance(DType half) { return half == DType::BFloat16 ? 2e-2 : 4e-3; }
double grad_tolerance(DType half) { return half == DType::BFloat16 ? 4e-2 : 8e-3; }

TEST(CudaAttention, Float32AndFloat64MatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cuBLAS attention against the CPU reference");
  const std::vector<Case> cases = {{2, 3, 1, 1, 16, true},    {2, 3, 17, 17, 16, false}, {2, 3, 17, 17, 16, true},
                                   {1, 2, 100, 100, 64, true}, {1, 2, 33, 70, 64, true},  {1, 2, 70, 33, 32, true}};
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      const Inputs in = random_inputs(c, seed++, dtype);
      const Pass cpu = run(in.q, in.k, in.v, in.grad, c.causal);
      const double tolerance = dtype == DType::Float32 ? 1e-5 : 1e-12;
      expect_close(on_gpu(in, c.causal), cpu, tolerance, tolerance, name(c) + " " + dtype_name(dtype));
    }
  }
}

// Each fused path against the float32 path on the same 16-bit values (read as float32).
void expect_fused_matches_float32(AttentionBackend backend, const std::vector<Case>& cases, std::uint64_t seed,
                                  std::optional<double> scale = std::nullopt) {
  const ScopedTuning scope = use_backend(backend);
  for (const DType half : {DType::BFloat16, DType::Float16}) {
    for (const Case& c : cases) {
      const Inputs in = random_inputs(c, seed++, half);
      const Pass fused = on_gpu(in, c.causal, scale);
      EXPECT_EQ(fused.out.dtype(), half);
      EXPECT_EQ(fused.dq.dtype(), half);
      expect_close(fused, on_gpu(widened(in), c.causal, scale), out_tolerance(half), grad_tolerance(half),
                   std::string(attention_backend_name(backend)) + " " + name(c) + " " + dtype_name(half) +
                       (scale ? " scale " + std::to_string(*scale) : ""));
    }
  }
}

std::vector<Case> fused_cases(std::initializer_list<std::int64_t> head_dims) {
  std::vector<Case> cases;
  for (const std::int64_t d : head_dims) {
    for (const std::int64_t t : {1, 7, 64, 65, 130, 257}) {
      for (const bool causal : {false, true}) cases.push_back({2, 3, t, t, d, causal});
    }
  }
  cases.push_back({1, 2, 33, 100, 64, true});
  cases.push_back({1, 2, 100, 33, 64, true});
  cases.push_back({1, 2, 1, 200, 64, false});  // one new token against a cache of keys
  return cases;
}

TEST(CudaAttention, SubletFusedSixteenBitMatchesTheFloat32Path) {
  SUBLET_SKIP_WITHOUT_GPU("sublet's fused bfloat16/float16 attention against the float32 path");
  expect_fused_matches_float32(AttentionBackend::Sublet, fused_cases({16, 32, 64, 128}), 100);
}

// cuDNN's fused flash attention (its plans, strides and masks as ops/cuda/attention_cudnn_graph.h
// builds them) against the same reference, at the head dims sublet's kernels take and at other
// multiples of 8 they don't; then with a scale other than 1/sqrt(D), which a graph that dropped
// or doubled the scale would fail.
TEST(CudaAttention, CudnnSixteenBitMatchesTheFloat32Path) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN's fused bfloat16/float16 attention against the float32 path");
  expect_fused_matches_float32(AttentionBackend::Cudnn, fused_cases({16, 32, 64, 128}), 200);
  expect_fused_matches_float32(AttentionBackend::Cudnn,
                               {{2, 3, 65, 65, 40, true}, {2, 3, 65, 65, 48, false}, {3, 2, 130, 130, 96, true},
                                {1, 2, 257, 257, 8, true}},
                               300);
  expect_fused_matches_float32(AttentionBackend::Cudnn, {{2, 3, 65, 65, 64, true}, {2, 3, 100, 33, 128, false}}, 400,
                               0.37);
}

// Changing value row j changes causal rows j.. and leaves rows before j bit for bit, at the
// tile edges too; row 0 is value row 0 exactly. A mask that hid the diagonal or showed one
// future key (or a tile loop that stopped one tile early) fails here.
TEST(CudaAttention, FusedCausalRowsSeeExactlyTheKeysUpToThemselves) {
  SUBLET_SKIP_WITHOUT_GPU("the fused paths' causal mask");
  const Case c{1, 2, 200, 200, 64, true};
  for (const AttentionBackend backend : kFusedBackends)
  for (const DType half : {DType::BFloat16, DType::Float16}) {
    const ScopedTuning scope = use_backend(backend);
    SCOPED_TRACE(std::string(attention_backend_name(backend)) + " " + dtype_name(half));
    const Inputs in = random_inputs(c, 300, half);
    const Tensor q = in.q.to(kGpu), k = in.k.to(kGpu), v = in.v.to(kGpu);
    const Tensor out = F::scaled_dot_product_attention(q, k, v, true).to(Device::cpu());
    EXPECT_TRUE(relative_error(out.narrow(2, 0, 1), in.v.narrow(2, 0, 1)) <= 0.0);
    for (const std::int64_t j : {1, 2, 63, 64, 65, 127, 128, 199}) {
      SCOPED_TRACE("key " + std::to_string(j));
      Tensor v2 = in.v.to(DType::Float32);
      v2.narrow(2, j, 1).add_(64.0);  // large enough to show through 16-bit rounding at any weight
      const Tensor out2 = F::scaled_dot_product_attention(q, k, v2.to(half).to(kGpu), true).to(Device::cpu());
      EXPECT_TRUE(relative_error(out2.narrow(2, 0, j), out.narrow(2, 0, j)) <= 0.0);
      EXPECT_TRUE(relative_error(out2.narrow(2, j, 1), out.narrow(2, j, 1)) >= 1e-3);
    }
  }
}

// q, k, v as transposed views of one [B, T, 3, H, D] projection: read in place, the same bits as
// contiguous copies, forward and backward, on the float32 path and sublet's fused kernels. cuDNN
// adds dQ up across key blocks with atomics, so its dQ may differ in the last bits from run to
// run: its output and dK, dV are compared exactly, dQ within 16-bit rounding.
TEST(CudaAttention, ViewsOfOneProjectionMatchContiguousCopies) {
  SUBLET_SKIP_WITHOUT_GPU("strided q, k, v on the GPU");
  for (const AttentionBackend backend : {AttentionBackend::Sublet, AttentionBackend::Cudnn})
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    const ScopedTuning scope = use_backend(backend);
    SCOPED_TRACE(std::string(attention_backend_name(backend)) + " " + dtype_name(dtype));
    Generator gen(400);
    const Tensor qkv = randn({2, 70, 3, 4, 32}, gen).to(dtype).to(kGpu);
    const Tensor grad = randn({2, 4, 70, 32}, gen).to(dtype).to(kGpu);
    const auto split = [&](std::int64_t i) { return qkv.select(2, i).transpose(1, 2); };
    const Pass strided = run(split(0), split(1), split(2), grad, true);
    const Pass dense = run(split(0).contiguous(), split(1).contiguous(), split(2).contiguous(), grad, true);
    const bool atomic_dq = backend == AttentionBackend::Cudnn && dtype == DType::BFloat16;
    EXPECT_TRUE(relative_error(strided.out, dense.out) <= 0.0);
    EXPECT_TRUE(relative_error(strided.dk, dense.dk) <= 0.0);
    EXPECT_TRUE(relative_error(strided.dv, dense.dv) <= 0.0);
    EXPECT_TRUE(relative_error(strided.dq, dense.dq) <= (atomic_dq ? 1e-2 : 0.0));
    EXPECT_TRUE(strided.out.transpose(1, 2).is_contiguous());
  }
}

// packed_self_attention on the GPU: its output and its one [B, T, 3C] gradient against the
// float32 path through the three views of the same (16-bit) projection, on both fused paths, and
// against the 16-bit views path on the same backend.
TEST(CudaAttention, PackedSelfAttentionMatchesTheViews) {
  SUBLET_SKIP_WITHOUT_GPU("packed_self_attention on the GPU");
  const std::int64_t B = 2, T = 70, H = 4, D = 64;
  for (const AttentionBackend backend : kFusedBackends)
  for (const DType half : {DType::BFloat16, DType::Float16}) {
    const ScopedTuning scope = use_backend(backend);
    SCOPED_TRACE(std::string(attention_backend_name(backend)) + " " + dtype_name(half));
    Generator gen(450);
    const Tensor qkv = randn({B, T, 3 * H * D}, gen).to(half).to(kGpu);
    const Tensor grad = randn({B, H, T, D}, gen).to(half).to(kGpu);
    const auto views_pass = [&](const Tensor& x, const Tensor& g) {
      Tensor leaf = x.detach().clone().requires_grad_();
      const auto view = [&](std::int64_t i) {
        return leaf.narrow(2, i * H * D, H * D).view({B, T, H, D}).transpose(1, 2);
      };
      const Tensor out = F::scaled_dot_product_attention(view(0), view(1), view(2), true);
      out.backward(g);
      return std::make_pair(out, leaf.grad());
    };
    Tensor leaf = qkv.detach().clone().requires_grad_();
    const Tensor out = F::packed_self_attention(leaf, H, true);
    out.backward(grad);
    const Tensor packed_grad = leaf.grad();
    ASSERT_TRUE(packed_grad.defined());
    EXPECT_EQ(packed_grad.dtype(), half);
    EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
    const auto wide = views_pass(qkv.to(DType::Float32), grad.to(DType::Float32));
    EXPECT_TRUE(relative_error(out, wide.first) <= out_tolerance(half)) << relative_error(out, wide.first);
    EXPECT_TRUE(relative_error(packed_grad, wide.second) <= grad_tolerance(half))
        << relative_error(packed_grad, wide.second);
    const auto same = views_pass(qkv, grad);
    EXPECT_TRUE(relative_error(out, same.first) <= 0.0);
    EXPECT_TRUE(relative_error(packed_grad, same.second) <= (backend == AttentionBackend::Cudnn ? 1e-2 : 0.0));
  }
}

// cuDNN's forward and backward captured into a CUDA graph after an eager run (which built the
// plans) and replayed twice, the second time on new values copied into the captured input: the
// replay reads the inputs and the host scalars (scale, mask value) the capture bound.
TEST(CudaAttention, CudnnPlansReplayInACudaGraph) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN attention in a CUDA graph");
  const ScopedTuning scope = use_backend(AttentionBackend::Cudnn);
  const std::int64_t B = 2, T = 130, H = 3, D = 64;
  Generator gen(480);
  const Tensor first = randn({B, T, 3 * H * D}, gen).to(DType::BFloat16).to(kGpu);
  const Tensor second = randn({B, T, 3 * H * D}, gen).to(DType::BFloat16).to(kGpu);
  const Tensor grad = randn({B, H, T, D}, gen).to(DType::BFloat16).to(kGpu);
  const auto eager = [&](const Tensor& x) {
    Tensor leaf = x.detach().clone().requires_grad_();
    const Tensor out = F::packed_self_attention(leaf, H, true);
    out.backward(grad);
    return std::make_pair(out, leaf.grad());
  };
  const auto expected_first = eager(first), expected_second = eager(second);

  Tensor input = first.clone(), out, input_grad;
  CudaGraph graph(kGpu);
  graph.capture([&] {
    Tensor leaf = input.detach().requires_grad_();
    out = F::packed_self_attention(leaf, H, true);
    out.backward(grad);
    input_grad = leaf.grad();
  });
  ASSERT_TRUE(graph.captured());
  graph.replay();
  graph.synchronize();
  EXPECT_TRUE(relative_error(out, expected_first.first) <= 0.0);
  EXPECT_TRUE(relative_error(input_grad, expected_first.second) <= 1e-2);
  input.copy_(second);
  graph.replay();
  graph.synchronize();
  EXPECT_TRUE(relative_error(out, expected_second.first) <= 0.0);
  EXPECT_TRUE(relative_error(input_grad, expected_second.second) <= 1e-2);
  EXPECT_TRUE(relative_error(out, expected_first.first) >= 1e-2);  // the new values did reach the replay
}

// The fused path's peak at T = 4096 stays far below one T x T score matrix, while the float32
// path (which materialises the scores) goes above it: the measurement can tell the two apart.
TEST(CudaAttention, FusedPeakMemoryStaysFarBelowTheScoreMatrix) {
  SUBLET_SKIP_WITHOUT_GPU("the fused paths' memory at T = 4096");
  const std::int64_t T = 4096, H = 2, D = 64;
  const std::size_t one_score_matrix_16bit = static_cast<std::size_t>(T * T) * 2;
  for (const AttentionBackend backend : kFusedBackends)
  for (const DType dtype : {DType::BFloat16, DType::Float32}) {
    const ScopedTuning scope = use_backend(backend);
    SCOPED_TRACE(std::string(attention_backend_name(backend)) + " " + dtype_name(dtype));
    Generator gen(500);
    Tensor q = randn({1, H, T, D}, gen).to(dtype).to(kGpu).requires_grad_();
    Tensor k = randn({1, H, T, D}, gen).to(dtype).to(kGpu).requires_grad_();
    Tensor v = randn({1, H, T, D}, gen).to(dtype).to(kGpu).requires_grad_();
    const Tensor grad = randn({1, H, T, D}, gen).to(dtype).to(kGpu);
    const std::size_t before = memory_allocated(kGpu);
    reset_peak_memory_stats(kGpu);
    {
      const Tensor out = F::scaled_dot_product_attention(q, k, v, true);
      out.backward(grad);
    }
    const std::size_t peak = max_memory_allocated(kGpu) - before;
    std::printf("  %s T=%lld: peak above the inputs %.1f MiB, one 16-bit T x T matrix %.1f MiB\n", dtype_name(dtype),
                static_cast<long long>(T), peak / 1048576.0, one_score_matrix_16bit / 1048576.0);
    if (dtype == DType::BFloat16) {
      EXPECT_TRUE(peak <= one_score_matrix_16bit / 4) << peak;
    } else {
      EXPECT_TRUE(peak >= one_score_matrix_16bit) << peak;
    }
  }
}

TEST(CudaAttention, AutocastRunsTheFusedKernel) {
  SUBLET_SKIP_WITHOUT_GPU("attention under autocast");
  Generator gen(600);
  const Tensor q = randn({1, 2, 10, 16}, gen).to(kGpu);
  AutocastGuard autocast(DType::BFloat16);
  EXPECT_EQ(F::scaled_dot_product_attention(q, q, q, true).dtype(), DType::BFloat16);
}

// Which head dims each setting takes: sublet's kernels refuse 48 and cuDNN takes it (auto runs it
// there); 20 (not a multiple of 8) has no fused path, and the cudnn setting says so.
TEST(CudaAttention, HeadDimsOutsideAFusedPathFailWithTheirReason) {
  SUBLET_SKIP_WITHOUT_GPU("the fused paths' head dims");
  Generator gen(700);
  const Tensor q48 = randn({1, 2, 10, 48}, gen).to(DType::BFloat16).to(kGpu);
  const Tensor q20 = randn({1, 2, 10, 20}, gen).to(DType::BFloat16).to(kGpu);
  {
    const ScopedTuning scope = use_backend(AttentionBackend::Sublet);
    try {
      F::scaled_dot_product_attention(q48, q48, q48, true);
      ADD_FAILURE() << "expected a ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("head dims 16, 32, 64 and 128 (cuDNN's: multiples of 8 up to 128), got 48"),
                std::string::npos)
          << e.what();
    }
  }
  {
    const ScopedTuning scope = use_backend(AttentionBackend::Auto);
    const Tensor out = F::scaled_dot_product_attention(q48, q48, q48, true);
    const Tensor wide = q48.to(DType::Float32);
    EXPECT_TRUE(relative_error(out, F::scaled_dot_product_attention(wide, wide, wide, true)) <= 2e-2);
    try {
      F::scaled_dot_product_attention(q20, q20, q20, true);
      ADD_FAILURE() << "expected a ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("got 20"), std::string::npos) << e.what();
    }
  }
  {
    const ScopedTuning scope = use_backend(AttentionBackend::Cudnn);
    try {
      F::scaled_dot_product_attention(q20, q20, q20, true);
      ADD_FAILURE() << "expected a ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("SUBLET_ATTENTION_BACKEND=cudnn, but cuDNN's fused attention takes head "
                                           "dims that are multiples of 8 up to 128"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("head dim 20"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sublet
