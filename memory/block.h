#pragma once
// A Block is one tenant's lease: a contiguous piece of a segment. Blocks of a segment form a
// doubly linked list in address order (prev/next), so freeing one can merge with free
// neighbours. Free blocks sit in their pool's ordered set keyed by (stream, size, address):
// best fit is a lower_bound. The set is intrusive (the hook lives in the Block) so that a cache
// hit allocates nothing on the heap.
#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/backend.h"
#include "memory/device.h"

namespace sublet::memory {

struct BlockPool;
struct ExpandableSegment;

// What a block is used for, as the runtime knows it (set by the layer that asks).
enum class BlockCategory : std::uint8_t {
  Unknown, Parameter, Gradient, Activation, OptimizerState, Workspace, Input, Temporary
};

using FreeSetHook = boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;
using SegmentListHook = boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>>;

struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;             // rounded size this block covers
  std::size_t requested_size = 0;   // what the caller asked for (0 while free)
  StreamHandle stream = nullptr;    // the stream the block was allocated on
  BlockPool* pool = nullptr;
  Block* prev = nullptr;            // neighbours within the segment, address order
  Block* next = nullptr;
  bool allocated = false;           // handed to a caller and not yet freed
  int pending_events = 0;           // stream events still to complete before reuse
  std::uint64_t free_stamp = 0;     // pool lookup count when freed (garbage-collection age)
  ExpandableSegment* expandable = nullptr;  // set when the block lies in an expandable segment
  BlockCategory category = BlockCategory::Unknown;
  std::uint32_t annotation = 0;     // id of the scope that asked (history/profiling); 0 = none
  std::vector<StreamHandle> stream_uses;  // other streams that used it (record_stream)

  FreeSetHook free_hook;            // linked while free and in the pool
  SegmentListHook segment_hook;     // linked on the first block of each segment

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool is_segment_head() const { return prev == nullptr; }
};

// Best fit: order by stream, then size, then address.
struct BlockOrder {
  bool operator()(const Block& a, const Block& b) const {
    if (a.stream != b.stream) return reinterpret_cast<std::uintptr_t>(a.stream) < reinterpret_cast<std::uintptr_t>(b.stream);
    if (a.size != b.size) return a.size < b.size;
    return reinterpret_cast<std::uintptr_t>(a.ptr) < reinterpret_cast<std::uintptr_t>(b.ptr);
  }
};

using FreeBlockSet = boost::intrusive::multiset<
    Block, boost::intrusive::member_hook<Block, FreeSetHook, &Block::free_hook>,
    boost::intrusive::compare<BlockOrder>>;
using SegmentList = boost::intrusive::list<
    Block, boost::intrusive::member_hook<Block, SegmentListHook, &Block::segment_hook>,
    boost::intrusive::constant_time_size<true>>;

struct BlockPool {
  explicit BlockPool(bool small, std::uint64_t private_id = 0) : is_small(small), private_pool_id(private_id) {}
  const bool is_small;
  // Non-zero for a private pool (CUDA graph capture): its memory is never handed to other
  // requests and is only given back once the pool is released.
  const std::uint64_t private_pool_id;
  bool released = false;
  FreeBlockSet free_blocks;
  std::uint64_t lookups = 0;  // get_free_block calls; a free block's age = lookups - free_stamp

  bool reclaimable() const { return private_pool_id == 0 || released; }
};

// An address range reserved once and backed with physical memory from its start as it grows.
// Blocks cover exactly the mapped prefix [base, base + mapped_bytes).
struct ExpandableSegment {
  void* base = nullptr;
  std::size_t reserved_bytes = 0;  // virtual address range
  std::size_t mapped_bytes = 0;    // physically backed prefix
  StreamHandle stream = nullptr;
  BlockPool* pool = nullptr;
  Block* head = nullptr;           // first block (nullptr while nothing is mapped)
};

}  // namespace sublet::memory
