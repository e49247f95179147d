#pragma once
// Which element-wise kernel an op takes on the GPU, decided on the host from the operands'
// strides and addresses. Plain C++ (no CUDA) so that the CPU suite tests the choice
// (tests/ops/test_elementwise_plan.cpp) on machines without a GPU.
//
// The dense kernel is the fast path: every operand is either dense in the output's layout
// (element i of the op is element i of the operand's memory, for any dense layout, contiguous
// or permuted) or a single broadcast element, and every dense operand starts on a 16-byte
// boundary. Then a thread moves 16 bytes per operand with one vector load or store and does no
// index arithmetic. Anything else (broadcast rows or channels, strided views, a base pointer
// moved off the boundary by a view's offset) takes the generic strided kernel.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/strided.h"

namespace sublet::ops::cuda {

// Bytes one vector load or store moves: float4, double2, two int64.
inline constexpr std::size_t kVectorBytes = 16;

template <int N>
struct DensePlan {
  bool dense = false;             // the dense kernel applies (operand 0, the output, is dense)
  std::array<bool, N> scalar{};   // input k (k >= 1) is one element broadcast to every position
  int vector_width = 1;           // elements per vector access (kVectorBytes / element size)
};

namespace detail {

// Strides of the dimensions with more than one element: the others never move an offset.
inline std::vector<std::int64_t> significant_strides(const Shape& sizes, const Shape& strides) {
  std::vector<std::int64_t> out;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1) out.push_back(strides[d]);
  }
  return out;
}

// True when the layout covers exactly numel consecutive elements, each once: sorted by
// stride, every dimension's stride is the product of the sizes of the faster ones.
inline bool is_dense(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (stride, size)
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1) dims.push_back({strides[d], sizes[d]});
  }
  std::sort(dims.begin(), dims.end());
  std::int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

inline bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes == 0; }

}  // namespace detail

// Operand 0 is the output, operands 1..N-1 the inputs; strides[k] has one entry per dimension
// of sizes. element_size must divide kVectorBytes (1, 2, 4, 8 or 16 bytes).
template <int N>
DensePlan<N> plan_dense(const Shape& sizes, const std::array<const Shape*, N>& strides,
                        const std::array<const void*, N>& data, std::size_t element_size) {
  DensePlan<N> plan;
  for (int k = 0; k < N; ++k) {
    if (strides[k]->size() != sizes.size()) return plan;  // the generic path reports the error
  }
  if (!detail::is_dense(sizes, *strides[0])) return plan;
  const std::vector<std::int64_t> layout = detail::significant_strides(sizes, *strides[0]);
  bool aligned = detail::aligned(data[0]);
  for (int k = 1; k < N; ++k) {
    const std::vector<std::int64_t> mine = detail::significant_strides(sizes, *strides[k]);
    const bool broadcast = !mine.empty() && std::all_of(mine.begin(), mine.end(), [](std::int64_t s) { return s == 0; });
    if (broadcast) {
      plan.scalar[k] = true;  // read as one element: its address needs no alignment
    } else if (mine == layout) {
      aligned = aligned && detail::aligned(data[k]);
    } else {
      return plan;
    }
  }
  // Misaligned dense operands would need a scalar prologue; they are views with an offset,
  // which are rare in training, so the strided kernel serves them.
  if (!aligned || element_size == 0 || kVectorBytes % element_size != 0) return plan;
  plan.dense = true;
  plan.vector_width = static_cast<int>(kVectorBytes / element_size);
  return plan;
}

// The row path, for what the dense path refuses but a [rows, cols] view with dense rows serves:
// a vector broadcast along the last dimension (a bias: column stride 1, row stride 0), one value
// per row (column stride 0), rows further apart than their width (a narrowed view). Every
// operand's rows are read and written as 16-byte vectors, so every dense row must start on a
// 16-byte boundary and cols must be a multiple of the vector width; the output's rows are dense.
// A thread finds its row and column with one fast division (IntDivider, ops/cuda/int_divider.h),
// hence the 2^31 limit on the number of vectors. Anything else takes the strided kernel.
template <int N>
struct RowPlan {
  bool applies = false;
  std::int64_t rows = 1, cols = 0;
  std::array<std::int64_t, N> row_stride{};
  std::array<bool, N> per_row{};  // input k (k >= 1) is one element per row, at row * row_stride
  int vector_width = 1;
};

template <int N>
RowPlan<N> plan_rows(const Shape& sizes, const std::array<const Shape*, N>& strides,
                     const std::array<const void*, N>& data, std::size_t element_size) {
  RowPlan<N> plan;
  for (int k = 0; k < N; ++k) {
    if (strides[k]->size() != sizes.size()) return plan;
  }
  // The dimensions of more than one element, adjacent ones merged where every operand steps over
  // them as over one: [B, T, C] plus a [C] bias is [B * T, C].
  std::vector<std::int64_t> dim_sizes;
  std::vector<std::array<std::int64_t, N>> dim_strides;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    std::array<std::int64_t, N> here{};
    for (int k = 0; k < N; ++k) here[k] = (*strides[k])[d];
    bool merges = !dim_sizes.empty();
    for (int k = 0; k < N && merges; ++k) merges = dim_strides.back()[k] == here[k] * sizes[d];
    if (merges) {
      dim_sizes.back() *= sizes[d];
      dim_strides.back() = here;
    } else {
      dim_sizes.push_back(sizes[d]);
      dim_strides.push_back(here);
    }
  }
  if (dim_sizes.empty() || dim_sizes.size() > 2 || element_size == 0 || kVectorBytes % element_size != 0) return plan;
  const bool two_dims = dim_sizes.size() == 2;
  const auto width = static_cast<std::int64_t>(kVectorBytes / element_size);
  plan.cols = dim_sizes.back();
  plan.rows = two_dims ? dim_sizes.front() : 1;
  if (plan.cols % width != 0 || plan.rows * (plan.cols / width) >= (std::int64_t{1} << 31)) return plan;
  const auto row_bytes_aligned = [&](std::int64_t row_stride) {
    return (row_stride * static_cast<std::int64_t>(element_size)) % static_cast<std::int64_t>(kVectorBytes) == 0;
  };
  for (int k = 0; k < N; ++k) {
    const std::int64_t col_stride = dim_strides.back()[k];
    const std::int64_t row_stride = two_dims ? dim_strides.front()[k] : 0;
    if (k == 0 && plan.rows > 1 && row_stride < plan.cols) return plan;  // output rows overlap
    if (col_stride == 0 && k > 0) {
      plan.per_row[k] = true;  // read one element at a time: no alignment needed
    } else if (col_stride != 1 || !detail::aligned(data[k]) || !row_bytes_aligned(row_stride)) {
      return plan;
    }
    plan.row_stride[k] = row_stride;
  }
  plan.applies = true;
  plan.vector_width = static_cast<int>(width);
  return plan;
}

}  // namespace sublet::ops::cuda
