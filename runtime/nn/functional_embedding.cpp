// embedding: a gather of table rows, one node whose backward adds the rows back into the table.
#include "ops/embedding.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

Tensor embedding(const Tensor& weight, const Tensor& indices, const EmbeddingFuncOptions& options) {
  const char* op = "embedding";
  sublet::detail::check_defined(op, weight);
  sublet::detail::check_floating(op, weight);
  sublet::detail::check_defined(op, indices);
  sublet::detail::check_same_device(op, weight, indices);
  nn::detail::check_rank(op, "weight", weight, 2, "(num_embeddings, dim)");
  if (indices.dtype() != DType::Int64) {
    throw DTypeError(std::string(op) + ": indices must be int64, got " + dtype_name(indices.dtype()));
  }
  const ops::EmbeddingShape s{indices.numel(), weight.size(0), weight.size(1)};
  s.validate(op);
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(s.dim);
  Tensor out, ids;
  {
    NoGradGuard no_grad;
    const Tensor table = weight.contiguous();
    ids = indices.contiguous();
    out = Tensor::empty(out_sizes, weight.options());
    ops::embedding_forward(sublet::detail::context_for(out), s, weight.dtype(), table.data_ptr(),
                           ids.data<std::int64_t>(), out.data_ptr());
  }
  if (autograd::any_requires_grad({weight})) {
    autograd::record(op, {weight}, {out},
                     [s, deterministic = options.deterministic(), ids = autograd::save(ids)](const TensorList& grads) {
                       const Tensor grad_out = grads[0].contiguous();
                       Tensor grad_weight = Tensor::empty({s.num_embeddings, s.dim}, grad_out.options());
                       ops::embedding_backward(sublet::detail::context_for(grad_weight), s, grad_out.dtype(),
                                               grad_out.data_ptr(), ids.data<std::int64_t>(), deterministic,
                                               grad_weight.data_ptr());
                       return TensorList{grad_weight};
                     });
  }
  return out;
}

}  // namespace sublet::nn::functional
