#pragma once
// One data-parallel group: this process's rank, the rendezvous store, and an NCCL communicator
// on its own communication stream. CUDA builds only.
//
//   ProcessGroup group(launch_env_from_process(), Device::cuda(env.local_rank));
//   group.all_reduce(ptr, count, DType::Float32, ReduceOp::Average, group.comm_stream());
//
// Joining: every rank connects to the store (rank 0 serves it) and announces itself; rank 0
// makes the NCCL unique id and sets it in the store; the others read it; ncclCommInitRank
// builds the communicator. A rank that never joins is named by the store's rendezvous timeout.
//
// Failure: collectives are asynchronous, so a dead peer shows as a collective that never ends.
// synchronize() is the one place the host waits on the group's work: it polls the stream and
// NCCL's asynchronous error, and after the timeout (or on an NCCL error) aborts the
// communicator (ncclCommAbort) and throws DistributedError. Everything later then fails fast.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "runtime/distributed/launch_env.h"
#include "runtime/distributed/tcp_store.h"

namespace sublet::distributed {

enum class ReduceOp { Sum, Average };

struct ProcessGroupOptions {
  std::chrono::milliseconds store_timeout{300'000};    // joining, and store operations
  std::chrono::milliseconds collective_timeout{600'000};  // synchronize(): as PyTorch's default NCCL timeout
};

class ProcessGroup {
 public:
  // Joins the group (see above) on `device`, which must be a CUDA device. Throws
  // DistributedError (store or NCCL failures, with the rank and what was waited for),
  // DeviceError for a device that is not CUDA.
  ProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  Device device() const { return device_; }
  const LaunchEnv& env() const { return env_; }
  // The stream collectives run on: the device's communication stream, non-blocking, made once
  // per process and never destroyed (blocks recorded on it may be freed after the group is gone).
  StreamHandle comm_stream() const { return comm_stream_; }

  // In place on `stream`. DType: float32/64, bfloat16, float16, int64, uint8.
  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream);
  void broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream);

  // Waits on the host until the work enqueued on `stream` so far is done; see above.
  void synchronize(StreamHandle stream);
  // Every rank reaches this point (through the store; for setup and teardown).
  void barrier();
  // Tears the communicator down without waiting for peers (error paths).
  void abort(const std::string& why);
  bool aborted() const { return aborted_; }

 private:
  void check_usable(const char* what) const;

  LaunchEnv env_;
  Device device_;
  ProcessGroupOptions options_;
  std::unique_ptr<TcpStore> store_;
  void* comm_ = nullptr;  // ncclComm_t
  StreamHandle comm_stream_ = nullptr;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace sublet::distributed
