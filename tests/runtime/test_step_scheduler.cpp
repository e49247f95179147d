// step::StepScheduler (runtime/step/scheduler.h) on the CPU, with the CPU's device services
// standing in for CUDA streams: while a test says so the CPU "captures", and a fork or a join
// writes a line to a log instead of touching a stream. The host-side rules are then visible:
//  - outside a scope, or not captured, a node's passes run in order on the caller's stream;
//  - side work writing only leaves runs on alternating lanes past its node and is joined after
//    the next request's main pass, before the engine touches a leaf's gradient, at the end of
//    backward, or at the end of the scope (an exception included); what it keeps lives until then;
//  - other side work is joined at once;
//  - an update group's lane waits for the capture stream and for the lanes with pending side
//    work; the update lane is joined after the step's last update, and the values are those of
//    backward(); step().
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"
#include "ops/concurrent.h"
#include "ops/device_services.h"
#include "runtime/autograd/backward_observer.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/optim/sgd.h"
#include "runtime/step/scheduler.h"
#include "runtime/step/update_groups.h"

namespace sublet {
namespace {

using autograd::TensorList;

std::vector<std::string>* fake_log = nullptr;
bool fake_capturing = false;

StreamHandle lane_stream(int lane) { return reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(0x1000 + lane)); }

std::string stream_name(StreamHandle s) {
  if (s == nullptr) return "main";
  switch (reinterpret_cast<std::uintptr_t>(s) - 0x1000) {
    case static_cast<int>(ops::SideLane::Kernels): return "kernels";
    case static_cast<int>(ops::SideLane::OptimizerUpdate): return "update";
    case static_cast<int>(ops::SideLane::BesideEven): return "even";
    case static_cast<int>(ops::SideLane::BesideOdd): return "odd";
    default: return "?";
  }
}

// Makes the CPU a device whose stream (nullptr: "main") can be captured and forked, for the test's scope.
class FakeStreams {
 public:
  explicit FakeStreams(std::vector<std::string>& log) {
    (void)ops::device_services(DeviceType::CPU);  // registration first: it must not overwrite ours
    saved_ = ops::mutable_device_services(DeviceType::CPU);
    ops::DeviceServices& s = ops::mutable_device_services(DeviceType::CPU);
    s.stream_is_capturing = [](const ops::Context&) { return fake_capturing; };
    s.fork_stream = [](const ops::Context& ctx, int lane) {
      fake_log->push_back("fork " + stream_name(lane_stream(lane)) + " after " + stream_name(ctx.stream));
      return lane_stream(lane);
    };
    s.join_stream = [](const ops::Context& ctx, int lane) {
      fake_log->push_back(stream_name(ctx.stream) + " waits for " + stream_name(lane_stream(lane)));
    };
    fake_log = &log;
    fake_capturing = true;
  }
  ~FakeStreams() {
    ops::mutable_device_services(DeviceType::CPU) = saved_;
    fake_log = nullptr;
    fake_capturing = false;
  }
  FakeStreams(const FakeStreams&) = delete;
  FakeStreams& operator=(const FakeStreams&) = delete;

 private:
  ops::DeviceServices saved_;
};

// out = x * w, whose backward hands its two passes to the scheduler as a convolution does: the
// input gradient (main) and the weight gradient (side), each writing its pass and stream to the log.
Tensor scaled(const Tensor& x, const Tensor& w, bool side_writes_only_leaves, std::vector<std::string>& log) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = x * w;
  }
  autograd::record("scaled", {x, w}, {out},
                   [x = autograd::save(x), w = autograd::save(w), side_writes_only_leaves, &log](
                       const TensorList& grads, const autograd::BackwardContext& context) {
                     Tensor grad_x, grad_w;
                     const Tensor g = grads[0];
                     autograd::BackwardPasses passes;
                     passes.main = [&](const ops::Context& c) {
                       log.push_back("main on " + stream_name(c.stream));
                       grad_x = g * w;
                     };
                     passes.side = [&](const ops::Context& c) {
                       log.push_back("side on " + stream_name(c.stream));
                       grad_w = g * x;
                     };
                     passes.keep = {x, g};
                     passes.side_writes_only_leaves = side_writes_only_leaves;
                     context.run_passes(ops::Context::for_device(g.device()), std::move(passes));
                     return TensorList{grad_x, grad_w};
                   });
  return out;
}

Tensor leaf(std::vector<float> values) {
  return Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}, TensorOptions().requires_grad(true));
}

// y = (x * w1) * w2 summed, both nodes with their weight gradient as side work.
struct TwoLayers {
  Tensor x = leaf({1, 2, 3, 4});
  Tensor w1 = leaf({0.5, -1, 2, 3});
  Tensor w2 = leaf({2, 1, -0.5, 1.5});
  Tensor loss(std::vector<std::string>& log, bool only_leaves = true) const {
    return scaled(scaled(x, w1, only_leaves, log), w2, only_leaves, log).sum();
  }
};

