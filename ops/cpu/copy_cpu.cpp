#include "ops/cpu/copy_cpu.h"

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cpu/strided_loop.h"

namespace sublet::ops::cpu {

void copy(const Shape& sizes, DType dst_dtype, StridedRef dst, DType src_dtype, ConstStridedRef src) {
  auto loop = make_loop_shape<2>(sizes, {&dst.strides, &src.strides});
  dispatch_dtype(dst_dtype, [&](auto dst_tag) {
    dispatch_dtype(src_dtype, [&](auto src_tag) {
      using D = decltype(dst_tag);
      using S = decltype(src_tag);
      D* d = static_cast<D*>(dst.data);
      const S* s = static_cast<const S*>(src.data);
      parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
        D* dp = d + off[0];
        const S* sp = s + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (std::int64_t i = 0; i < n; ++i) dp[i] = static_cast<D>(sp[i]);
        } else {
          for (std::int64_t i = 0; i < n; ++i) dp[i * st[0]] = static_cast<D>(sp[i * st[1]]);
        }
      });
    });
  });
}

void fill(DType dtype, const Shape& sizes, StridedRef dst, double value) {
  auto loop = make_loop_shape<1>(sizes, {&dst.strides});
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    T* d = static_cast<T*>(dst.data);
    parallel_for_each_run(loop, [&](const auto& off, std::int64_t n, const auto& st) {
      for (std::int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = v;
    });
  });
}

}  // namespace sublet::ops::cpu
