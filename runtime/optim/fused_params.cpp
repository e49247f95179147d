#include "runtime/optim/fused_params.h"

#include "runtime/kernel_args.h"

namespace sublet::optim::detail {

FusedParams fused_params(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices) {
  FusedParams out;
  if (indices.empty()) return out;
  const Tensor& first = params[indices.front()];
  for (std::size_t i : indices) {
    const Tensor& p = params[i];
    // Dense, in any layout (channels-last included): the kernels walk parameter, gradient and
    // state as flat arrays, which agree element for element once they share the strides.
    if (p.device() != first.device() || p.dtype() != first.dtype() || !p.is_non_overlapping_and_dense()) return out;
    if (p.dtype() != DType::Float32 && p.dtype() != DType::Float64) return out;
  }
  out.grads.reserve(indices.size());
  for (std::size_t i : indices) {
    Tensor g = params[i].grad();
    if (g.dtype() != first.dtype() || g.device() != first.device() || g.sizes() != params[i].sizes()) return FusedParams{};
    out.grads.push_back(sublet::detail::in_layout(g, params[i].strides()));
  }
  out.usable = true;
  out.dtype = first.dtype();
  out.ctx = ops::Context::for_device(first.device());
  return out;
}

}  // namespace sublet::optim::detail
