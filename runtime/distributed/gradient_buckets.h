#pragma once
// How data parallel groups gradients for all-reduce, as PyTorch's DistributedDataParallel does:
// gradients become ready during backward roughly in the reverse order of the parameters, so
// buckets are filled in that order; each bucket is one flat buffer whose slices are the
// gradients (views, no copy), all-reduced as soon as all of its gradients are ready.
//
// Choices (PyTorch leaves some of them differently; all are options):
// - cap_bytes 25 MiB (`--bucket-cap-mb`), and the first bucket of each dtype capped at 1 MiB
//   like DDP's first_bucket_bytes: the last layers' gradients, ready first, start
//   communicating while most of backward is still ahead.
// - A bucket is closed *before* a gradient that would take it over its cap (DDP closes it
//   *after* the gradient that reaches the cap). Buckets so stay within the cap unless a single
//   gradient is larger (it then gets a bucket of its own), and a large gradient never delays
//   the smaller ones that were ready before it.
// - Buckets hold one dtype each (one all-reduce has one element type); each dtype fills its own
//   open bucket, and buckets are launched in the order their first gradient becomes ready.
// - Every gradient's offset is a multiple of alignment_bytes (default 256, what cudaMalloc
//   guarantees), so a view into a bucket meets any alignment a kernel expects of a fresh
//   tensor; the padding (< 256 bytes per gradient) is all-reduced along, harmlessly.
// - Unlike DDP, buckets are not rebuilt after the first step from the observed order; a caller
//   that wants that passes the observed order to assign_gradient_buckets_in_order.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"

namespace sublet::distributed {

struct GradientSpec {
  std::size_t bytes = 0;  // numel * element_size(dtype)
  DType dtype = DType::Float32;
};

struct BucketOptions {
  std::size_t cap_bytes = 25 * 1024 * 1024;
  std::size_t first_bucket_cap_bytes = 1024 * 1024;
  std::size_t alignment_bytes = 256;  // a power of two and a multiple of every element size used
};

struct GradientBucket {
  DType dtype = DType::Float32;
  std::vector<std::size_t> parameters;  // parameter indices, in the order their gradients get ready
  std::vector<std::size_t> offsets;     // byte offset of each in the flat buffer
  std::vector<std::size_t> sizes;       // bytes of each (without padding)
  std::size_t bytes = 0;                // the flat buffer: a multiple of alignment_bytes
};

// Where one parameter's gradient lives.
struct BucketSlot {
  std::size_t bucket = 0;
  std::size_t index_in_bucket = 0;
  std::size_t offset = 0;  // bytes into the bucket's buffer
};

struct BucketPlan {
  std::vector<GradientBucket> buckets;  // in launch order
  std::vector<BucketSlot> slots;        // indexed by parameter
  BucketOptions options;
};

// Buckets for gradients listed in parameter order (model.parameters()), filled in reverse
// parameter order. Throws ValueError for a cap of 0, an alignment that is not a power of two or
// not a multiple of an element size, or a gradient size that is not a whole number of elements.
BucketPlan assign_gradient_buckets(std::span<const GradientSpec> gradients, const BucketOptions& options = {});
// The same, filled in `ready_order` (a permutation of 0..gradients.size()-1; ValueError if not).
BucketPlan assign_gradient_buckets_in_order(std::span<const GradientSpec> gradients,
                                            std::span<const std::size_t> ready_order,
                                            const BucketOptions& options = {});

// Tracks one backward pass: which gradients are ready, and which buckets may be launched.
// NCCL needs every rank to issue its collectives in the same order, so buckets are launched
// strictly in plan order, as DDP does: a complete bucket waits for the buckets before it.
class BucketReadiness {
 public:
  explicit BucketReadiness(const BucketPlan& plan);

  // Marks a parameter's gradient ready and returns the buckets that may now be launched (maybe
  // none, maybe several), in launch order. Throws DistributedError for an index outside the
  // plan or a gradient marked twice in one pass (DDP's "mark a variable ready only once").
  std::vector<std::size_t> mark_ready(std::size_t parameter);

  bool all_launched() const { return next_to_launch_ == pending_.size(); }
  // Parameters whose gradients have not been marked in this pass, ascending: after backward,
  // these are the parameters that took no part in the loss (the cause of a hanging DDP step).
  std::vector<std::size_t> unready_parameters() const;
  // Starts the next pass.
  void reset();

 private:
  std::vector<BucketSlot> slots_;
  std::vector<std::size_t> bucket_sizes_;  // gradients per bucket
  std::vector<std::size_t> pending_;       // gradients per bucket not yet ready
  std::vector<bool> ready_;
  std::size_t next_to_launch_ = 0;
};

}  // namespace sublet::distributed
