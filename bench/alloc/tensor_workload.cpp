#include "bench/alloc/tensor_workload.h"

#include <algorithm>
#include <chrono>

namespace sublet::bench {

std::size_t TensorShape::bytes() const {
  std::size_t n = sizeof(float);
  for (std::size_t d = 0; d < ndim; ++d) n *= static_cast<std::size_t>(dims[d]);
  return n;
}

std::vector<std::int64_t> TensorShape::sizes() const { return {dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(ndim)}; }

std::string TensorShape::str() const {
  std::string text = "[";
  for (std::size_t d = 0; d < ndim; ++d) text += (d ? ", " : "") + std::to_string(dims[d]);
  return text + "]";
}

TensorTiming time_tensor(TensorFactoryUnderTest& factory, const TensorShape& shape, const PairPlan& plan) {
  using Clock = std::chrono::steady_clock;
  const auto ns_between = [](Clock::time_point a, Clock::time_point b) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
  };
  const std::size_t batch = std::max<std::size_t>(plan.batch_pairs, 1);
  const std::size_t bytes = shape.bytes();
  const BatchPlan batches = batch_plan_for(plan);
  for (std::size_t i = 0; i < batches.warmup_batches; ++i) {
    factory.create_destroy(shape, batch);
    factory.allocate_free(bytes, batch);
  }
  std::vector<double> tensor_ns, pair_ns;
  tensor_ns.reserve(batches.max_batches);
  pair_ns.reserve(batches.max_batches);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(batches.max_seconds));
  while (tensor_ns.size() < batches.max_batches) {
    const auto start = Clock::now();
    factory.create_destroy(shape, batch);
    const auto middle = Clock::now();
    factory.allocate_free(bytes, batch);
    const auto end = Clock::now();
    tensor_ns.push_back(ns_between(start, middle) / static_cast<double>(batch));
    pair_ns.push_back(ns_between(middle, end) / static_cast<double>(batch));
    if (tensor_ns.size() >= batches.min_batches && end >= deadline) break;
  }
  const std::uint64_t timed = static_cast<std::uint64_t>(tensor_ns.size()) * batch;
  return {summarise_batches(std::move(tensor_ns), timed), summarise_batches(std::move(pair_ns), timed)};
}

}  // namespace sublet::bench