TEST(StepScheduler, OutsideAScopePassesRunInOrderOnTheCallersStream) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  TwoLayers net;
  net.loss(log).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"main on main", "side on main", "main on main", "side on main"}));
  EXPECT_EQ(net.w1.grad().to_vector<float>(), (std::vector<float>{2, 2, -1.5, 6}));  // x * w2
}

TEST(StepScheduler, InAScopeButNotCapturedPassesRunInOrder) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  fake_capturing = false;
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  TwoLayers net;
  net.loss(log).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"main on main", "side on main", "main on main", "side on main"}));
}

TEST(StepScheduler, SideWorkRunsOnAlternatingLanesUntilTheNextRequestOrTheEnd) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  TwoLayers net;
  net.loss(log).backward();
  // Fresh gradients are stored as they are: only the next request and the end of backward join.
  EXPECT_EQ(log, (std::vector<std::string>{"fork even after main", "side on even", "main on main",
                                           "fork odd after main", "side on odd", "main on main",
                                           "main waits for even", "main waits for odd"}));
  EXPECT_FALSE(scheduler.side_work_pending());
  EXPECT_EQ(net.w1.grad().to_vector<float>(), (std::vector<float>{2, 2, -1.5, 6}));
  EXPECT_EQ(net.w2.grad().to_vector<float>(), (std::vector<float>{0.5, -2, 6, 12}));  // x * w1
}

TEST(StepScheduler, PendingSideWorkIsJoinedBeforeALeafGradientIsTouched) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  TwoLayers net;
  net.loss(log).backward();
  log.clear();
  net.loss(log).backward();  // every leaf holds a gradient now: the engine adds into it
  EXPECT_EQ(log, (std::vector<std::string>{"fork even after main", "side on even", "main on main",
                                           "main waits for even",  // before w2's gradient is added into
                                           "fork odd after main", "side on odd", "main on main",
                                           "main waits for odd"}));  // before x's
  EXPECT_EQ(net.w1.grad().to_vector<float>(), (std::vector<float>{4, 4, -3, 12}));
}

TEST(StepScheduler, SideWorkWritingMoreThanLeavesIsJoinedAtOnce) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  TwoLayers net;
  net.loss(log, /*only_leaves=*/false).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"fork kernels after main", "side on kernels", "main on main",
                                           "main waits for kernels", "fork kernels after main", "side on kernels",
                                           "main on main", "main waits for kernels"}));
}

TEST(StepScheduler, WhatSideWorkKeepsAndItsWorkspacesLiveUntilItIsJoined) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  Tensor kept = zeros({4});
  const Tensor probe = kept;  // counts the handles: its own, and the scheduler's while it keeps it
  StreamHandle workspace_stream = reinterpret_cast<StreamHandle>(1);
  autograd::BackwardPasses passes;
  passes.main = [](const ops::Context&) {};
  passes.side = [&](const ops::Context& c) {
    ASSERT_NE(c.workspace_hold, nullptr);
    workspace_stream = c.workspace_hold->stream;
  };
  passes.keep = {kept};
  passes.side_writes_only_leaves = true;
  kept = Tensor();  // the caller lets go
  const ops::Context ctx = ops::Context::for_device(Device::cpu());
  scheduler.place_passes(ctx, passes);
  EXPECT_EQ(workspace_stream, ctx.stream) << "the side's workspaces belong to the capture stream";
  EXPECT_TRUE(scheduler.side_work_pending());
  EXPECT_EQ(scheduler.pending_side_streams(), (std::vector<StreamHandle>{lane_stream(2)}));
  EXPECT_EQ(probe.impl_ptr().use_count(), 2) << "a kept tensor went back while the side may still use it";
  scheduler.join_side_work();
  EXPECT_EQ(probe.impl_ptr().use_count(), 1);
  EXPECT_EQ(log.back(), "main waits for even");
}

TEST(StepScheduler, TheScopeJoinsWhatIsPendingAndRestoresWhatWasInstalled) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  Tensor p = leaf({1, 2});
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  step::StepScheduler scheduler;
  try {
    const step::StepSchedulerScope scope(scheduler, &sgd);
    EXPECT_EQ(autograd::backward_observers().size(), 1u);
    autograd::BackwardPasses passes;
    passes.main = [](const ops::Context&) {};
    passes.side = [](const ops::Context&) {};
    passes.side_writes_only_leaves = true;
    scheduler.place_passes(ops::Context::for_device(Device::cpu()), passes);
    throw std::runtime_error("the step failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(log, (std::vector<std::string>{"fork even after main", "main waits for even"}));
  EXPECT_FALSE(scheduler.side_work_pending());
  EXPECT_TRUE(autograd::backward_observers().empty());
  EXPECT_EQ(sgd.set_update_scheduler(nullptr), nullptr) << "the optimizer kept the scope's scheduler";
}

TEST(StepScheduler, ABackwardThatThrowsJoinsItsSideWork) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  TwoLayers net;
  const Tensor h = scaled(net.x, net.w1, true, log);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = h * 2.0;
  }
  autograd::record("fails", {h}, {out}, [](const TensorList&) -> TensorList { throw std::runtime_error("node failed"); });
  const Tensor loss = scaled(out, net.w2, true, log).sum();
  EXPECT_THROW(loss.backward(), std::runtime_error);
  EXPECT_EQ(log, (std::vector<std::string>{"fork even after main", "side on even", "main on main",
                                           "main waits for even"}));
  EXPECT_FALSE(scheduler.side_work_pending());
}

