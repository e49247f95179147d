#include "ops/cpu/loss_cpu.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"

namespace sublet::ops::cpu {

namespace {

// log(sum(exp(row))) shifted by the row maximum so that large logits do not overflow.
template <typename T>
double log_sum_exp(const T* row, std::int64_t classes) {
  const double max = *std::max_element(row, row + classes);
  if (std::isinf(max)) return max;  // all -inf (or a +inf): the shift would produce NaN
  double sum = 0;
  for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - max);
  return max + std::log(sum);
}

// Checked before any parallel loop: an exception must not escape an OpenMP region.
// ignore_index, when given, is a target that is allowed (and skipped by the caller).
void check_targets(const char* op, const ClassScoresShape& s, const std::int64_t* targets,
                   const std::int64_t* ignore_index = nullptr) {
  for (std::int64_t n = 0; n < s.batch; ++n) {
    if (ignore_index != nullptr && targets[n] == *ignore_index) continue;
    if (targets[n] < 0 || targets[n] >= s.classes) {
      throw ValueError(std::string(op) + ": target " + std::to_string(targets[n]) +
                       " of sample " + std::to_string(n) + " is outside [0, " +
                       std::to_string(s.classes) + ")");
    }
  }
}

}  // namespace

template <typename T>
void log_softmax_forward(const ClassScoresShape& s, const T* input, T* output) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const T* row = input + n * s.classes;
    const double lse = log_sum_exp(row, s.classes);
    for (std::int64_t j = 0; j < s.classes; ++j) output[n * s.classes + j] = static_cast<T>(row[j] - lse);
  }
}

template <typename T>
void log_softmax_backward(const ClassScoresShape& s, const T* grad_output, const T* output,
                          T* grad_input) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const std::int64_t base = n * s.classes;
    double grad_sum = 0;
    for (std::int64_t j = 0; j < s.classes; ++j) grad_sum += grad_output[base + j];
    for (std::int64_t j = 0; j < s.classes; ++j) {
      grad_input[base + j] = static_cast<T>(grad_output[base + j] - std::exp(static_cast<double>(output[base + j])) * grad_sum);
    }
  }
}

template <typename T>
void nll_loss_forward(const ClassScoresShape& s, const T* log_probs, const std::int64_t* targets,
                      T* loss) {
  check_targets("nll_loss", s, targets);
  double total = 0;
  for (std::int64_t n = 0; n < s.batch; ++n) total -= log_probs[n * s.classes + targets[n]];
  *loss = static_cast<T>(total / static_cast<double>(s.batch));
}

template <typename T>
void nll_loss_backward(const ClassScoresShape& s, const T* grad_loss, const std::int64_t* targets,
                       T* grad_log_probs) {
  check_targets("nll_loss", s, targets);
  const T share = static_cast<T>(-static_cast<double>(*grad_loss) / static_cast<double>(s.batch));
  std::fill(grad_log_probs, grad_log_probs + s.numel(), T(0));
  for (std::int64_t n = 0; n < s.batch; ++n) grad_log_probs[n * s.classes + targets[n]] = share;
}

template <typename T>
void cross_entropy_forward(const ClassScoresShape& s, const T* logits, const std::int64_t* targets,
                           const CrossEntropyParams& params, T* loss, T* row_log_sum_exp) {
  check_targets("cross_entropy", s, targets, &params.ignore_index);
  const double eps = params.label_smoothing;
  double total = 0;
  std::int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, counted)
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const T* row = logits + n * s.classes;
    const double lse = log_sum_exp(row, s.classes);
    row_log_sum_exp[n] = static_cast<T>(lse);
    if (targets[n] == params.ignore_index) continue;
    const double target_nll = lse - row[targets[n]];
    double smooth_nll = 0;  // mean over classes of -log p
    if (eps != 0) {
      for (std::int64_t j = 0; j < s.classes; ++j) smooth_nll += lse - row[j];
      smooth_nll /= static_cast<double>(s.classes);
    }
    total += (1 - eps) * target_nll + eps * smooth_nll;
    ++counted;
  }
  *loss = static_cast<T>(total / static_cast<double>(counted));  // 0/0 = NaN when all are ignored, as PyTorch
}

template <typename T>
void cross_entropy_backward(const ClassScoresShape& s, const T* grad_loss, const T* logits,
                            const std::int64_t* targets, const T* row_log_sum_exp, const CrossEntropyParams& params,
                            T* grad_logits) {
  check_targets("cross_entropy", s, targets, &params.ignore_index);
  std::int64_t counted = 0;
  for (std::int64_t n = 0; n < s.batch; ++n) counted += targets[n] != params.ignore_index;
  const double scale = static_cast<double>(*grad_loss) / static_cast<double>(counted);
  const double eps = params.label_smoothing;
  const double smooth_share = eps / static_cast<double>(s.classes);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < s.batch; ++n) {
    const T* row = logits + n * s.classes;
    T* grad_row = grad_logits + n * s.classes;
    if (targets[n] == params.ignore_index) {
      std::fill(grad_row, grad_row + s.classes, T(0));
      continue;
    }
    const double lse = row_log_sum_exp[n];
    for (std::int64_t j = 0; j < s.classes; ++j) {
      const double target_share = (j == targets[n] ? 1 - eps : 0.0) + smooth_share;
      grad_row[j] = static_cast<T>(scale * (std::exp(row[j] - lse) - target_share));
    }
  }
}

#define SUBLET_INSTANTIATE_LOSS_CPU(T)                                                             \
  template void log_softmax_forward<T>(const ClassScoresShape&, const T*, T*);                     \
  template void log_softmax_backward<T>(const ClassScoresShape&, const T*, const T*, T*);          \
  template void nll_loss_forward<T>(const ClassScoresShape&, const T*, const std::int64_t*, T*);   \
  template void nll_loss_backward<T>(const ClassScoresShape&, const T*, const std::int64_t*, T*);  \
  template void cross_entropy_forward<T>(const ClassScoresShape&, const T*, const std::int64_t*,   \
                                         const CrossEntropyParams&, T*, T*);                       \
  template void cross_entropy_backward<T>(const ClassScoresShape&, const T*, const T*,             \
                                          const std::int64_t*, const T*, const CrossEntropyParams&, T*);
SUBLET_INSTANTIATE_LOSS_CPU(float)
SUBLET_INSTANTIATE_LOSS_CPU(double)
#undef SUBLET_INSTANTIATE_LOSS_CPU

}  // namespace sublet::ops::cpu
