// ops::run_concurrently (ops/concurrent.h) on the GPU:
//  - captured, the `side` work goes to a second stream forked from the capture's, so the graph
//    starts with two independent nodes, and what follows the call waits for both (the replayed
//    values prove the join);
//  - the side's workspaces are allocated on the capturing stream and held until the join: a
//    workspace the main work asks for afterwards gets other bytes;
//  - eager, both run on the caller's stream, main first, with no hold;
//  - step::StepScheduler's side work left running (runtime/step/scheduler.h), captured: the side
//    work stays pending past the call (its kept tensor is not handed to the next request even
//    after the caller drops it), a second request joins the first one's, join_side_work() the
//    rest, and the replay sees every side write; eager, nothing is left pending;
//  - with the diagnostic TuningOptions::stream_overlap off (SUBLET_NO_STREAM_OVERLAP=1), a
//    captured run_concurrently and the scheduler keep everything on the capture's stream, in order.
#include <gtest/gtest.h>

#include <vector>

#include "core/tuning.h"
#include "memory/current_stream.h"
#include "ops/concurrent.h"
#include "runtime/step/cuda_graph.h"
#include "runtime/step/scheduler.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

constexpr std::size_t kWorkspaceBytes = 1 << 20;

void expect_all(const Tensor& t, float value) {
  const std::vector<float> host = t.to(Device::cpu()).to_vector<float>();
  std::size_t wrong = 0;
  for (float v : host) wrong += v == value ? 0 : 1;  // NaN counts as wrong
  EXPECT_EQ(wrong, 0u) << "of " << host.size() << " values, expected " << value;
}

TEST(RunConcurrently, CapturedSideWorkRunsOnASecondStreamAndIsJoined) {
  SUBLET_SKIP_WITHOUT_GPU("the second stream of a captured ops::run_concurrently");
  const Device gpu = Device::cuda(0);
  const auto options = TensorOptions().device(gpu);
  Tensor side_out = zeros({1 << 16}, options), main_out = zeros({1 << 16}, options), after = zeros({1 << 16}, options);
  CudaGraph graph(gpu);
  StreamHandle side_stream = nullptr, side_workspace_stream = nullptr;
  void* side_workspace = nullptr;
  void* main_workspace = nullptr;
  graph.capture([&] {
    const ops::Context ctx = ops::Context::for_device(gpu);
    ops::run_concurrently(
        ctx,
        [&](const ops::Context& c) {
          const memory::ScopedBlock workspace = c.workspace(kWorkspaceBytes);
          main_workspace = workspace.get();
          main_out.fill_(2.0);
        },
        [&](const ops::Context& c) {
          side_stream = c.stream;
          const memory::ScopedBlock workspace = c.workspace(kWorkspaceBytes);
          side_workspace = workspace.get();
          side_workspace_stream = workspace.block()->stream;
          memory::StreamGuard on_side(gpu, c.stream);  // tensor ops take the current stream
          side_out.fill_(1.0);
        });
    after.copy_(side_out);  // on the capture's stream: must see the side's fill
  });
  ASSERT_TRUE(graph.captured());
  EXPECT_NE(side_stream, graph.stream());
  EXPECT_NE(side_stream, nullptr);
  EXPECT_EQ(side_workspace_stream, graph.stream()) << "the side's workspace belongs to the capturing stream";
  EXPECT_NE(side_workspace, main_workspace) << "the side's workspace must still be held when main asks for one";
  EXPECT_EQ(graph.root_count(), 2u) << "the two fills should start side by side";
  graph.replay();
  graph.synchronize();
  expect_all(after, 1.0f);
  expect_all(main_out, 2.0f);
}

TEST(RunConcurrently, EagerWorkRunsMainThenSideOnTheCallersStream) {
  SUBLET_SKIP_WITHOUT_GPU("ops::run_concurrently outside a capture");
  const Device gpu = Device::cuda(0);
  const ops::Context ctx = ops::Context::for_device(gpu);
  std::vector<int> order;
  std::vector<StreamHandle> streams;
  std::vector<bool> held;
  const auto record = [&](int who) {
    return [&, who](const ops::Context& c) {
      order.push_back(who);
      streams.push_back(c.stream);
      held.push_back(c.workspace_hold != nullptr);
    };
  };
  ops::run_concurrently(ctx, record(1), record(2));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(streams, (std::vector<StreamHandle>{ctx.stream, ctx.stream}));
  EXPECT_EQ(held, (std::vector<bool>{false, false}));
}

