#include "runtime/step/graphed_train_step.h"

#include <algorithm>
#include <map>

#include "memory/current_stream.h"
#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/autograd/grad_mode.h"
#include "memory/history.h"
#include "memory/pinned_host.h"
#include "analysis/static_plan.h"
#include "runtime/step/scheduler.h"

namespace sublet {

GraphedTrainStep::GraphedTrainStep(StepFunction step, optim::Optimizer& optimizer, const Shape& input_shape,
                                   const Shape& labels_shape, Device device, int warmup_steps, DType input_dtype,
                                   MemoryFormat input_format)
    : step_(std::move(step)), optimizer_(optimizer), warmup_steps_(warmup_steps), graph_(device) {
  if (warmup_steps < 1)
    throw ValueError("GraphedTrainStep: need at least one eager warm-up step before capture, got " +
                     std::to_string(warmup_steps));
  // The batch's layout (e.g. channels-last), so run()'s copy into it is a plain copy.
  input_ = Tensor::empty(input_shape, TensorOptions().dtype(input_dtype).device(device), input_format);
  labels_ = Tensor::empty(labels_shape, TensorOptions().dtype(DType::Int64).device(device));
}

Tensor GraphedTrainStep::run(const Tensor& input, const Tensor& labels) {
  check_last_replay();
  memory::StreamGuard current(graph_.device(), graph_.stream());
  {
    NoGradGuard no_grad;  // the static tensors are inputs, not part of any graph
    input_.copy_(input);
    labels_.copy_(labels);
  }
  if (steps_ < warmup_steps_) {
    ++steps_;
    return steps_ == 1 ? first_warmup_step() : step_(input_, labels_);
  }
  return replay_static();
}

// The first step creates the optimizer's state after backward, when the step's activations are
// free cached blocks: left there, each state tensor would be carved out of an activation's block
// and pin its segment for good, and the graph's own pool cannot use those segments (on a large
// step, about as many bytes as the graph's pool itself). So that step runs in a pool of its own,
// and everything it leaves alive (the optimizer state, the gradients, the loss) is copied out
// before the pool goes back, so that all of the pool's segments go with it (with the gradients
// left in it, its segments would stay reserved, free, through the warm-up).
Tensor GraphedTrainStep::first_warmup_step() {
  memory::CachingAllocator& allocator = memory::allocator_for(graph_.device());
  const memory::CachingAllocator::PoolId pool = allocator.create_private_pool();
  struct PoolLease {
    memory::CachingAllocator& allocator;
    memory::CachingAllocator::PoolId pool;
    ~PoolLease() { allocator.release_private_pool(pool); }  // its segments go as their blocks do
  } lease{allocator, pool};
  allocator.begin_allocate_to_pool(pool, graph_.stream());
  Tensor loss;
  try {
    loss = step_(input_, labels_);
  } catch (...) {
    allocator.end_allocate_to_pool(pool);
    throw;
  }
  allocator.end_allocate_to_pool(pool);
  optimizer_.relocate_state();
  NoGradGuard no_grad;
  for (Tensor p : optimizer_.params())
    if (p.grad().defined()) p.set_grad(p.grad().clone());
  return loss.detach().clone();
}

void GraphedTrainStep::set_memory_plan(MemoryPlan plan, const std::string& heuristic) {
  if (graph_.captured()) throw Error("GraphedTrainStep::set_memory_plan: the step was captured already");
  const auto& names = memory::static_plan_heuristics();
  if (!heuristic.empty() && std::find(names.begin(), names.end(), heuristic) == names.end())
    throw ValueError("GraphedTrainStep: unknown static plan heuristic '" + heuristic + "'");
  plan_report_.plan = plan;
  plan_heuristic_ = heuristic;
}

void GraphedTrainStep::capture_with_static_plan() {
  memory::CachingAllocator& allocator = memory::allocator_for(graph_.device());
  allocator.record_private_pool(graph_.pool());
  capture_step();
  const std::vector<memory::TraceEvent> requests = allocator.recorded_private_pool(graph_.pool());
  // The probe's outputs live in its pool: drop them so that its segments go back before the
  // planned capture takes the arena. Its index checks are never read (it is never replayed).
  loss_ = Tensor();
  optimizer_.zero_grad();
  index_checks_.clear();
  const memory::CachingAllocator::PoolId probe_pool = graph_.pool();
  graph_.reset();
  allocator.empty_cache();
  // What of the probe's pool is still reserved when the arena is taken (blocks someone still
  // holds): the setup's extra peak.
  std::size_t left = 0;
  std::map<std::string, std::size_t> held;
  for (const memory::SegmentInfo& s : allocator.snapshot()) {
    if (s.private_pool_id != probe_pool) continue;
    left += s.total_size;
    for (const memory::BlockInfo& b : s.blocks)
      if (b.state != memory::BlockInfo::State::Inactive) held[memory::category_name(b.category)] += b.size;
  }
  plan_report_.probe_reserved_left = left;
  for (const auto& [category, bytes] : held)
    plan_report_.probe_held += (plan_report_.probe_held.empty() ? "" : ", ") + category + " " + std::to_string(bytes);

  const memory::StaticPlan plan = memory::plan_static_arena(requests, plan_heuristic_);
  std::vector<memory::CachingAllocator::ArenaPlacement> placements;
  placements.reserve(plan.allocations.size());
  for (const memory::PlannedAllocation& a : plan.allocations) placements.push_back({.size = a.size, .offset = a.offset});
  allocator.plan_private_pool(graph_.pool(), plan.arena_bytes, std::move(placements));
  capture_step();
  allocator.empty_cache();  // the probe's last blocks (outputs the step function kept) went during the capture

  const auto status = allocator.private_pool_plan(graph_.pool());
  plan_report_.lower_bound_bytes = plan.lower_bound;
  plan_report_.arena_bytes = plan.arena_bytes;
  plan_report_.heuristic = plan.heuristic;
  plan_report_.requests = status.planned_requests;
  plan_report_.served = status.served;
  plan_report_.abandoned = status.abandoned;
  plan_report_.recorded = requests;
}

// The step scheduler places the captured step's work on streams (runtime/step/scheduler.h):
// installed inside the capture, so that the joins at its end are captured too.
// The index checks of the step's ops are captured too (ops/captured_index_checks.h).
void GraphedTrainStep::capture_step() {
  index_checks_.clear();  // those of an abandoned capture
  index_checks_.reserve(memory::pinned_allocator(), memory::pinned_host_stream());  // not allowed while capturing
  graph_.capture([&] {
    step::StepScheduler scheduler;
    const step::StepSchedulerScope scope(scheduler, &optimizer_);
    const ops::CapturedIndexChecksScope checks(index_checks_);
    loss_ = step_(input_, labels_);
  });
}

void GraphedTrainStep::check_last_replay() {
  if (!replay_unchecked_) return;
  graph_.synchronize();  // the checks' verdicts are written by the replay's last kernels
  replay_unchecked_ = false;
  index_checks_.throw_first_failure();
}

Tensor GraphedTrainStep::replay_static() {
  check_last_replay();
  memory::StreamGuard current(graph_.device(), graph_.stream());
  if (!graph_.captured()) {
    if (steps_ < warmup_steps_) throw Error("GraphedTrainStep: capture needs the eager warm-up steps first");
    // What the eager warm-up steps left cached can serve none of the captured step's requests
    // (they come from the graph's private pool) and no eager step follows: without this it would
    // stay reserved beside the pool.
    // The last warm-up step's gradients go first: the step function drops them anyway (its
    // zero_grad comes first), and alive they pin the activation segments they were cut from.
    loss_ = Tensor();
    optimizer_.zero_grad();
    plan_report_.reserved_before_capture = memory::allocator_for(graph_.device()).memory_reserved();
    memory::allocator_for(graph_.device()).empty_cache();
    plan_report_.reserved_at_capture = memory::allocator_for(graph_.device()).memory_reserved();
    if (plan_report_.plan == MemoryPlan::Static) capture_with_static_plan();
    else capture_step();
  }
  optimizer_.prepare_replay();
  graph_.replay();
  replay_unchecked_ = index_checks_.size() > 0;
  ++steps_;
  return loss_;
}

}  // namespace sublet
