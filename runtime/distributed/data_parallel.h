#pragma once
// Data parallel, as PyTorch's DistributedDataParallel: every rank holds the whole model, reads
// its own shard of the data, and averages gradients with the others during backward.
//
//   DataParallel dp(group, model.parameters(), model.buffers());  // broadcasts rank 0's values
//   dp.prepare_backward();   // gradients become zeroed views into the flat buckets
//   loss.backward();         // each bucket is all-reduced as soon as its gradients are ready
//   dp.finish_backward();    // the compute stream waits for the all-reduces; then step
//
// - Buckets (gradient_buckets.h): gradients in reverse parameter order, 25 MiB each by default
//   (the first 1 MiB). A bucket is one flat buffer on the device; each parameter's .grad is a
//   view into it (no copy), so backward accumulates straight into the buffer the all-reduce
//   reads, and the optimizer reads the averaged result in place.
// - Overlap: backward reports each leaf gradient (autograd::BackwardObserver); when a
//   bucket's last gradient is in, the group starts its all-reduce (average) behind the work
//   enqueued so far (ProcessGroup::all_reduce_async: NCCL on the communication stream, Gloo on
//   its communication thread), so it runs while backward goes on. Buckets launch in plan order
//   on every rank (collectives must come in the same order everywhere).
// - Memory: on CUDA the buckets are recorded on the communication stream (record_stream) at
//   each launch; freed while an all-reduce may still read them, their bytes go back to the
//   compute stream behind a device-side wait (stream-ordered reuse), never behind a host wait.
//   On the CPU finish_backward (and the destructor) wait for the all-reduces on the host.
// - Parameters that take no part in the loss get no gradient from backward; their bucket slices
//   stay zero and are all-reduced with the rest in finish_backward (PyTorch's DDP would raise
//   unless find_unused_parameters=True; averaging zeros is what that option does).
// The same code runs on the CPU (Gloo) and on CUDA devices (NCCL, or Gloo through pinned memory).
#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/autograd/backward_observer.h"
#include "runtime/distributed/gradient_buckets.h"
#include "runtime/distributed/process_group.h"
#include "runtime/tensor.h"

namespace sublet::distributed {

class DataParallel {
 public:
  // Broadcasts every parameter and buffer from rank 0 (on the current stream, which then holds
  // the values before anything else runs on it) and allocates the buckets. Parameters must be
  // on the group's device; ValueError otherwise.
  DataParallel(ProcessGroup& group, std::vector<Tensor> parameters, std::vector<Tensor> buffers,
               BucketOptions bucket_options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Before backward, on the stream backward will run on: zeroes the buckets, points every
  // parameter's .grad at its slice, and starts watching leaf gradients until finish_backward.
  void prepare_backward();
  // After backward: launches the buckets still waiting (unused parameters) and makes the
  // compute stream wait for every all-reduce. Gradients are then the average over all ranks.
  void finish_backward();

  // Every rank takes rank 0's values of these tensors (on the current stream). The constructor
  // does it for the model it is given; call it again after loading a checkpoint on rank 0 only.
  void broadcast_from_rank0(const std::vector<Tensor>& parameters, const std::vector<Tensor>& buffers);

  const BucketPlan& plan() const { return plan_; }
  std::size_t bucket_bytes() const;  // all buckets together
  // Buckets of the current pass launched from inside backward (the rest wait for
  // finish_backward): how much communication could overlap backward.
  std::size_t buckets_launched_in_backward() const { return launched_in_backward_; }
  ProcessGroup& group() { return group_; }

 private:
  // Hears backward's final leaf gradients while installed (prepare_backward to finish_backward).
  class GradientWatch final : public autograd::BackwardObserver {
   public:
    explicit GradientWatch(DataParallel& owner) : owner_(owner) {}
    void leaf_gradient_final(const TensorImpl& leaf) override { owner_.on_leaf_gradient(leaf); }

   private:
    DataParallel& owner_;
  };

  void on_leaf_gradient(const TensorImpl& leaf);
  void launch(std::size_t bucket);

  ProcessGroup& group_;
  std::vector<Tensor> parameters_;
  BucketPlan plan_;
  BucketReadiness readiness_;
  std::vector<Tensor> buckets_;         // flat, one per plan bucket, dtype of the bucket
  std::vector<Tensor> gradient_views_;  // per parameter: its slice of its bucket, shaped as it
  std::unordered_map<const TensorImpl*, std::size_t> index_of_;
  StreamHandle compute_stream_ = nullptr;
  std::size_t launched_in_backward_ = 0;
  GradientWatch watch_{*this};
  std::unique_ptr<autograd::BackwardObserverGuard> watching_;
};

}  // namespace sublet::distributed
