#pragma once
// A Block is one tenant's lease: a contiguous piece of a segment. Blocks of a segment form a
// doubly linked list in address order (prev/next), so freeing one can merge with free
// neighbours. Free blocks sit in their pool's size bins (free_block_bins.h), searched by best fit
// on (stream, size, address). The bins are intrusive (the hook lives in the Block) so that a
// cache hit allocates nothing on the heap.
#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set_hook.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/backend.h"
#include "core/device.h"

namespace sublet::memory {

struct BlockPool;
struct ExpandableSegment;

// What a block is used for, as the runtime knows it (set by the layer that asks).
enum class BlockCategory : std::uint8_t {
  Unknown, Parameter, Gradient, Activation, OptimizerState, Workspace, Input, Temporary,
  Communication,  // data parallel's gradient buckets (runtime/distributed/data_parallel.h)
  Autocast  // autocast's 16-bit (and float32) cast copies (runtime/autocast.h)
};

// optimize_size: the node's colour shares its parent pointer, so a free bin (free_block_bins.h)
// is 32 bytes and two share a cache line.
using FreeSetHook = boost::intrusive::set_member_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>,
                                                      boost::intrusive::optimize_size<true>>;
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
  bool cached = false;              // in its pool's free bins (free, reusable now)
  std::uint16_t free_bin = 0;       // which bin, while cached
  int pending_events = 0;           // stream events still to complete before reuse
  std::uint64_t free_stamp = 0;     // pool lookup count when freed (garbage-collection age)
  ExpandableSegment* expandable = nullptr;  // set when the block lies in an expandable segment
  BlockCategory category = BlockCategory::Unknown;
  std::uint32_t annotation = 0;     // id of the scope that asked (history/profiling); 0 = none
  std::vector<StreamHandle> stream_uses;  // other streams that used it (record_stream)
  // Free blocks only: events of other streams' uses still pending when the block was freed. The
  // next allocation that takes these bytes makes its stream wait on them first (stream-ordered
  // reuse, caching_allocator_events.cpp).
  std::vector<EventHandle> reuse_after;

  FreeSetHook free_hook;            // linked while in a free bin's tree (free_block_bins.h)
  SegmentListHook segment_hook;     // linked on the first block of each segment

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool is_segment_head() const { return prev == nullptr; }
};

using SegmentList = boost::intrusive::list<
    Block, boost::intrusive::member_hook<Block, SegmentListHook, &Block::segment_hook>,
    boost::intrusive::constant_time_size<true>>;

}  // namespace sublet::memory
