#include "runtime/distributed/store_rendezvous.h"

#include <string>

#include "core/errors.h"
#include "runtime/distributed/store_socket.h"

namespace sublet::distributed {
namespace {

// "a, b, c and 7 more": error messages stay readable for a thousand missing keys.
std::string list_some(const std::vector<std::string>& items, std::size_t shown = 10) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > shown) text += " and " + std::to_string(items.size() - shown) + " more";
  return text;
}

std::string rank_key(int rank) { return "sublet/rank/" + std::to_string(rank); }

}  // namespace

void announce_rank(Store& store, int rank) { store.set(rank_key(rank), "joined"); }

void wait_for_ranks(Store& store, int world_size, std::chrono::milliseconds timeout) {
  if (world_size < 1) throw ValueError("store: wait_for_ranks needs world_size >= 1, got " + std::to_string(world_size));
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(rank_key(r));
  const auto missing = store.wait_for_keys(keys, timeout);
  if (missing.empty()) return;
  std::vector<std::string> ranks;
  for (const auto& key : missing) ranks.push_back(key.substr(rank_key(0).size() - 1));
  throw DistributedError("rendezvous: " + std::to_string(missing.size()) + " of " + std::to_string(world_size) +
                         " ranks did not join within " + detail::describe_duration(timeout) + ": rank" +
                         (ranks.size() > 1 ? "s " : " ") + list_some(ranks, 20) + " (" + store.describe() +
                         "); did those workers start, and can they reach MASTER_ADDR:MASTER_PORT?");
}

void store_barrier(Store& store, int world_size, std::int64_t index, std::chrono::milliseconds timeout) {
  if (world_size < 1) throw ValueError("store: barrier needs world_size >= 1, got " + std::to_string(world_size));
  const std::string prefix = "sublet/barrier/" + std::to_string(index);
  const std::int64_t arrived = store.add(prefix + "/arrived", 1);
  if (arrived > world_size) {
    throw DistributedError("store: " + std::to_string(arrived) + " ranks entered barrier " + prefix + " of a world of " +
                           std::to_string(world_size) + " (ranks disagree on WORLD_SIZE or on the barriers they call)");
  }
  if (arrived == world_size) store.set(prefix + "/done", "");
  if (store.wait_for_keys({prefix + "/done"}, timeout).empty()) return;
  const std::int64_t count = store.add(prefix + "/arrived", 0);
  throw DistributedError("store: barrier " + prefix + " timed out after " + detail::describe_duration(timeout) + ": " +
                         std::to_string(count) + " of " + std::to_string(world_size) + " ranks arrived");
}

}  // namespace sublet::distributed