TEST(RunConcurrently, CapturedWorkStaysOnTheCaptureStreamWithOverlapOff) {
  SUBLET_SKIP_WITHOUT_GPU("a captured ops::run_concurrently and step scheduler with TuningOptions::stream_overlap off");
  const Device gpu = Device::cuda(0);
  const auto options = TensorOptions().device(gpu);
  Tensor side_out = zeros({1 << 16}, options), main_out = zeros({1 << 16}, options), after = zeros({1 << 16}, options);
  CudaGraph graph(gpu);
  std::vector<int> order;
  std::vector<StreamHandle> streams;
  bool overlapped = true;
  const ScopedTuning serial([](TuningOptions& o) { o.stream_overlap = false; });
  step::StepScheduler scheduler;
  graph.capture([&] {
    const ops::Context ctx = ops::Context::for_device(gpu);
    overlapped = ops::detail::overlaps_streams(ctx);
    ops::run_concurrently(
        ctx,
        [&](const ops::Context& c) {
          order.push_back(1);
          streams.push_back(c.stream);
          main_out.fill_(2.0);
        },
        [&](const ops::Context& c) {
          order.push_back(2);
          streams.push_back(c.stream);
          side_out.fill_(1.0);
        });
    autograd::BackwardPasses passes;
    passes.main = [&](const ops::Context& c) {
      order.push_back(3);
      streams.push_back(c.stream);
    };
    passes.side = [&](const ops::Context& c) {
      order.push_back(4);
      streams.push_back(c.stream);
    };
    passes.side_writes_only_leaves = true;
    scheduler.place_passes(ctx, passes);
    EXPECT_FALSE(scheduler.side_work_pending()) << "nothing may stay pending with overlap off";
    after.copy_(side_out);
  });
  ASSERT_TRUE(graph.captured());
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(streams, (std::vector<StreamHandle>(4, graph.stream())));
  EXPECT_EQ(graph.root_count(), 1u) << "one stream: the graph is a chain";
  graph.replay();
  graph.synchronize();
  expect_all(after, 1.0f);
  expect_all(main_out, 2.0f);
}

// Side work that writes only leaves, placed by the step scheduler.
void place_beside(step::StepScheduler& scheduler, const ops::Context& ctx, autograd::StreamWork main,
                  autograd::StreamWork side, std::vector<Tensor> keep) {
  autograd::BackwardPasses passes{std::move(main), std::move(side), std::move(keep), /*side_writes_only_leaves=*/true};
  scheduler.place_passes(ctx, passes);
}

TEST(StepSchedulerCuda, CapturedSideWorkIsJoinedOneRequestLaterAndKeepsItsTensors) {
  SUBLET_SKIP_WITHOUT_GPU("the step scheduler's side work in a capture");
  const Device gpu = Device::cuda(0);
  const auto options = TensorOptions().device(gpu);
  constexpr std::int64_t kCount = 1 << 16;
  Tensor first_side = zeros({kCount}, options), second_side = zeros({kCount}, options);
  Tensor seen_first = zeros({kCount}, options), seen_second = zeros({kCount}, options);
  Tensor main_out = zeros({kCount}, options);
  bool pending_after_first = false, pending_after_second = false, pending_after_settle = true;
  const void* kept_address = nullptr;
  const void* next_address = nullptr;
  CudaGraph graph(gpu);
  step::StepScheduler scheduler;
  graph.capture([&] {
    const step::StepSchedulerScope scope(scheduler);
    const ops::Context ctx = ops::Context::for_device(gpu);
    Tensor source = full({kCount}, 3.0, options);  // allocated in the capture
    kept_address = source.data_ptr();
    const auto side_copy = [&](Tensor& into, const Tensor& from) {
      return [&into, from, gpu](const ops::Context& c) {
        memory::StreamGuard on_side(gpu, c.stream);
        into.copy_(from);
      };
    };
    place_beside(scheduler, ctx, [&](const ops::Context&) { main_out.fill_(1.0); }, side_copy(first_side, source), {source});
    source = Tensor();  // the caller lets go; the scheduler keeps it until the side work is joined
    pending_after_first = scheduler.side_work_pending();
    next_address = Tensor::empty({kCount}, options).data_ptr();
    const Tensor five = full({kCount}, 5.0, options);
    place_beside(scheduler, ctx, [&](const ops::Context&) { main_out.add_(1.0); }, side_copy(second_side, five), {five});
    pending_after_second = scheduler.side_work_pending();
    seen_first.copy_(first_side);  // the first side work is joined by now
    scheduler.join_side_work();
    pending_after_settle = scheduler.side_work_pending();
    seen_second.copy_(second_side);
  });
  ASSERT_TRUE(graph.captured());
  EXPECT_TRUE(pending_after_first);
  EXPECT_TRUE(pending_after_second) << "the second call's side work should stay pending";
  EXPECT_FALSE(pending_after_settle);
  EXPECT_NE(next_address, kept_address) << "a kept tensor's bytes went to the next request while the side may read them";
  graph.replay();
  graph.synchronize();
  expect_all(seen_first, 3.0f);
  expect_all(seen_second, 5.0f);
  expect_all(main_out, 2.0f);
}

TEST(StepSchedulerCuda, EagerWorkLeavesNothingPending) {
  SUBLET_SKIP_WITHOUT_GPU("the step scheduler's side work outside a capture");
  const Device gpu = Device::cuda(0);
  const ops::Context ctx = ops::Context::for_device(gpu);
  std::vector<int> order;
  step::StepScheduler scheduler;
  const step::StepSchedulerScope scope(scheduler);
  place_beside(
      scheduler, ctx, [&](const ops::Context& c) { order.push_back(c.stream == ctx.stream ? 1 : -1); },
      [&](const ops::Context& c) { order.push_back(c.stream == ctx.stream ? 2 : -2); }, {});
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_FALSE(scheduler.side_work_pending());
}

}  // namespace
}  // namespace sublet
