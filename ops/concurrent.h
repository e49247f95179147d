#pragma once
// Two pieces of device work that do not depend on each other, run side by side where that pays:
// a convolution's weight gradient beside its input gradient, where the step scheduler
// (runtime/step/scheduler.h) places them so.
//
//   ops::run_concurrently(ctx, [&](const ops::Context& c) { /* input gradient on c */ },
//                              [&](const ops::Context& c) { /* weight gradient on c */ });
//
// While ctx.stream is being captured into a CUDA graph, `side` is enqueued on a second stream
// forked from ctx.stream, then `main` on ctx.stream, and ctx.stream is made to wait for the
// second stream: in the graph they become two parallel branches. At small sizes one such kernel
// leaves most of a GPU's SMs idle (ResNet-18 at 32x32: planes of 8x8 down to 1x1), and the two
// then share the GPU instead of taking turns. Otherwise -- eager CUDA, where the fork and the
// join would cost host time that a launch-bound step does not have, and the CPU -- `main` then
// `side` run on ctx.stream, as two plain calls in that order.
//
// Each must enqueue its work only on the context it is given. Its outputs may be allocated
// before the call or inside it (tensors take the current stream, ctx.stream). `side`'s
// workspaces are held until the join (ops::WorkspaceHold), so nothing on ctx.stream can be
// given their bytes while the second stream may still use them.
// TuningOptions::stream_overlap = false (core/tuning.h, a diagnostic) keeps everything on ctx.stream.
#include "ops/context.h"

namespace sublet::ops {

// The second streams a capture forks work onto, one per purpose: work forked onto one lane
// never waits for work on another (a convolution's weight gradient does not queue behind an
// optimizer update started earlier in backward).
enum class SideLane : int {
  Kernels = 0,          // run_concurrently
  OptimizerUpdate = 1,  // the optimizer's update during backward (runtime/step/scheduler.h)
  BesideEven = 2,       // side work left running past its node (runtime/step/scheduler.h), alternating
  BesideOdd = 3,
};

namespace detail {
bool overlaps_streams(const Context& ctx);  // capturing, a backend that can fork, tuning().stream_overlap
StreamHandle fork_stream(const Context& ctx, SideLane lane);
void join_stream(const Context& ctx, SideLane lane);  // ctx.stream waits for all of the lane's work
}  // namespace detail

template <typename Main, typename Side>
void run_concurrently(const Context& ctx, Main&& main, Side&& side) {
  if (!detail::overlaps_streams(ctx)) {
    main(ctx);
    side(ctx);
    return;
  }
  WorkspaceHold hold{ctx.stream, {}};
  Context side_ctx = ctx;
  side_ctx.workspace_hold = &hold;
  side_ctx.stream = detail::fork_stream(ctx, SideLane::Kernels);
  try {
    side(static_cast<const Context&>(side_ctx));
    main(ctx);
  } catch (...) {
    detail::join_stream(ctx, SideLane::Kernels);  // the capture fails anyway; keep the streams ordered
    throw;
  }
  detail::join_stream(ctx, SideLane::Kernels);
}  // the held workspaces go back here, on ctx.stream, after the join

}  // namespace sublet::ops