// Parameters w2 and w1 of equal size, in two update groups: each goes out once backward reports it.
TEST(StepScheduler, AnUpdateGroupWaitsForTheCaptureAndForPendingSideWork) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  TwoLayers net, reference;
  optim::SGD sgd({net.w1, net.w2}, optim::SGDOptions(0.1));
  optim::SGD reference_sgd({reference.w1, reference.w2}, optim::SGDOptions(0.1));
  std::size_t during_backward = 0;
  {
    step::StepScheduler scheduler(step::StepSchedulerOptions{.update_groups = 2});
    const step::StepSchedulerScope scope(scheduler, &sgd);
    const Tensor loss = net.loss(log);
    during_backward = sgd.backward_and_step([&] { loss.backward(); });
  }
  EXPECT_EQ(during_backward, 2u);
  EXPECT_EQ(log, (std::vector<std::string>{"fork even after main", "side on even", "main on main",
                                           // w2 is final, but still being written on the even lane
                                           "fork update after even", "fork update after main",
                                           "fork odd after main", "side on odd", "main on main",
                                           "main waits for even",
                                           "fork update after odd", "fork update after main",  // w1
                                           "main waits for odd",                               // backward's end
                                           "main waits for update"}));                         // the step's end
  // The fake capture runs the kernels at once: the values are those of backward(); step().
  std::vector<std::string> unused;
  fake_capturing = false;
  reference.loss(unused).backward();
  reference_sgd.step();
  EXPECT_EQ(net.w1.to_vector<float>(), reference.w1.to_vector<float>());
  EXPECT_EQ(net.w2.to_vector<float>(), reference.w2.to_vector<float>());
  EXPECT_NE(net.w1.to_vector<float>(), TwoLayers().w1.to_vector<float>()) << "nothing was updated";
}

// Another observer (data parallel's all-reduce) must see the gradients before any update.
TEST(StepScheduler, NoUpdateOverlapsBackwardWhileAnotherObserverWatches) {
  std::vector<std::string> log;
  const FakeStreams streams(log);
  TwoLayers net;
  optim::SGD sgd({net.w1, net.w2}, optim::SGDOptions(0.1));
  autograd::BackwardObserver other;
  const autograd::BackwardObserverGuard watching(other);
  step::StepScheduler scheduler(step::StepSchedulerOptions{.update_groups = 2});
  const step::StepSchedulerScope scope(scheduler, &sgd);
  const Tensor loss = net.loss(log);
  EXPECT_EQ(sgd.backward_and_step([&] { loss.backward(); }), 0u);
  for (const std::string& line : log) EXPECT_EQ(line.find("update"), std::string::npos) << line;
}

TEST(UpdateGroups, AGroupIsReadyAtItsShareOfTheBytesAndStaysReadyUntilLaunched) {
  const std::vector<Tensor> params{zeros({4}), zeros({4}), zeros({8}), zeros({16})};  // 32 values, groups of 8
  step::UpdateGroups groups(params, 4);
  EXPECT_EQ(groups.group_bytes(), 8 * sizeof(float));
  const Tensor stranger = zeros({64});
  EXPECT_FALSE(groups.add(*stranger.unsafe_impl())) << "a leaf that is not a parameter";
  EXPECT_TRUE(groups.open().empty());
  EXPECT_FALSE(groups.add(*params[1].unsafe_impl()));
  EXPECT_TRUE(groups.add(*params[0].unsafe_impl()));
  EXPECT_EQ(groups.open(), (std::vector<std::size_t>{1, 0}));
  EXPECT_TRUE(groups.add(*params[3].unsafe_impl())) << "not launched: still ready, and growing";
  EXPECT_EQ(groups.open(), (std::vector<std::size_t>{1, 0, 3}));
  groups.launched();
  EXPECT_TRUE(groups.open().empty());
  EXPECT_TRUE(groups.add(*params[2].unsafe_impl()));
  EXPECT_THROW(step::UpdateGroups(params, 0), ValueError);
}

}  // namespace
}  // namespace sublet
