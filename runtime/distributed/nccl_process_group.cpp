#include "runtime/distributed/nccl_process_group.h"

#include <cuda_runtime_api.h>

#include <thread>

#include "core/errors.h"
#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "runtime/distributed/communication_stream.h"
#include "runtime/distributed/nccl_library.h"

namespace sublet::distributed {
namespace {

constexpr const char* kUniqueIdKey = "sublet/nccl_unique_id";

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Int64: return ncclInt64;
    case DType::UInt8: return ncclUint8;
    default: break;
  }
  throw ValueError(std::string("NCCL collectives take float32, float64, bfloat16, float16, int64 or uint8, got ") +
                   dtype_name(dtype));
}

ncclComm_t as_comm(void* comm) { return static_cast<ncclComm_t>(comm); }

cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

}  // namespace

NcclProcessGroup::NcclProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options)
    : ProcessGroup(env, device, options) {
  if (!device.is_cuda()) throw DeviceError("data parallel runs on CUDA devices; got " + device.str());
  const NcclLibrary& lib = nccl();  // fail before anything is started when there is no NCCL
  memory::CudaDeviceGuard guard(device);
  TcpStoreOptions store_options;
  store_options.timeout = options.store_timeout;
  store_ = std::make_unique<TcpStore>(env, store_options);
  store_->rendezvous();
  const auto interval = PeerWatch::interval_for(options.collective_timeout);
  const auto ask_timeout = interval * 4 + std::chrono::milliseconds(2'000);
  watch_ = std::make_unique<PeerWatch>(store_->connect_another(ask_timeout), store_->connect_another(ask_timeout),
                                       env.rank, env.world_size, interval, !env.agent_store);
  ncclUniqueId id{};
  if (env.rank == 0) {
    check_nccl(lib.get_unique_id(&id), "ncclGetUniqueId");
    store_->store().set(kUniqueIdKey, std::string_view(id.internal, sizeof(id.internal)));
  } else {
    const std::string bytes = store_->store().get(kUniqueIdKey, options.store_timeout);
    if (bytes.size() != sizeof(id.internal))
      throw DistributedError("rank " + std::to_string(env.rank) + ": the store's NCCL unique id has " +
                             std::to_string(bytes.size()) + " bytes, expected " + std::to_string(sizeof(id.internal)));
    std::copy(bytes.begin(), bytes.end(), id.internal);
  }
  comm_stream_ = communication_stream(device);
  cudaEvent_t ordered = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&ordered, cudaEventDisableTiming));
  ordered_ = ordered;
  ncclComm_t comm = nullptr;
  check_nccl(lib.comm_init_rank(&comm, env.world_size, id, env.rank),
             ("rank " + std::to_string(env.rank) + ": ncclCommInitRank").c_str());
  comm_ = comm;
}

NcclProcessGroup::~NcclProcessGroup() {
  // Never throws: a destructor may run while an error unwinds. After a failure the rank serving
  // the store keeps it until the others have asked it who failed.
  if (aborted_ && watch_ && store_ && store_->server()) watch_->linger_for_peers();
  if (ordered_) cudaEventDestroy(as_event(ordered_));
  if (comm_) {
    memory::CudaDeviceGuard guard(device_);
    if (aborted_) {
      nccl().comm_abort(as_comm(comm_));
    } else {
      cudaStreamSynchronize(as_stream(comm_stream_));
      nccl().comm_destroy(as_comm(comm_));
    }
  }
}

void NcclProcessGroup::check_usable(const char* what) const {
  if (aborted_)
    throw DistributedError(std::string(what) + " on rank " + std::to_string(env_.rank) +
                           ": the group was aborted earlier (" + abort_reason_ + ")");
}

void NcclProcessGroup::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) {
  check_usable("all_reduce");
  memory::CudaDeviceGuard guard(device_);
  check_nccl(nccl().all_reduce(data, data, count, nccl_type(dtype), op == ReduceOp::Sum ? ncclSum : ncclAvg,
                               as_comm(comm_), as_stream(stream)),
             "ncclAllReduce");
}

void NcclProcessGroup::broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) {
  check_usable("broadcast");
  memory::CudaDeviceGuard guard(device_);
  check_nccl(nccl().broadcast(data, data, count, nccl_type(dtype), root, as_comm(comm_), as_stream(stream)),
             "ncclBroadcast");
}

void NcclProcessGroup::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle after) {
  check_usable("all_reduce_async");
  memory::CudaDeviceGuard guard(device_);
  // A wait captures the event's state when it is enqueued, so one event serves every launch.
  SUBLET_CUDA_CHECK(cudaEventRecord(as_event(ordered_), as_stream(after)));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(as_stream(comm_stream_), as_event(ordered_), 0));
  all_reduce(data, count, dtype, op, comm_stream_);
}

void NcclProcessGroup::join_pending(StreamHandle stream) {
  check_usable("join_pending");
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaEventRecord(as_event(ordered_), as_stream(comm_stream_)));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(ordered_), 0));
}

void NcclProcessGroup::synchronize(StreamHandle stream) {
  check_usable("synchronize");
  memory::CudaDeviceGuard guard(device_);
  cudaEvent_t done = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  SUBLET_CUDA_CHECK(cudaEventRecord(done, as_stream(stream)));
  const auto started = std::chrono::steady_clock::now();
  std::string failure;
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    const cudaError_t state = cudaEventQuery(done);
    if (state == cudaSuccess) break;
    if (state != cudaErrorNotReady) {
      cudaEventDestroy(done);
      SUBLET_CUDA_CHECK(state);
    }
    cudaGetLastError();  // clears the "not ready"
    ncclResult_t async = ncclSuccess;
    check_nccl(nccl().comm_get_async_error(as_comm(comm_), &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) {
      failure = std::string("NCCL reported an asynchronous error ") + std::to_string(static_cast<int>(async)) + " (" +
                nccl().get_error_string(async) + ")";
      break;
    }
    if (std::chrono::steady_clock::now() - started > options_.collective_timeout) {
      failure = "a collective did not finish within " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.collective_timeout).count()) +
                " s (a peer rank died or stopped calling collectives)";
      break;
    }
    std::this_thread::sleep_for(pause);
  }
  cudaEventDestroy(done);
  if (!failure.empty()) {
    abort(failure);
    const std::string blame = watch_->diagnose();
    watch_->report_diagnosed();
    throw DistributedError("data parallel (nccl): " + blame + "; rank " + std::to_string(env_.rank) +
                           " of " + std::to_string(env_.world_size) + " saw: " + failure +
                           "; the communicator was aborted");
  }
}

void NcclProcessGroup::barrier() {
  check_usable("barrier");
  store_->barrier();
}

void NcclProcessGroup::abort(const std::string& why) {
  if (aborted_ || !comm_) return;
  aborted_ = true;
  abort_reason_ = why;
  memory::CudaDeviceGuard guard(device_);
  nccl().comm_abort(as_comm(comm_));
  comm_ = nullptr;
}

}  // namespace sublet::distributed
