#include "runtime/distributed/process_group.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <thread>

#include "core/errors.h"
#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
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

// One communication stream per device for the life of the process, never destroyed (as
// PyTorch's stream pool). Blocks used on it are recorded there (record_stream) and may be freed
// after their group is gone (a parameter's gradient, a view into a bucket, outlives the
// DataParallel that made it); the allocator then records an event on this stream, which must
// still exist.
StreamHandle communication_stream(Device device) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;
  std::lock_guard lock(mutex);
  cudaStream_t& stream = streams[device.index];
  if (!stream) {
    memory::CudaDeviceGuard guard(device);
    SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return stream;
}
cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

}  // namespace

ProcessGroup::ProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options)
    : env_(env), device_(device), options_(options) {
  if (!device.is_cuda()) throw DeviceError("data parallel runs on CUDA devices; got " + device.str());
  const NcclLibrary& lib = nccl();  // fail before anything is started when there is no NCCL
  memory::CudaDeviceGuard guard(device);
  TcpStoreOptions store_options;
  store_options.timeout = options.store_timeout;
  store_ = std::make_unique<TcpStore>(env, store_options);
  store_->rendezvous();
  ncclUniqueId id{};
  if (env.rank == 0) {
    check_nccl(lib.get_unique_id(&id), "ncclGetUniqueId");
    store_->client().set(kUniqueIdKey, std::string_view(id.internal, sizeof(id.internal)));
  } else {
    const std::string bytes = store_->client().get(kUniqueIdKey);
    if (bytes.size() != sizeof(id.internal))
      throw DistributedError("rank " + std::to_string(env.rank) + ": the store's NCCL unique id has " +
                             std::to_string(bytes.size()) + " bytes, expected " + std::to_string(sizeof(id.internal)));
    std::copy(bytes.begin(), bytes.end(), id.internal);
  }
  comm_stream_ = communication_stream(device);
  ncclComm_t comm = nullptr;
  check_nccl(lib.comm_init_rank(&comm, env.world_size, id, env.rank),
             ("rank " + std::to_string(env.rank) + ": ncclCommInitRank").c_str());
  comm_ = comm;
}

ProcessGroup::~ProcessGroup() {
  // Never throws: a destructor may run while an error unwinds.
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

void ProcessGroup::check_usable(const char* what) const {
  if (aborted_)
    throw DistributedError(std::string(what) + " on rank " + std::to_string(env_.rank) +
                           ": the group was aborted earlier (" + abort_reason_ + ")");
}

void ProcessGroup::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) {
  check_usable("all_reduce");
  memory::CudaDeviceGuard guard(device_);
  check_nccl(nccl().all_reduce(data, data, count, nccl_type(dtype), op == ReduceOp::Sum ? ncclSum : ncclAvg,
                               as_comm(comm_), as_stream(stream)),
             "ncclAllReduce");
}

void ProcessGroup::broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) {
  check_usable("broadcast");
  memory::CudaDeviceGuard guard(device_);
  check_nccl(nccl().broadcast(data, data, count, nccl_type(dtype), root, as_comm(comm_), as_stream(stream)),
             "ncclBroadcast");
}

void ProcessGroup::synchronize(StreamHandle stream) {
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
    throw DistributedError("rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world_size) + ": " +
                           failure + "; the communicator was aborted");
  }
}

void ProcessGroup::barrier() {
  check_usable("barrier");
  store_->barrier();
}

void ProcessGroup::abort(const std::string& why) {
  if (aborted_ || !comm_) return;
  aborted_ = true;
  abort_reason_ = why;
  memory::CudaDeviceGuard guard(device_);
  nccl().comm_abort(as_comm(comm_));
  comm_ = nullptr;
}

}  // namespace sublet::distributed
