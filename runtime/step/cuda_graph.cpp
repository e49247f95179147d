#include "runtime/step/cuda_graph.h"

#include <cuda_runtime_api.h>

#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "memory/current_stream.h"
#include "core/errors.h"
#include "memory/registry.h"

namespace sublet {
namespace {

cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

}  // namespace

CudaGraph::CudaGraph(Device device) : device_(device), allocator_(&memory::allocator_for(device)) {
  if (!device.is_cuda()) throw DeviceError("CudaGraph: needs a CUDA device, got " + device.str());
  memory::CudaDeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  // Blocking (not cudaStreamNonBlocking): work on the legacy default stream — parameters
  // initialised there, batches copied there — is ordered before the graph's work.
  SUBLET_CUDA_CHECK(cudaStreamCreate(&stream));
  stream_ = stream;
  pool_ = allocator_->create_private_pool();
}

CudaGraph::~CudaGraph() {
  // No throwing from here: errors are ignored, there is nothing left to recover.
  try {
    memory::CudaDeviceGuard guard(device_);
    cudaStreamSynchronize(as_stream(stream_));
    if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
    try {
      allocator_->release_private_pool(pool_);
    } catch (...) {
    }
    cudaStreamDestroy(as_stream(stream_));
  } catch (...) {  // the guard could not read or set the device
  }
}

void CudaGraph::capture(const std::function<void()>& work) {
  if (graph_) throw Error("CudaGraph::capture: this graph was captured already; make a new CudaGraph");
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  const cudaStream_t stream = as_stream(stream_);
  allocator_->begin_allocate_to_pool(pool_, stream_);
  cudaGraph_t graph = nullptr;
  try {
    memory::StreamGuard current(device_, stream_);
    SUBLET_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    try {
      work();
    } catch (...) {
      cudaGraph_t abandoned = nullptr;
      cudaStreamEndCapture(stream, &abandoned);  // leaves the stream usable again
      if (abandoned) cudaGraphDestroy(abandoned);
      cudaGetLastError();  // clears the (non-sticky) error an invalidated capture leaves behind
      throw;
    }
    SUBLET_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  } catch (...) {
    allocator_->end_allocate_to_pool(pool_);
    throw;
  }
  allocator_->end_allocate_to_pool(pool_);
  graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  SUBLET_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  exec_ = exec;
  // Moves the graph's setup onto the device now, so the first replay costs what the others do.
  SUBLET_CUDA_CHECK(cudaGraphUpload(exec, stream));
}

void CudaGraph::reset() {
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_)));
  if (exec_) SUBLET_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_)));
  exec_ = nullptr;
  if (graph_) SUBLET_CUDA_CHECK(cudaGraphDestroy(static_cast<cudaGraph_t>(graph_)));
  graph_ = nullptr;
  allocator_->release_private_pool(pool_);
  pool_ = allocator_->create_private_pool();
}

void CudaGraph::replay() {
  if (!exec_) throw Error("CudaGraph::replay: nothing captured yet");
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream_)));
}

std::size_t CudaGraph::node_count() const {
  if (!graph_) return 0;
  std::size_t count = 0;
  SUBLET_CUDA_CHECK(cudaGraphGetNodes(static_cast<cudaGraph_t>(graph_), nullptr, &count));
  return count;
}

std::size_t CudaGraph::root_count() const {
  if (!graph_) return 0;
  std::size_t count = 0;
  SUBLET_CUDA_CHECK(cudaGraphGetRootNodes(static_cast<cudaGraph_t>(graph_), nullptr, &count));
  return count;
}

void CudaGraph::synchronize() const {
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_)));
}

}  // namespace sublet
