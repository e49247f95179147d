#pragma once
// One data-parallel group behind one interface, whichever library moves the bytes: NCCL between
// GPUs (nccl_process_group.h), Gloo between CPU processes or through pinned host memory for GPUs
// (gloo_process_group.h). DataParallel, sync batch norm and the Trainer see only this.
//
//   auto group = make_process_group(Backend::Gloo, launch_env_from_process(), Device::cpu());
//   group->all_reduce(ptr, count, DType::Float32, ReduceOp::Sum, memory::current_stream(device));
//
// Joining: every rank connects to the rendezvous store (rank 0 serves it, or torchrun's agent
// does: tcp_store.h), announces itself and waits for all; a rank that never joins is named when
// the store timeout passes. Then the backend connects its ranks through the store.
//
// Ordering: a collective given a stream is ordered on it like a kernel: the next work enqueued
// on that stream sees the result (on the CPU, which has no streams, the call returns with the
// result). The bucket all-reduces of DataParallel are the exception: all_reduce_async starts one
// after the work enqueued so far and lets the caller go on (backward keeps running);
// join_pending makes a stream wait for all of them.
//
// Failure: a dead or stopped peer shows as a collective that never ends. Every wait of the
// group is bounded by ProcessGroupOptions::collective_timeout; on a failure the group aborts,
// asks the store which ranks stopped sending heartbeats (peer_watch.h) and throws
// DistributedError naming them. Everything later then fails fast.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "runtime/distributed/launch_env.h"

namespace sublet::distributed {

enum class ReduceOp { Sum, Average };
enum class Backend { Nccl, Gloo };

const char* backend_name(Backend backend);
// "nccl", "gloo", or "auto": NCCL on CUDA devices, Gloo on the CPU (as PyTorch's default
// process group). ValueError naming the flag for anything else, and for NCCL on the CPU.
Backend parse_backend(const std::string& text, Device device);

struct ProcessGroupOptions {
  // Joining (store connection and rendezvous) and every store operation.
  std::chrono::milliseconds store_timeout{60'000};
  // Any one wait for collectives (synchronize, join_pending, a blocking collective).
  std::chrono::milliseconds collective_timeout{60'000};
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  Device device() const { return device_; }
  const LaunchEnv& env() const { return env_; }
  const ProcessGroupOptions& options() const { return options_; }
  virtual Backend backend() const = 0;
  // The CUDA stream the group's copies and collectives run on (made once per device and process,
  // never destroyed: blocks recorded on it may be freed after the group is gone); null on the CPU.
  virtual StreamHandle comm_stream() const = 0;

  // In place, ordered on `stream` (see above). DType: float32/64, bfloat16, float16, int64, uint8
  // (Average: floating-point types only).
  virtual void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) = 0;
  virtual void broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) = 0;
  // In place, after the work enqueued on `after` so far, without making the caller wait; `data`
  // must stay alive and unwritten until join_pending. Every rank starts them in the same order.
  virtual void all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle after) = 0;
  // `stream` waits for every all_reduce_async so far (on the device where it can, else the host
  // waits). Throws DistributedError when one failed.
  virtual void join_pending(StreamHandle stream) = 0;
  // The host waits until the work enqueued on `stream` so far is done, watching for failures.
  virtual void synchronize(StreamHandle stream) = 0;
  // Every rank reaches this point (through the store; for setup and teardown).
  virtual void barrier() = 0;
  // Tears the group down without waiting for peers (error paths).
  virtual void abort(const std::string& why) = 0;
  virtual bool aborted() const = 0;

 protected:
  ProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options)
      : env_(env), device_(device), options_(options) {}

  LaunchEnv env_;
  Device device_;
  ProcessGroupOptions options_;
};

// Joins the group on `device` with `backend`. Throws DistributedError (store, library or
// connection failures, naming the rank and what was waited for), DeviceError for NCCL off CUDA
// or in a build without CUDA.
std::unique_ptr<ProcessGroup> make_process_group(Backend backend, const LaunchEnv& env, Device device,
                                                 ProcessGroupOptions options = {});

}  // namespace sublet::distributed
