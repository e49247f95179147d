#pragma once
// CUDA graphs over runtime work (a whole training step: forward, backward, optimizer), as
// torch.cuda.CUDAGraph / torch.cuda.graphs.make_graphed_callables. Compiled only with
// SUBLET_HAVE_CUDA.
//
// CudaGraph::capture(work) runs `work` once with the graph's own stream current (a blocking
// side stream: the legacy default stream cannot be captured) while the device's caching
// allocator serves that stream from a private pool (as PyTorch's graph pools). Nothing executes
// during capture: kernels are recorded; allocations are real and their addresses are baked into
// the graph. Because the pool's memory is never handed to anyone else, replay() makes no
// allocator call at all and reuses exactly the captured addresses. The destructor waits for the
// stream, destroys the graph and releases the pool (its segments go back to the device once the
// tensors still pointing into it — gradients, the static loss — are gone).
//
// What must not happen inside `work` (the capture fails or, worse, replays stale values):
//  - host synchronisation: .item(), to_vector(), host<->device copies (ops::copy_bytes waits),
//    allocator paths that synchronise (empty_cache). The CUDA bounds checks of embedding ids,
//    gather, scatter_add and the losses' targets do not read back while capturing: with an
//    ops::CapturedIndexChecks installed they are captured and read after each replay
//    (GraphedTrainStep does this), otherwise they are left out.
//  - first-time setup: cuDNN algorithm selection, cuBLAS handle creation, optimizer state
//    creation. Run eager warm-up steps on the same shapes first (PyTorch requires the same).
//  - host-drawn random numbers: whatever is drawn at capture is replayed every time (a dropout
//    mask would repeat on each replay). ResNets and sublet's GPTs have no dropout; dropout
//    throws while its stream captures.
// Capture uses cudaStreamCaptureModeRelaxed: the allocator may cudaMalloc a new segment for the
// private pool during capture, which the global and thread-local modes forbid.
#include <functional>

#include "memory/caching_allocator.h"
#include "core/device.h"

namespace sublet {

class CudaGraph {
 public:
  explicit CudaGraph(Device device = Device::cuda(0));
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records `work` (once per CudaGraph). Waits for the device first, so that eager work that
  // came before (warm-up steps) is finished and its memory is settled. If `work` throws, the
  // capture is abandoned and the exception propagates.
  void capture(const std::function<void()>& work);
  // Forgets the captured graph and releases its pool (its segments go back once the tensors
  // still pointing into them are gone); a fresh pool serves the next capture(). For a probe
  // capture that is never replayed, e.g. one recorded to plan the next (GraphedTrainStep).
  void reset();
  // Enqueues the captured work on stream(). Error before capture().
  void replay();
  bool captured() const { return exec_ != nullptr; }

  // The side stream capture and replay run on. Work that feeds a replay (copying the next batch
  // into the static inputs) belongs on it too, or before it on the legacy default stream (the
  // side stream is blocking, so it waits for that).
  StreamHandle stream() const { return stream_; }
  Device device() const { return device_; }
  memory::CachingAllocator::PoolId pool() const { return pool_; }
  // Kernel nodes of the captured graph (for tests and reports).
  std::size_t node_count() const;
  // Nodes that depend on no other: work that starts as soon as a replay does. More than one
  // where the capture forked to a second stream at its start (ops/concurrent.h).
  std::size_t root_count() const;
  void synchronize() const;

 private:
  Device device_;
  memory::CachingAllocator* allocator_;
  memory::CachingAllocator::PoolId pool_ = 0;
  StreamHandle stream_ = nullptr;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace sublet
