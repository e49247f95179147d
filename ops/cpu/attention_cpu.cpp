// Forward: per query row, the scores over the keys it sees, their max and log-sum-exp, and the
// softmax-weighted sum of values. Backward rebuilds each row's softmax from the saved
// log-sum-exp (p = exp(score - lse)) and applies dS = P * (dP - rowsum(P * dP)).
#include "ops/cpu/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace sublet::ops::cpu {

namespace {

// Row `t` of head (b, h) of an operand.
template <typename P>
P* row(P* base, const AttentionStrides& s, std::int64_t b, std::int64_t h, std::int64_t t) {
  return base + b * s.batch + h * s.head + t * s.token;
}

template <typename T>
double dot(const T* a, const T* b, std::int64_t n) {
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

// The keys row t sees: [0, visible_keys).
std::int64_t visible_keys(const AttentionShape& shape, std::int64_t t) {
  std::int64_t n = 0;
  while (n < shape.key_len && !attention_masked(t, n, shape.causal)) ++n;
  return n;
}

}  // namespace

template <typename T>
void attention_forward(const Context&, const AttentionShape& shape, DType, ConstAttentionRef query,
                       ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse) {
  const auto* q = static_cast<const T*>(query.data);
  const auto* k = static_cast<const T*>(key.data);
  const auto* v = static_cast<const T*>(value.data);
  auto* o = static_cast<T*>(out.data);
  auto* lse_out = static_cast<T*>(lse);
  const std::int64_t D = shape.head_dim, heads = shape.batch * shape.heads;
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t bh = 0; bh < heads; ++bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads;
    std::vector<double> scores(static_cast<std::size_t>(shape.key_len));
    std::vector<double> acc(static_cast<std::size_t>(D));
    for (std::int64_t t = 0; t < shape.query_len; ++t) {
      const T* qt = row(q, query.strides, b, h, t);
      const std::int64_t n = visible_keys(shape, t);
      double max_score = -std::numeric_limits<double>::infinity();
      for (std::int64_t s = 0; s < n; ++s) {
        scores[s] = shape.scale * dot(qt, row(k, key.strides, b, h, s), D);
        max_score = std::max(max_score, scores[s]);
      }
      double sum = 0;
      for (std::int64_t s = 0; s < n; ++s) sum += std::exp(scores[s] - max_score);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t s = 0; s < n; ++s) {
        const double p = std::exp(scores[s] - max_score) / sum;
        const T* vs = row(v, value.strides, b, h, s);
        for (std::int64_t d = 0; d < D; ++d) acc[d] += p * static_cast<double>(vs[d]);
      }
      T* ot = row(o, out.strides, b, h, t);
      for (std::int64_t d = 0; d < D; ++d) ot[d] = static_cast<T>(acc[d]);
      lse_out[bh * shape.query_len + t] = static_cast<T>(max_score + std::log(sum));
    }
  }
}

template <typename T>
void attention_backward(const Context&, const AttentionShape& shape, DType, ConstAttentionRef query,
                        ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef,
                        ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
                        AttentionRef grad_value) {
  const auto* q = static_cast<const T*>(query.data);
  const auto* k = static_cast<const T*>(key.data);
  const auto* v = static_cast<const T*>(value.data);
  const auto* dout = static_cast<const T*>(grad_out.data);
  const auto* lse_in = static_cast<const T*>(lse);
  auto* dq = static_cast<T*>(grad_query.data);
  auto* dk = static_cast<T*>(grad_key.data);
  auto* dv = static_cast<T*>(grad_value.data);
  const std::int64_t D = shape.head_dim, heads = shape.batch * shape.heads;
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t bh = 0; bh < heads; ++bh) {
    const std::int64_t b = bh / shape.heads, h = bh % shape.heads;
    // dK and dV of this head, summed over the query rows in double, written once at the end.
    std::vector<double> dk_acc(static_cast<std::size_t>(shape.key_len * D), 0.0);
    std::vector<double> dv_acc(static_cast<std::size_t>(shape.key_len * D), 0.0);
    std::vector<double> p(static_cast<std::size_t>(shape.key_len)), dp(static_cast<std::size_t>(shape.key_len));
    std::vector<double> dq_acc(static_cast<std::size_t>(D));
    for (std::int64_t t = 0; t < shape.query_len; ++t) {
      const T* qt = row(q, query.strides, b, h, t);
      const T* dot_t = row(dout, grad_out.strides, b, h, t);
      const double row_lse = static_cast<double>(lse_in[bh * shape.query_len + t]);
      const std::int64_t n = visible_keys(shape, t);
      double row_sum = 0;  // rowsum(P * dP)
      for (std::int64_t s = 0; s < n; ++s) {
        p[s] = std::exp(shape.scale * dot(qt, row(k, key.strides, b, h, s), D) - row_lse);
        dp[s] = dot(dot_t, row(v, value.strides, b, h, s), D);
        row_sum += p[s] * dp[s];
      }
      std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
      for (std::int64_t s = 0; s < n; ++s) {
        const double ds = p[s] * (dp[s] - row_sum) * shape.scale;
        const T* ks = row(k, key.strides, b, h, s);
        for (std::int64_t d = 0; d < D; ++d) {
          dq_acc[d] += ds * static_cast<double>(ks[d]);
          dk_acc[s * D + d] += ds * static_cast<double>(qt[d]);
          dv_acc[s * D + d] += p[s] * static_cast<double>(dot_t[d]);
        }
      }
      T* dqt = row(dq, grad_query.strides, b, h, t);
      for (std::int64_t d = 0; d < D; ++d) dqt[d] = static_cast<T>(dq_acc[d]);
    }
    for (std::int64_t s = 0; s < shape.key_len; ++s) {
      T* dks = row(dk, grad_key.strides, b, h, s);
      T* dvs = row(dv, grad_value.strides, b, h, s);
      for (std::int64_t d = 0; d < D; ++d) {
        dks[d] = static_cast<T>(dk_acc[s * D + d]);
        dvs[d] = static_cast<T>(dv_acc[s * D + d]);
      }
    }
  }
}

#define SUBLET_INSTANTIATE_ATTENTION(T)                                                                            \
  template void attention_forward<T>(const Context&, const AttentionShape&, DType, ConstAttentionRef,              \
                                     ConstAttentionRef, ConstAttentionRef, AttentionRef, void*);                   \
  template void attention_backward<T>(const Context&, const AttentionShape&, DType, ConstAttentionRef,             \
                                      ConstAttentionRef, ConstAttentionRef, ConstAttentionRef, ConstAttentionRef,  \
                                      const void*, AttentionRef, AttentionRef, AttentionRef);
SUBLET_INSTANTIATE_ATTENTION(float)
SUBLET_INSTANTIATE_ATTENTION(double)
#undef SUBLET_INSTANTIATE_ATTENTION

}  // namespace sublet::ops::cpu
