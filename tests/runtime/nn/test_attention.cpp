// scaled_dot_product_attention on the CPU: the forward against softmax(scale q k^T + mask) v
// composed from Tensor ops, float64 gradcheck (central finite differences, error <= 1e-6 as
// defined in runtime/gradcheck.h) causal and not, equal and unequal query/key lengths, the
// causal mask's exact extent, q/k/v read in place as views of one projection, and the errors;
// packed_self_attention against the op on the three views of its projection (the same values
// and the same projection gradient, bit for bit), its fallbacks and its errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <sstream>
#include <limits>
#include <vector>

#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

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

// softmax(scale q k^T + mask) v from matmul, exp, sum and div over [B * H, T, D].
Tensor composite_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  const std::int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2), D = q.size(3);
  const Tensor q3 = q.reshape({B * H, L, D}), k3 = k.reshape({B * H, S, D}), v3 = v.reshape({B * H, S, D});
  Tensor scores = q3.matmul(k3.transpose(1, 2)).mul(scale);
  if (causal) {
    std::vector<double> mask(static_cast<std::size_t>(L * S), 0.0);
    for (std::int64_t t = 0; t < L; ++t) {
      for (std::int64_t s = t + 1; s < S; ++s) mask[t * S + s] = -std::numeric_limits<double>::infinity();
    }
    scores = scores.add(Tensor::from_vector<double>(mask, {L, S}).to(q.dtype()));
  }
  const Tensor row_max = scores.max(2, true).first.detach();
  const Tensor e = scores.sub(row_max).exp();
  return e.div(e.sum({2}, true)).matmul(v3).reshape({B, H, L, D});
}

// max |a - b| over all elements (NaN anywhere gives NaN).
double max_difference(const Tensor& a, const Tensor& b) {
  return a.to(DType::Float64).sub(b.to(DType::Float64)).pow(2.0).max().sqrt().item<double>();
}

const std::vector<Case> kCases = {
    {2, 3, 5, 5, 4, false}, {2, 3, 5, 5, 4, true},  {1, 2, 3, 7, 4, true},   {1, 2, 7, 3, 4, true},
    {1, 1, 1, 6, 8, false}, {1, 1, 1, 6, 8, true},  {2, 3, 64, 64, 16, true}, {1, 2, 9, 9, 1, true},
};

TEST(ScaledDotProductAttention, MatchesTheCompositeReference) {
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    const Tensor q = random64({c.batch, c.heads, c.query_len, c.head_dim}, seed++);
    const Tensor k = random64({c.batch, c.heads, c.key_len, c.head_dim}, seed++);
    const Tensor v = random64({c.batch, c.heads, c.key_len, c.head_dim}, seed++);
    const Tensor out = F::scaled_dot_product_attention(q, k, v, c.causal);
    EXPECT_EQ(out.sizes(), q.sizes());
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    EXPECT_TRUE(max_difference(out, composite_attention(q, k, v, c.causal, scale)) <= 1e-12);
    const Tensor scaled = F::scaled_dot_product_attention(q, k, v, c.causal, 0.37);
    EXPECT_TRUE(max_difference(scaled, composite_attention(q, k, v, c.causal, 0.37)) <= 1e-12);
  }
}

TEST(ScaledDotProductAttention, GradcheckCausalAndNot) {
  const std::vector<Case> cases = {{1, 2, 4, 4, 3, false}, {1, 2, 4, 4, 3, true}, {2, 1, 3, 5, 2, true},
                                   {1, 1, 5, 3, 2, true},  {1, 1, 1, 4, 3, false}};
  std::uint64_t seed = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(name(c));
    const Tensor q = random64({c.batch, c.heads, c.query_len, c.head_dim}, seed++, true);
    const Tensor k = random64({c.batch, c.heads, c.key_len, c.head_dim}, seed++, true);
    const Tensor v = random64({c.batch, c.heads, c.key_len, c.head_dim}, seed++, true);
    const GradcheckResult result = gradcheck_report(
        [&](const std::vector<Tensor>& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], c.causal); },
        {q, k, v});
    EXPECT_TRUE(result.max_error <= 1e-6) << result.worst;
  }
}

