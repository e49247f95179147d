#include "runtime/distributed/gradient_buckets.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "core/errors.h"

namespace sublet::distributed {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

void check_options(const BucketOptions& options) {
  if (options.cap_bytes == 0 || options.first_bucket_cap_bytes == 0) {
    throw ValueError("gradient buckets: cap_bytes and first_bucket_cap_bytes must be > 0, got " +
                     std::to_string(options.cap_bytes) + " and " + std::to_string(options.first_bucket_cap_bytes));
  }
  const std::size_t a = options.alignment_bytes;
  if (a == 0 || (a & (a - 1)) != 0) {
    throw ValueError("gradient buckets: alignment_bytes must be a power of two, got " + std::to_string(a));
  }
}

}  // namespace

BucketPlan assign_gradient_buckets(std::span<const GradientSpec> gradients, const BucketOptions& options) {
  std::vector<std::size_t> reverse(gradients.size());
  for (std::size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
  return assign_gradient_buckets_in_order(gradients, reverse, options);
}

BucketPlan assign_gradient_buckets_in_order(std::span<const GradientSpec> gradients,
                                            std::span<const std::size_t> ready_order, const BucketOptions& options) {
  check_options(options);
  if (ready_order.size() != gradients.size()) {
    throw ValueError("gradient buckets: ready order has " + std::to_string(ready_order.size()) + " entries for " +
                     std::to_string(gradients.size()) + " gradients");
  }
  std::vector<bool> seen(gradients.size(), false);
  for (const std::size_t p : ready_order) {
    if (p >= gradients.size() || seen[p]) {
      throw ValueError("gradient buckets: ready order is not a permutation of the " + std::to_string(gradients.size()) +
                       " parameters (" + std::to_string(p) + " is out of range or repeated)");
    }
    seen[p] = true;
  }

  // One open bucket per dtype; each dtype's first bucket has the small cap.
  std::array<std::optional<GradientBucket>, kNumDTypes> open;
  std::array<bool, kNumDTypes> had_first{};
  std::vector<GradientBucket> closed;
  const auto close = [&](std::size_t d) {
    if (open[d] && !open[d]->parameters.empty()) closed.push_back(std::move(*open[d]));
    open[d].reset();
  };

  for (const std::size_t p : ready_order) {
    const GradientSpec& g = gradients[p];
    const std::size_t element = element_size(g.dtype);
    if (g.bytes % element != 0) {
      throw ValueError("gradient buckets: parameter " + std::to_string(p) + " has " + std::to_string(g.bytes) +
                       " bytes, not a whole number of " + std::to_string(element) + "-byte elements");
    }
    if (options.alignment_bytes % element != 0) {
      throw ValueError("gradient buckets: alignment_bytes " + std::to_string(options.alignment_bytes) +
                       " is not a multiple of the element size " + std::to_string(element));
    }
    const auto d = static_cast<std::size_t>(g.dtype);
    const std::size_t padded = round_up(g.bytes, options.alignment_bytes);
    if (open[d]) {
      const std::size_t cap = had_first[d] ? options.cap_bytes : options.first_bucket_cap_bytes;
      if (open[d]->bytes + padded > cap) {
        close(d);
        had_first[d] = true;
      }
    }
    if (!open[d]) {
      open[d].emplace();
      open[d]->dtype = g.dtype;
    }
    GradientBucket& b = *open[d];
    b.parameters.push_back(p);
    b.offsets.push_back(b.bytes);
    b.sizes.push_back(g.bytes);
    b.bytes += padded;
  }
  for (std::size_t d = 0; d < open.size(); ++d) close(d);

  // Launch order = the order in which each bucket's first gradient gets ready.
  std::vector<std::size_t> position(gradients.size());
  for (std::size_t i = 0; i < ready_order.size(); ++i) position[ready_order[i]] = i;
  std::stable_sort(closed.begin(), closed.end(), [&](const GradientBucket& a, const GradientBucket& b) {
    return position[a.parameters.front()] < position[b.parameters.front()];
  });

  BucketPlan plan;
  plan.options = options;
  plan.slots.resize(gradients.size());
  for (std::size_t b = 0; b < closed.size(); ++b) {
    for (std::size_t i = 0; i < closed[b].parameters.size(); ++i) {
      plan.slots[closed[b].parameters[i]] = BucketSlot{.bucket = b, .index_in_bucket = i, .offset = closed[b].offsets[i]};
    }
  }
  plan.buckets = std::move(closed);
  return plan;
}

BucketReadiness::BucketReadiness(const BucketPlan& plan) : slots_(plan.slots) {
  for (const auto& bucket : plan.buckets) bucket_sizes_.push_back(bucket.parameters.size());
  reset();
}

void BucketReadiness::reset() {
  pending_ = bucket_sizes_;
  ready_.assign(slots_.size(), false);
  next_to_launch_ = 0;
}

std::vector<std::size_t> BucketReadiness::mark_ready(std::size_t parameter) {
  if (parameter >= slots_.size()) {
    throw DistributedError("gradient buckets: parameter " + std::to_string(parameter) + " is not in the plan (" +
                           std::to_string(slots_.size()) + " parameters)");
  }
  if (ready_[parameter]) {
    throw DistributedError("gradient buckets: the gradient of parameter " + std::to_string(parameter) +
                           " was marked ready twice in one backward pass (a parameter used twice must still "
                           "produce one accumulated gradient; call reset() between steps)");
  }
  ready_[parameter] = true;
  --pending_[slots_[parameter].bucket];
  std::vector<std::size_t> launch;
  while (next_to_launch_ < pending_.size() && pending_[next_to_launch_] == 0) launch.push_back(next_to_launch_++);
  return launch;
}

std::vector<std::size_t> BucketReadiness::unready_parameters() const {
  std::vector<std::size_t> unready;
  for (std::size_t p = 0; p < ready_.size(); ++p) {
    if (!ready_[p]) unready.push_back(p);
  }
  return unready;
}

}  // namespace sublet::distributed
