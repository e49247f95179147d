#include "runtime/distributed/data_parallel.h"

#include "core/errors.h"
#include "memory/current_stream.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"

namespace sublet::distributed {
namespace {

std::vector<GradientSpec> gradient_specs(const std::vector<Tensor>& parameters) {
  std::vector<GradientSpec> specs;
  specs.reserve(parameters.size());
  for (const Tensor& p : parameters) specs.push_back({p.nbytes(), p.dtype()});
  return specs;
}

}  // namespace

DataParallel::DataParallel(ProcessGroup& group, std::vector<Tensor> parameters, std::vector<Tensor> buffers,
                           BucketOptions bucket_options)
    : group_(group),
      parameters_(std::move(parameters)),
      plan_(assign_gradient_buckets(gradient_specs(parameters_), bucket_options)),
      readiness_(plan_) {
  const Device device = group_.device();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    if (p.device() != device || !p.is_contiguous())
      throw ValueError("DataParallel: parameter " + std::to_string(i) + " is " + p.to_string() +
                       "; expected a contiguous tensor on " + device.str() + ", the group's device");
    index_of_[p.unsafe_impl()] = i;
  }
  // Every rank starts from rank 0's values (its initialisation, or its checkpoint).
  broadcast_from_rank0(parameters_, buffers);

  AllocationCategoryGuard category(memory::BlockCategory::Communication);
  gradient_views_.resize(parameters_.size());
  for (const GradientBucket& bucket : plan_.buckets) {
    const std::size_t element = element_size(bucket.dtype);
    Tensor flat = zeros({static_cast<std::int64_t>(bucket.bytes / element)}, TensorOptions().dtype(bucket.dtype).device(device));
    for (std::size_t k = 0; k < bucket.parameters.size(); ++k) {
      const Tensor& p = parameters_[bucket.parameters[k]];
      gradient_views_[bucket.parameters[k]] =
          flat.narrow(0, static_cast<std::int64_t>(bucket.offsets[k] / element), p.numel()).view(p.sizes());
    }
    buckets_.push_back(std::move(flat));
  }
}

DataParallel::~DataParallel() {
  watching_.reset();
  // On the CPU a bucket may still be in an all-reduce after a failed backward: the group is
  // waited for before the buckets go (never throwing; an aborted group fails fast). On CUDA the
  // buckets were recorded on the communication stream: their bytes go back to the compute
  // stream behind a device-side wait for the last all-reduce.
  if (!group_.comm_stream() && !group_.aborted()) {
    try {
      group_.join_pending(nullptr);
    } catch (...) {
    }
  }
}

void DataParallel::broadcast_from_rank0(const std::vector<Tensor>& parameters, const std::vector<Tensor>& buffers) {
  const StreamHandle stream = memory::current_stream(group_.device());
  for (const std::vector<Tensor>* list : {&parameters, &buffers})
    for (const Tensor& t : *list) {
      if (!t.is_contiguous() || t.device() != group_.device())
        throw ValueError("DataParallel: cannot broadcast " + t.to_string() + "; expected contiguous tensors on " +
                         group_.device().str());
      group_.broadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()), t.dtype(), 0, stream);
    }
}

std::size_t DataParallel::bucket_bytes() const {
  std::size_t total = 0;
  for (const GradientBucket& b : plan_.buckets) total += b.bytes;
  return total;
}

void DataParallel::prepare_backward() {
  if (watching_) throw DistributedError("DataParallel::prepare_backward called twice without finish_backward");
  compute_stream_ = memory::current_stream(group_.device());
  NoGradGuard no_grad;
  for (Tensor& bucket : buckets_) bucket.zero_();
  for (std::size_t i = 0; i < parameters_.size(); ++i) parameters_[i].set_grad(gradient_views_[i]);
  readiness_.reset();
  launched_in_backward_ = 0;
  watching_ = std::make_unique<autograd::BackwardObserverGuard>(watch_);
}

void DataParallel::on_leaf_gradient(const TensorImpl& leaf) {
  auto it = index_of_.find(&leaf);
  if (it == index_of_.end()) return;  // a leaf that is not one of the model's parameters
  const std::size_t i = it->second;
  if (leaf.grad.get() != gradient_views_[i].unsafe_impl())
    throw DistributedError("DataParallel: the gradient of parameter " + std::to_string(i) +
                           " is no longer its bucket view (was .grad replaced between prepare_backward and backward?)");
  for (std::size_t bucket : readiness_.mark_ready(i)) {
    launch(bucket);
    ++launched_in_backward_;
  }
}

void DataParallel::launch(std::size_t bucket) {
  Tensor& flat = buckets_[bucket];
  group_.all_reduce_async(flat.data_ptr(), static_cast<std::size_t>(flat.numel()), flat.dtype(), ReduceOp::Average,
                          compute_stream_);
  if (const StreamHandle comm = group_.comm_stream()) flat.storage().record_stream(comm);
}

void DataParallel::finish_backward() {
  if (!watching_) throw DistributedError("DataParallel::finish_backward without prepare_backward");
  watching_.reset();
  for (std::size_t i : readiness_.unready_parameters())
    for (std::size_t bucket : readiness_.mark_ready(i)) launch(bucket);
  group_.join_pending(compute_stream_);
}

}  // namespace sublet::distributed