// q, k and v as views of one [B, T, 3, H, D] projection, transposed to [B, H, T, D]: read in
// place, the same values as contiguous copies, and the gradient checked through the views.
TEST(ScaledDotProductAttention, ViewsOfOneProjectionAreReadInPlace) {
  const std::int64_t B = 2, T = 6, H = 3, D = 4;
  const Tensor qkv = random64({B, T, 3, H, D}, 200, true);
  const auto split = [&](const Tensor& x, std::int64_t i) { return x.select(2, i).transpose(1, 2); };
  const Tensor q = split(qkv, 0), k = split(qkv, 1), v = split(qkv, 2);
  ASSERT_FALSE(q.is_contiguous());
  const Tensor out = F::scaled_dot_product_attention(q, k, v, true);
  const Tensor expected = F::scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), true);
  EXPECT_TRUE(max_difference(out, expected) <= 0.0);
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());  // [B, T, H, D] in memory: heads merge without a copy
  const GradcheckResult result = gradcheck_report(
      [&](const std::vector<Tensor>& in) {
        return F::scaled_dot_product_attention(split(in[0], 0), split(in[0], 1), split(in[0], 2), true);
      },
      {qkv});
  EXPECT_TRUE(result.max_error <= 1e-6) << result.worst;
}

// Changing key/value j must change causal rows j and later and leave rows before j bit for bit:
// a mask that hid the diagonal or showed one future key fails here.
TEST(ScaledDotProductAttention, CausalRowsSeeExactlyTheKeysUpToThemselves) {
  const std::int64_t T = 6, D = 4;
  const Tensor q = random64({1, 1, T, D}, 300), k = random64({1, 1, T, D}, 301), v = random64({1, 1, T, D}, 302);
  const Tensor out = F::scaled_dot_product_attention(q, k, v, true);
  // Row 0 sees key 0 alone: its output is value row 0.
  EXPECT_TRUE(max_difference(out.narrow(2, 0, 1), v.narrow(2, 0, 1)) <= 1e-15);
  for (std::int64_t j = 1; j < T; ++j) {
    SCOPED_TRACE("key " + std::to_string(j));
    Tensor v2 = v.clone();
    v2.narrow(2, j, 1).add_(1.0);
    const Tensor out2 = F::scaled_dot_product_attention(q, k, v2, true);
    EXPECT_TRUE(max_difference(out2.narrow(2, 0, j), out.narrow(2, 0, j)) <= 0.0);
    EXPECT_TRUE(max_difference(out2.narrow(2, j, 1), out.narrow(2, j, 1)) >= 1e-3);
  }
}

TEST(ScaledDotProductAttention, Float32AgreesWithFloat64) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const Tensor q = random64({2, 2, 17, 8}, 400), k = random64({2, 2, 17, 8}, 401), v = random64({2, 2, 17, 8}, 402);
    const Tensor grad = random64({2, 2, 17, 8}, 403);
    std::vector<Tensor> grads[2];
    Tensor outs[2];
    for (int i = 0; i < 2; ++i) {
      const DType dtype = i == 0 ? DType::Float64 : DType::Float32;
      Tensor qi = q.to(dtype).clone().requires_grad_(), ki = k.to(dtype).clone().requires_grad_();
      Tensor vi = v.to(dtype).clone().requires_grad_();
      outs[i] = F::scaled_dot_product_attention(qi, ki, vi, causal);
      EXPECT_EQ(outs[i].dtype(), dtype);
      outs[i].backward(grad.to(dtype));
      grads[i] = {qi.grad(), ki.grad(), vi.grad()};
    }
    EXPECT_TRUE(max_difference(outs[0], outs[1]) <= 1e-5);
    for (int g = 0; g < 3; ++g) EXPECT_TRUE(max_difference(grads[0][g], grads[1][g]) <= 1e-5) << "gradient " << g;
  }
}

