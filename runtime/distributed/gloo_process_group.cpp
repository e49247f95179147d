#include "runtime/distributed/gloo_process_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <exception>

#include "core/errors.h"
#include "runtime/distributed/gloo_library.h"
#include "runtime/distributed/store_socket.h"

namespace sublet::distributed {
namespace {

using Clock = std::chrono::steady_clock;

gloo_shim::ElementKind element_kind(DType dtype) {
  switch (dtype) {
    case DType::Float32: return gloo_shim::ElementKind::Float32;
    case DType::Float64: return gloo_shim::ElementKind::Float64;
    case DType::BFloat16: return gloo_shim::ElementKind::BFloat16;
    case DType::Float16: return gloo_shim::ElementKind::Float16;
    case DType::Int64: return gloo_shim::ElementKind::Int64;
    case DType::UInt8: return gloo_shim::ElementKind::UInt8;
  }
  throw ValueError(std::string("Gloo collectives take float32, float64, bfloat16, float16, int64 or uint8, got ") +
                   dtype_name(dtype));
}

gloo_shim::Reduction reduction(ReduceOp op, DType dtype) {
  if (op == ReduceOp::Sum) return gloo_shim::Reduction::Sum;
  if (dtype == DType::Int64 || dtype == DType::UInt8)
    throw ValueError(std::string("an average over ranks needs a floating-point dtype, got ") + dtype_name(dtype));
  return gloo_shim::Reduction::Average;
}

// Gloo's store keys under sublet's namespace, its waits bounded by the store timeout.
class GlooStoreAdapter final : public gloo_shim::KeyValueStore {
 public:
  GlooStoreAdapter(Store& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& value) override {
    store_.set(kPrefix + key, std::string_view(value.data(), value.size()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string value = store_.get(kPrefix + key, timeout_);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> prefixed;
    for (const std::string& key : keys) prefixed.push_back(kPrefix + key);
    const auto missing = store_.wait_for_keys(prefixed, std::min(timeout, timeout_));
    if (!missing.empty())
      throw DistributedError("Gloo's connection: " + std::to_string(missing.size()) + " rank address" +
                             (missing.size() == 1 ? "" : "es") + " not published within " +
                             detail::describe_duration(std::min(timeout, timeout_)) + " (first: " + missing.front() + ")");
  }

 private:
  static inline const std::string kPrefix = "sublet/gloo/";
  Store& store_;
  std::chrono::milliseconds timeout_;
};

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The address of this machine that routes to the master: the one its peers can reach it at
// (a datagram socket's connect sends nothing; it only picks the route).
std::string local_address_towards(const std::string& host, std::uint16_t port) {
  if (is_loopback(host)) return "127.0.0.1";
  for (const auto& address : detail::resolve(host, port, "MASTER_ADDR")) {
    detail::Fd fd(::socket(address.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.address), address.length) != 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = local.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                                                  : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof(text))) return text;
  }
  throw DistributedError("Gloo: no local address routes to MASTER_ADDR " + host +
                         "; set GLOO_SOCKET_IFNAME to the network interface to use");
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(const LaunchEnv& env, Device device, ProcessGroupOptions options)
    : ProcessGroup(env, device, options) {
  const GlooLibrary& library = gloo();  // fail before anything is started when there is no Gloo
  if (device.is_cuda()) {
    staging_ = std::make_unique<GlooCudaStaging>(device);
  } else if (!device.is_cpu()) {
    throw DeviceError("--backend gloo runs on the CPU or CUDA devices, got " + device.str());
  }
  store_ = std::make_unique<TcpStore>(env, TcpStoreOptions{.timeout = options.store_timeout});
  store_->rendezvous();
  const auto interval = PeerWatch::interval_for(options.collective_timeout);
  const auto ask_timeout = interval * 4 + std::chrono::milliseconds(2'000);
  watch_ = std::make_unique<PeerWatch>(store_->connect_another(ask_timeout), store_->connect_another(ask_timeout),
                                       env.rank, env.world_size, interval, !env.agent_store);
  gloo_shim::ConnectOptions connect;
  connect.rank = env.rank;
  connect.world_size = env.world_size;
  connect.interface_name = env.gloo_socket_ifname;
  if (connect.interface_name.empty()) connect.hostname = local_address_towards(env.master_addr, env.master_port);
  connect.timeout = options.collective_timeout;
  GlooStoreAdapter adapter(store_->store(), options.store_timeout);
  try {
    comm_.reset(library.connect(connect, adapter));
  } catch (const std::exception& e) {
    throw DistributedError("rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                           ": Gloo could not connect the group (" + e.what() + ")");
  }
  lane_ = std::thread([this] { lane_loop(); });
}

GlooProcessGroup::~GlooProcessGroup() {
  // Never throws. A collective stuck past every timeout keeps its thread: it is left behind
  // with the communicator it uses rather than waited for.
  bool stuck = false;
  {
    std::unique_lock lock(mutex_);
    stop_ = true;
    queue_.clear();
    changed_.notify_all();
    stuck = !changed_.wait_for(lock, std::chrono::seconds(2), [this] { return !running_job_; });
  }
  if (stuck) {
    lane_.detach();
    (void)comm_.release();
    (void)staging_.release();
  } else {
    lane_.join();
    for (auto& t : pending_) staging_->discard(t);
    comm_.reset();  // closes the connections: a peer blocked on this rank fails now
  }
  // After a failure the rank serving the store keeps it until the others have asked it who
  // failed (they would find it gone and blame rank 0 otherwise).
  if (aborted_ && watch_ && store_ && store_->server()) watch_->linger_for_peers();
}

void GlooProcessGroup::lane_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto [what, job] = std::move(queue_.front());
    queue_.pop_front();
    running_job_ = true;
    lock.unlock();
    std::string error;
    try {
      job();
    } catch (const std::exception& e) {
      error = what + ": " + e.what();
    }
    lock.lock();
    running_job_ = false;
    if (!error.empty() && lane_error_.empty()) {
      lane_error_ = error;
      queue_.clear();  // the group is broken: nothing after a failed collective can match up
    }
    changed_.notify_all();
  }
}

void GlooProcessGroup::post(const char* what, Job job) {
  std::lock_guard lock(mutex_);
  if (!lane_error_.empty()) return;  // wait_lane reports it
  queue_.emplace_back(what, std::move(job));
  changed_.notify_all();
}

void GlooProcessGroup::run_blocking(const char* what, Job job) {
  {
    std::unique_lock lock(mutex_);
    if (!lane_error_.empty() || !queue_.empty() || running_job_) {
      lock.unlock();
      post(what, std::move(job));
      wait_lane(what);
      return;
    }
    running_job_ = true;  // the lane stays idle meanwhile: only this thread posts
  }
  std::string error;
  try {
    job();
  } catch (const std::exception& e) {
    error = std::string(what) + ": " + e.what();
  }
  {
    std::lock_guard lock(mutex_);
    running_job_ = false;
    if (!error.empty() && lane_error_.empty()) lane_error_ = error;
    changed_.notify_all();
  }
  wait_lane(what);
}

Clock::time_point GlooProcessGroup::lane_deadline() const {
  // Gloo's own timeout ends a stuck collective first; this bounds the wait if it does not.
  return Clock::now() + options_.collective_timeout +
         std::max<std::chrono::milliseconds>(std::chrono::milliseconds(2'000), options_.collective_timeout / 4);
}

void GlooProcessGroup::wait_lane(const char* what) {
  std::string error;
  {
    std::unique_lock lock(mutex_);
    const bool done = changed_.wait_until(lock, lane_deadline(), [this] {
      return !lane_error_.empty() || (queue_.empty() && !running_job_);
    });
    if (!lane_error_.empty()) {
      error = lane_error_;
    } else if (!done) {
      error = std::string(what) + ": not finished within " +
              detail::describe_duration(options_.collective_timeout) + " and Gloo's timeout did not end it";
    }
  }
  if (!error.empty()) {
    for (auto& t : pending_) staging_->discard(t);
    pending_.clear();
    fail(what, error);
  }
}

void GlooProcessGroup::fail(const std::string& what, const std::string& error) {
  abort(error);
  const std::string blame = watch_ ? watch_->diagnose() : std::string("no peer watch");
  if (watch_) watch_->report_diagnosed();
  throw DistributedError("data parallel (gloo): " + blame + "; rank " + std::to_string(env_.rank) + " of " +
                         std::to_string(env_.world_size) + " saw its " + what + " fail: " + error);
}

void GlooProcessGroup::check_usable(const char* what) const {
  if (aborted_)
    throw DistributedError(std::string(what) + " on rank " + std::to_string(env_.rank) +
                           ": the group was aborted earlier (" + abort_reason_ + ")");
}

void GlooProcessGroup::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle stream) {
  check_usable("all_reduce");
  const auto kind = element_kind(dtype);
  const auto how = reduction(op, dtype);
  if (!staging_) {
    run_blocking("all-reduce", [this, data, count, kind, how] { comm_->all_reduce(data, count, kind, how); });
    return;
  }
  GlooCudaStaging::Transfer t = staging_->stage_out(data, count * element_size(dtype), stream);
  pending_.push_back(t);
  const auto deadline = lane_deadline();
  post("all-reduce", [this, t, count, kind, how, deadline] {
    if (!staging_->wait_staged(t, deadline)) throw DistributedError("the copy to pinned host memory did not finish");
    comm_->all_reduce(t.host, count, kind, how);
  });
  join_pending(stream);
}

void GlooProcessGroup::broadcast(void* data, std::size_t count, DType dtype, int root, StreamHandle stream) {
  check_usable("broadcast");
  const std::size_t bytes = count * element_size(dtype);
  if (!staging_) {
    run_blocking("broadcast", [this, data, bytes, root] { comm_->broadcast(data, bytes, root); });
    return;
  }
  GlooCudaStaging::Transfer t = staging_->stage_out(data, bytes, stream);
  pending_.push_back(t);
  const auto deadline = lane_deadline();
  post("broadcast", [this, t, bytes, root, deadline] {
    if (!staging_->wait_staged(t, deadline)) throw DistributedError("the copy to pinned host memory did not finish");
    comm_->broadcast(t.host, bytes, root);
  });
  join_pending(stream);
}

void GlooProcessGroup::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op, StreamHandle after) {
  check_usable("all_reduce_async");
  const auto kind = element_kind(dtype);
  const auto how = reduction(op, dtype);
  if (!staging_) {
    post("gradient all-reduce", [this, data, count, kind, how] { comm_->all_reduce(data, count, kind, how); });
    return;
  }
  GlooCudaStaging::Transfer t = staging_->stage_out(data, count * element_size(dtype), after);
  pending_.push_back(t);
  const auto deadline = lane_deadline();
  post("gradient all-reduce", [this, t, count, kind, how, deadline] {
    if (!staging_->wait_staged(t, deadline)) throw DistributedError("the copy to pinned host memory did not finish");
    comm_->all_reduce(t.host, count, kind, how);
  });
}

void GlooProcessGroup::join_pending(StreamHandle stream) {
  check_usable("join_pending");
  wait_lane("gradient all-reduce");
  if (!staging_) return;
  for (auto& t : pending_) staging_->stage_in(t);
  pending_.clear();
  staging_->join(stream);
}

void GlooProcessGroup::synchronize(StreamHandle stream) {
  check_usable("synchronize");
  wait_lane("synchronize");
  if (staging_) staging_->host_wait(stream);
}

void GlooProcessGroup::barrier() {
  check_usable("barrier");
  wait_lane("barrier");
  store_->barrier();
}

void GlooProcessGroup::abort(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = why;
  queue_.clear();
}

}  // namespace sublet::distributed
