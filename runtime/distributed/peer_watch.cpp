#include "runtime/distributed/peer_watch.h"

#include <algorithm>

#include "core/errors.h"
#include "runtime/distributed/store_socket.h"

namespace sublet::distributed {
namespace {

std::string heartbeat_key(int rank) { return "sublet/heartbeat/" + std::to_string(rank); }
constexpr const char* kDiagnosedKey = "sublet/failure/diagnosed";
// Set by a rank that saw the failure and diagnosed it before leaving: it stopped beating because it
// is ending, not because it died, so the ranks that diagnose after it do not blame it.
std::string diagnosed_key(int rank) { return std::string(kDiagnosedKey) + "/" + std::to_string(rank); }

}  // namespace

PeerWatch::PeerWatch(std::unique_ptr<Store> beat, std::unique_ptr<Store> ask, int rank, int world_size,
                     std::chrono::milliseconds interval, bool store_on_rank0)
    : beat_(std::move(beat)),
      ask_(std::move(ask)),
      rank_(rank),
      world_size_(world_size),
      interval_(interval),
      store_on_rank0_(store_on_rank0) {
  beat_->add(heartbeat_key(rank_), 1);  // a first beat before anyone can ask
  thread_ = std::thread([this] { beat_loop(); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::chrono::milliseconds PeerWatch::interval_for(std::chrono::milliseconds collective_timeout) {
  return std::clamp(collective_timeout / 20, std::chrono::milliseconds(200), std::chrono::milliseconds(2'000));
}

void PeerWatch::beat_loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    try {
      beat_->add(heartbeat_key(rank_), 1);
    } catch (const Error&) {
      return;  // the store is gone; diagnose() says so to whoever asks
    }
    lock.lock();
  }
}

std::vector<int> PeerWatch::silent_ranks(std::chrono::milliseconds window) {
  std::vector<std::int64_t> before(static_cast<std::size_t>(world_size_));
  for (int r = 0; r < world_size_; ++r) before[static_cast<std::size_t>(r)] = ask_->add(heartbeat_key(r), 0);
  std::this_thread::sleep_for(window);
  std::vector<int> silent;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || ask_->add(heartbeat_key(r), 0) != before[static_cast<std::size_t>(r)]) continue;
    if (ask_->add(diagnosed_key(r), 0) == 0) silent.push_back(r);
  }
  return silent;
}

void PeerWatch::report_diagnosed() {
  try {
    ask_->add(diagnosed_key(rank_), 1);
    ask_->add(kDiagnosedKey, 1);
  } catch (const Error&) {
  }
}

void PeerWatch::linger_for_peers() {
  const auto deadline = std::chrono::steady_clock::now() + interval_ * 4 + std::chrono::seconds(1);
  const std::int64_t expected = world_size_ - blamed_;
  try {
    while (ask_->add(kDiagnosedKey, 0) < expected && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (const Error&) {
  }
}

std::string PeerWatch::diagnose() {
  const auto window = interval_ * 4;
  std::vector<int> silent;
  try {
    silent = silent_ranks(window);
  } catch (const Error& e) {
    if (store_on_rank0_)
      return std::string("rank 0 is unreachable (it serves the rendezvous store, which does not answer: ") + e.what() + ")";
    return std::string("the rendezvous store does not answer (") + e.what() + ")";
  }
  blamed_ = static_cast<int>(silent.size());
  if (silent.empty()) return "every rank still sends heartbeats (none can be blamed; a slow or diverging rank?)";
  std::string ranks;
  for (std::size_t i = 0; i < silent.size(); ++i) ranks += (i ? ", " : "") + std::to_string(silent[i]);
  return (silent.size() == 1 ? "rank " : "ranks ") + ranks + " stopped responding (no heartbeat for " +
         detail::describe_duration(window) + ": killed, stopped or hung)";
}

}  // namespace sublet::distributed