TEST(ScaledDotProductAttention, NoQueryRowsGivesZeroKeyAndValueGradients) {
  Tensor q = random64({1, 2, 0, 4}, 500, true), k = random64({1, 2, 3, 4}, 501, true), v = random64({1, 2, 3, 4}, 502, true);
  const Tensor out = F::scaled_dot_product_attention(q, k, v, true);
  EXPECT_EQ(out.sizes(), (Shape{1, 2, 0, 4}));
  out.backward(zeros({1, 2, 0, 4}, TensorOptions().dtype(DType::Float64)));
  ASSERT_TRUE(k.grad().defined() && v.grad().defined());
  EXPECT_TRUE(k.grad().pow(2.0).sum().item<double>() <= 0.0);
  EXPECT_TRUE(v.grad().pow(2.0).sum().item<double>() <= 0.0);
}

TEST(ScaledDotProductAttention, ErrorsNameTheOpAndTheShapes) {
  const Tensor q = random64({1, 2, 3, 4}, 600);
  expect_throw_with([&] { F::scaled_dot_product_attention(random64({2, 3, 4}, 601), q, q); },
                    {"scaled_dot_product_attention", "query must be 4-D", "[2, 3, 4]"});
  expect_throw_with([&] { F::scaled_dot_product_attention(q, random64({1, 2, 3, 5}, 602), q); },
                    {"scaled_dot_product_attention", "[1, 2, S, 4]", "[1, 2, 3, 5]"});
  expect_throw_with([&] { F::scaled_dot_product_attention(q, q, random64({1, 2, 4, 4}, 603)); },
                    {"scaled_dot_product_attention", "value [1, 2, 4, 4]"});
  expect_throw_with([&] { F::scaled_dot_product_attention(q, random64({1, 2, 0, 4}, 604), random64({1, 2, 0, 4}, 605)); },
                    {"scaled_dot_product_attention", "key length S must be > 0"});
  expect_throw_with([&] { F::scaled_dot_product_attention(q, q.to(DType::Float32), q); },
                    {"scaled_dot_product_attention", "float64", "float32"});
  expect_throw_with([&] { F::scaled_dot_product_attention(q, q, q, false, std::nan("")); },
                    {"scaled_dot_product_attention", "scale must be finite"});
  expect_throw_with([&] {
    const Tensor half = q.to(DType::BFloat16);
    F::scaled_dot_product_attention(half, half, half);
  }, {"scaled_dot_product_attention", "bfloat16", "cpu"});
  const Tensor ids = zeros({1, 2, 3, 4}, TensorOptions().dtype(DType::Int64));
  expect_throw_with([&] { F::scaled_dot_product_attention(ids, ids, ids); }, {"scaled_dot_product_attention", "int64"});
}

// The output and the projection's gradient of packed_self_attention and of the op on the three
// [B, H, T, D] views of the same projection (whose narrow backwards sum three zero-padded
// gradients), for one upstream gradient.
struct PackedPair {
  Tensor packed_out, views_out, packed_grad, views_grad;
};
PackedPair packed_and_views(const Tensor& qkv, std::int64_t heads, bool causal, std::uint64_t seed) {
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  const Tensor grad = random64({B, heads, T, C / heads}, seed).to(qkv.dtype());
  PackedPair pair;
  Tensor a = qkv.detach().clone().requires_grad_();
  pair.packed_out = F::packed_self_attention(a, heads, causal);
  pair.packed_out.backward(grad);
  pair.packed_grad = a.grad();
  Tensor b = qkv.detach().clone().requires_grad_();
  const auto view = [&](std::int64_t i) {
    return b.narrow(2, i * C, C).view({B, T, heads, C / heads}).transpose(1, 2);
  };
  pair.views_out = F::scaled_dot_product_attention(view(0), view(1), view(2), causal);
  pair.views_out.backward(grad);
  pair.views_grad = b.grad();
  return pair;
}

