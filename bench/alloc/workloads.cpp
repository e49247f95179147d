#include "bench/alloc/workloads.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/errors.h"

namespace sublet::bench {
namespace {

// Frees whatever is still live, e.g. after a workload threw half-way.
void free_live(AllocatorUnderTest& allocator, std::vector<AllocationHandle>& handles) {
  for (AllocationHandle& h : handles) {
    if (h) allocator.free(h);
    h = nullptr;
  }
}

}  // namespace

BatchPlan batch_plan_for(const PairPlan& plan) {
  const std::size_t batch = std::max<std::size_t>(plan.batch_pairs, 1);
  BatchPlan b;
  b.warmup_batches = (plan.warmup_pairs + batch - 1) / batch;
  b.max_batches = std::max<std::size_t>((plan.timed_pairs + batch - 1) / batch, 1);
  b.min_batches = std::min(plan.min_batches, b.max_batches);
  b.max_seconds = plan.max_seconds;
  return b;
}

ChurnSequence make_churn_sequence(std::uint64_t seed, std::size_t steps) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(std::log(static_cast<double>(kChurnMinSize)),
                                                  std::log(static_cast<double>(kChurnMaxSize)));
  std::uniform_int_distribution<std::uint32_t> slot(0, kChurnLiveBlocks - 1);
  const auto draw_size = [&] {
    const auto size = static_cast<std::size_t>(std::exp(log_size(rng)));
    return std::clamp(size, kChurnMinSize, kChurnMaxSize);
  };
  ChurnSequence seq;
  std::uint64_t live = 0;
  for (std::size_t i = 0; i < kChurnLiveBlocks; ++i) {
    seq.initial_sizes.push_back(draw_size());
    live += seq.initial_sizes.back();
  }
  seq.peak_live_bytes = live;
  std::vector<std::size_t> current = seq.initial_sizes;
  seq.steps.reserve(steps);
  for (std::size_t i = 0; i < steps; ++i) {
    const std::uint32_t s = slot(rng);
    const std::size_t size = draw_size();
    seq.steps.push_back({s, size});
    live = live - current[s] + size;
    current[s] = size;
    seq.peak_live_bytes = std::max(seq.peak_live_bytes, live);
  }
  return seq;
}

Timing time_pair(AllocatorUnderTest& allocator, std::size_t bytes, const PairPlan& plan) {
  const std::size_t batch = std::max<std::size_t>(plan.batch_pairs, 1);
  return time_batches(
      [&](std::size_t) {
        for (std::size_t i = 0; i < batch; ++i) allocator.free(allocator.allocate(bytes));
        return batch;
      },
      batch_plan_for(plan));
}

Timing time_churn(AllocatorUnderTest& allocator, const ChurnSequence& sequence, const PairPlan& plan) {
  const std::size_t batch = std::max<std::size_t>(plan.batch_pairs, 1);
  const BatchPlan batches = batch_plan_for(plan);
  if (sequence.steps.size() < (batches.warmup_batches + batches.max_batches) * batch)
    throw ValueError("churn: the sequence has " + std::to_string(sequence.steps.size()) + " steps, the plan needs " +
                     std::to_string((batches.warmup_batches + batches.max_batches) * batch));
  std::vector<AllocationHandle> live(kChurnLiveBlocks, nullptr);
  try {
    for (std::size_t i = 0; i < kChurnLiveBlocks; ++i) live[i] = allocator.allocate(sequence.initial_sizes[i]);
    const ChurnSequence::Step* steps = sequence.steps.data();
    const Timing t = time_batches(
        [&](std::size_t index) {
          const ChurnSequence::Step* step = steps + index * batch;
          for (std::size_t i = 0; i < batch; ++i, ++step) {
            allocator.free(live[step->slot]);
            live[step->slot] = nullptr;
            live[step->slot] = allocator.allocate(step->size);
          }
          return batch;
        },
        batches);
    free_live(allocator, live);
    return t;
  } catch (...) {
    free_live(allocator, live);
    throw;
  }
}

Timing time_replay(AllocatorUnderTest& allocator, const ReplayHistory& history, const PairPlan& plan) {
  BatchPlan passes;
  passes.warmup_batches = 1;
  passes.max_batches = std::max<std::size_t>(plan.timed_pairs / history.alloc_count, 1);
  passes.min_batches = std::min(plan.min_batches, passes.max_batches);
  passes.max_seconds = plan.max_seconds;
  std::vector<AllocationHandle> live(history.slot_count, nullptr);
  try {
    const Timing t = time_batches(
        [&](std::size_t) {
          for (const ReplayEvent& e : history.events) {
            if (e.action == ReplayEvent::Action::Alloc) {
              live[e.slot] = allocator.allocate(e.size);
            } else {
              allocator.free(live[e.slot]);
              live[e.slot] = nullptr;
            }
          }
          free_live(allocator, live);
          return history.alloc_count;
        },
        passes);
    return t;
  } catch (...) {
    free_live(allocator, live);
    throw;
  }
}

}  // namespace sublet::bench
