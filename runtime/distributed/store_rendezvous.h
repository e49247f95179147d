#pragma once
// The rendezvous of a data-parallel group over any Store: every rank announces itself and waits
// for all (a rank that never comes is named), and barriers for setup and teardown. Keys live
// under "sublet/" (a torchrun agent store is shared with the agent's own keys).
#include <chrono>
#include <cstdint>

#include "runtime/distributed/store.h"

namespace sublet::distributed {

void announce_rank(Store& store, int rank);
// DistributedError naming the ranks that did not announce themselves within the timeout.
void wait_for_ranks(Store& store, int world_size, std::chrono::milliseconds timeout);
// Returns once `world_size` ranks have entered the `index`-th barrier (every rank counts its
// barriers the same way). Each barrier leaves two small keys behind.
void store_barrier(Store& store, int world_size, std::int64_t index, std::chrono::milliseconds timeout);

}  // namespace sublet::distributed
