#include "runtime/side_work.h"

#include <memory>

#include "ops/concurrent.h"

namespace sublet::detail {

namespace {

struct PendingSideWork {
  ops::Context ctx;  // the stream that forked it, which joins it
  ops::SideLane lane;
  StreamHandle lane_stream;
  std::unique_ptr<ops::WorkspaceHold> workspaces;  // on ctx.stream, released after the join
  std::vector<Tensor> keep;
};

// Per thread, as the lanes' streams (ops/cuda/device_services_cuda.cpp).
thread_local std::vector<PendingSideWork> pending;
thread_local bool use_odd_lane = false;

}  // namespace

void run_beside(const ops::Context& ctx, const StreamWork& main, const StreamWork& side, std::vector<Tensor> keep) {
  if (!ops::detail::overlaps_streams(ctx)) {
    main(ctx);
    side(ctx);
    return;
  }
  const ops::SideLane lane = use_odd_lane ? ops::SideLane::BesideOdd : ops::SideLane::BesideEven;
  use_odd_lane = !use_odd_lane;
  PendingSideWork work{ctx, lane, nullptr, std::make_unique<ops::WorkspaceHold>(), std::move(keep)};
  work.workspaces->stream = ctx.stream;
  ops::Context side_ctx = ctx;
  side_ctx.workspace_hold = work.workspaces.get();
  side_ctx.stream = ops::detail::fork_stream(ctx, lane);
  work.lane_stream = side_ctx.stream;
  try {
    side(static_cast<const ops::Context&>(side_ctx));
    main(ctx);
  } catch (...) {
    ops::detail::join_stream(ctx, lane);  // the capture fails anyway; keep the streams ordered
    settle_side_work();
    throw;
  }
  settle_side_work();  // the previous call's side work, on the other lane: behind this main work
  pending.push_back(std::move(work));
}

void settle_side_work() {
  for (PendingSideWork& work : pending) ops::detail::join_stream(work.ctx, work.lane);
  pending.clear();  // the kept tensors and workspaces go back after the joins, on the joining streams
}

bool side_work_pending() { return !pending.empty(); }

std::vector<StreamHandle> pending_side_streams() {
  std::vector<StreamHandle> out;
  for (const PendingSideWork& work : pending) out.push_back(work.lane_stream);
  return out;
}

}  // namespace sublet::detail
