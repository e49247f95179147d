#include "runtime/optim/fused_params.h"

#include "runtime/kernel_args.h"

namespace sublet::optim::detail {

bool fused_supported(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices) {
  if (indices.empty()) return false;
  const Tensor& first = params[indices.front()];
  if (first.dtype() != DType::Float32 && first.dtype() != DType::Float64) return false;
  for (std::size_t i : indices) {
    const Tensor& p = params[i];
    // Dense, in any layout (channels-last included): the kernels walk parameter, gradient and
    // state as flat arrays, which agree element for element once they share the strides.
    if (p.device() != first.device() || p.dtype() != first.dtype() || !p.is_non_overlapping_and_dense()) return false;
    const Tensor g = p.grad();
    if (!g.defined() || g.dtype() != first.dtype() || g.device() != first.device() || g.sizes() != p.sizes())
      return false;
  }
  return true;
}

FusedParams fused_params(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices) {
  FusedParams out;
  if (!fused_supported(params, indices)) return out;
  const Tensor& first = params[indices.front()];
  out.grads.reserve(indices.size());
  for (std::size_t i : indices) out.grads.push_back(sublet::detail::in_layout(params[i].grad(), params[i].strides()));
  out.usable = true;
  out.dtype = first.dtype();
  out.ctx = ops::Context::for_device(first.device());
  return out;
}

}  // namespace sublet::optim::detail
