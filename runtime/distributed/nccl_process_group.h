#pragma once
// The NCCL process group: one communicator per process on its own communication stream. CUDA
// builds only. Joining: the store rendezvous (process_group.h), then rank 0 makes the NCCL
// unique id and sets it in the store, the others read it, and ncclCommInitRank builds the
// communicator. Collectives are asynchronous on the device, so a dead peer shows as a
// collective that never ends: synchronize() and join_pending's callers' synchronize are where
// the host waits, polling the stream and NCCL's asynchronous error; after the timeout (or on an
// NCCL error) the communicator is aborted (ncclCommAbort) and the silent ranks are named.
#include <memory>
#include <string>

#include "runtime/distributed/peer_watch.h"
#include "runtime/distributed/process_group.h"
#include "runtime/distributed/tcp_store.h"

namespace sublet::distributed {

class NcclProcessGroup final : public ProcessGroup {
 public:
  // `device` must be a CUDA device (DeviceError otherwise).
  NcclProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options);
  ~NcclProcessGroup() override;

  Backend backend() const override { return Backend::Nccl; }
  StreamHandle comm_stream() const override { return comm_stream_; }
  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) override;
  void all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle after) override;
  void join_pending(StreamHandle stream) override;
  void synchronize(StreamHandle stream) override;
  void barrier() override;
  void abort(const std::string& why) override;
  bool aborted() const override { return aborted_; }

 private:
  void check_usable(const char* what) const;

  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<PeerWatch> watch_;
  void* comm_ = nullptr;  // ncclComm_t
  StreamHandle comm_stream_ = nullptr;
  void* ordered_ = nullptr;  // cudaEvent_t for stream-to-stream waits
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace sublet::distributed
