#pragma once
// Device work an op leaves running on a second stream past its own end, in a captured step.
//
// A convolution's backward computes two independent gradients. ops::run_concurrently runs the
// weight gradient on a second stream beside the input gradient and joins it at once, so the
// next op in backward waits for the slower of the two. But only the optimizer reads a
// parameter's gradient: the rest of backward needs the input gradient alone. run_beside lets
// the side work (the weight gradient) run on until the next run_beside has enqueued its own
// main work (the next convolution's input gradient), or until settle_side_work():
//
//   conv k:    lane A: fork, weight gradient k     main: input gradient k
//              (nothing waits for lane A here)
//   ...        main: batch norm's backward, ...    (beside lane A)
//   conv k+1:  lane B: fork, weight gradient k+1   main: input gradient k+1, then wait for lane A
//
// Two lanes alternate, so at most one call's side work is pending at a time and it is joined
// one call later. What the side reads or writes (the tensors given as `keep`, and its
// workspaces) stays alive until it is joined: freed earlier, their bytes could go to the
// capturing stream's next requests while the side still uses them.
//
// Who must wait for pending side work before reading what it wrote: autograd's engine settles
// before it launches anything on a leaf's gradient (accumulating into an existing one, casting,
// copying to the leaf's layout) and at the end of every backward; Optimizer::backward_and_step
// makes its update lane wait for pending_side_streams() too. So run_beside is for side work whose
// results only go to leaves (a convolution's weight and bias gradients, when they are leaves).
//
// Only while ctx.stream captures a CUDA graph (as run_concurrently: eager launches would pay host
// time for the fork and join); otherwise main, then side, on ctx.stream. The diagnostic
// TuningOptions::stream_overlap = false (core/tuning.h) turns both off.
#include <functional>
#include <vector>

#include "ops/context.h"
#include "runtime/tensor.h"

namespace sublet::detail {

using StreamWork = std::function<void(const ops::Context&)>;

void run_beside(const ops::Context& ctx, const StreamWork& main, const StreamWork& side, std::vector<Tensor> keep);
// Makes each stream that started side work wait for it, then drops what that work kept.
void settle_side_work();
bool side_work_pending();
// The lanes with pending side work (a stream that reads its results must wait for them).
std::vector<StreamHandle> pending_side_streams();

}  // namespace sublet::detail