TEST(PackedSelfAttention, MatchesTheOpOnTheThreeViewsBitForBit) {
  std::uint64_t seed = 700;
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    for (const bool causal : {false, true}) {
      for (const auto& [B, T, H, D] : std::vector<std::array<std::int64_t, 4>>{{2, 7, 3, 4}, {1, 1, 2, 8}, {3, 65, 2, 16}}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (causal ? " causal" : "") + " B" + std::to_string(B) + " T" +
                     std::to_string(T) + " H" + std::to_string(H) + " D" + std::to_string(D));
        const Tensor qkv = random64({B, T, 3 * H * D}, seed++).to(dtype);
        const PackedPair pair = packed_and_views(qkv, H, causal, seed++);
        EXPECT_EQ(pair.packed_out.sizes(), (Shape{B, H, T, D}));
        EXPECT_EQ(pair.packed_out.dtype(), dtype);
        EXPECT_TRUE(pair.packed_out.transpose(1, 2).is_contiguous());  // heads merge without a copy
        EXPECT_TRUE(max_difference(pair.packed_out, pair.views_out) <= 0.0);
        ASSERT_TRUE(pair.packed_grad.defined());
        EXPECT_EQ(pair.packed_grad.sizes(), qkv.sizes());
        EXPECT_TRUE(max_difference(pair.packed_grad, pair.views_grad) <= 0.0);
        EXPECT_TRUE(pair.packed_grad.pow(2.0).sum().item<double>() > 0.0);
      }
    }
  }
}

TEST(PackedSelfAttention, GradcheckThroughThePackedGradient) {
  const Tensor qkv = random64({2, 4, 3 * 2 * 3}, 800, true);
  for (const bool causal : {false, true}) {
    const GradcheckResult result = gradcheck_report(
        [&](const std::vector<Tensor>& in) { return F::packed_self_attention(in[0], 2, causal, 0.61); }, {qkv});
    EXPECT_TRUE(result.max_error <= 1e-6) << result.worst;
  }
}

// A projection whose last dim is not dense (here every other column of a wider one) is copied
// first; the result and the gradient are those of the dense projection.
TEST(PackedSelfAttention, StridedProjectionIsCopiedFirst) {
  const Tensor wide = random64({2, 5, 2 * 3 * 2 * 4}, 900);
  const Tensor strided = wide.view({2, 5, 3 * 2 * 4, 2}).select(3, 0);
  ASSERT_NE(strided.stride(2), 1);
  const PackedPair from_strided = packed_and_views(strided, 2, true, 901);
  const PackedPair from_dense = packed_and_views(strided.contiguous(), 2, true, 901);
  EXPECT_TRUE(max_difference(from_strided.packed_out, from_dense.packed_out) <= 0.0);
  EXPECT_TRUE(max_difference(from_strided.packed_grad, from_dense.packed_grad) <= 0.0);
}

TEST(PackedSelfAttention, ErrorsNameTheOpAndTheShapes) {
  expect_throw_with([&] { F::packed_self_attention(random64({2, 3, 12, 1}, 1000), 2); },
                    {"packed_self_attention", "qkv must be 3-D", "(B,T,3*H*D)"});
  expect_throw_with([&] { F::packed_self_attention(random64({2, 3, 12}, 1001), 3); },
                    {"packed_self_attention", "3 * heads * head_dim", "[2, 3, 12]", "heads 3"});
  expect_throw_with([&] { F::packed_self_attention(random64({2, 3, 12}, 1002), 0); },
                    {"packed_self_attention", "heads 0"});
  const Tensor ids = zeros({1, 2, 6}, TensorOptions().dtype(DType::Int64));
  expect_throw_with([&] { F::packed_self_attention(ids, 1); }, {"packed_self_attention", "int64"});
}

}  // namespace
}  // namespace sublet
