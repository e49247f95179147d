#pragma once
// The Gloo process group: data parallel between CPU processes, on one machine or several (Gloo's
// TCP transport), and for CUDA tensors through pinned host memory (gloo_cuda_staging.h). Gloo
// comes from sublet's shim, loaded at run time (gloo_library.h).
//
// Collectives run on one thread of the group, the communication lane, in the order they are
// issued (the same on every rank): all_reduce_async hands a bucket to the lane and returns, so
// the all-reduce overlaps the rest of backward as on the GPU's communication stream; the
// blocking calls queue behind it and wait. Gloo's own timeout bounds every collective; the
// caller's wait is bounded too, in case Gloo's is not kept.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/distributed/gloo_cuda_staging.h"
#include "runtime/distributed/gloo_shim_abi.h"
#include "runtime/distributed/peer_watch.h"
#include "runtime/distributed/process_group.h"
#include "runtime/distributed/tcp_store.h"

namespace sublet::distributed {

class GlooProcessGroup final : public ProcessGroup {
 public:
  // `device` is the CPU or a CUDA device. Throws DistributedError when the shim does not load,
  // the rendezvous or Gloo's connection fails.
  GlooProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options);
  ~GlooProcessGroup() override;

  Backend backend() const override { return Backend::Gloo; }
  StreamHandle comm_stream() const override { return staging_ ? staging_->stream() : nullptr; }
  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) override;
  void all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle after) override;
  void join_pending(StreamHandle stream) override;
  void synchronize(StreamHandle stream) override;
  void barrier() override;
  void abort(const std::string& why) override;
  bool aborted() const override { return aborted_; }

 private:
  using Job = std::function<void()>;
  // Queues `job` on the lane. `host` is the memory it works on: the caller's for CPU tensors, a
  // staging transfer's (waited for on the lane) for CUDA ones.
  void post(const char* what, Job job);
  // Runs `job` on the calling thread when the lane is idle (a blocking collective then costs no
  // thread switch); else queues it. Then waits as wait_lane.
  void run_blocking(const char* what, Job job);
  // Waits until the lane has run everything posted so far; throws the first failure (named).
  void wait_lane(const char* what);
  void lane_loop();
  [[noreturn]] void fail(const std::string& what, const std::string& error);
  void check_usable(const char* what) const;
  std::chrono::steady_clock::time_point lane_deadline() const;

  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<PeerWatch> watch_;
  std::unique_ptr<gloo_shim::Communicator> comm_;
  std::unique_ptr<GlooCudaStaging> staging_;
  std::vector<GlooCudaStaging::Transfer> pending_;  // CUDA: staged out, not yet copied back

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<std::string, Job>> queue_;
  bool running_job_ = false;
  bool stop_ = false;
  std::string lane_error_;  // the first failure on the lane
  std::thread lane_;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace sublet::distributed
