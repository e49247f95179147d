#pragma once
// A pool (small or large, shared or private to a graph capture) and an expandable segment: the
// allocator's bookkeeping around blocks, kept apart from block.h so that the free-block bins can
// include the Block they index.
#include <cstddef>
#include <cstdint>

#include "memory/block.h"
#include "memory/free_block_bins.h"

namespace sublet::memory {

struct BlockPool {
  explicit BlockPool(bool small, std::uint64_t private_id = 0) : is_small(small), private_pool_id(private_id) {}
  const bool is_small;
  // Non-zero for a private pool (CUDA graph capture): its memory is never handed to other
  // requests and is only given back once the pool is released.
  const std::uint64_t private_pool_id;
  bool released = false;
  FreeBlockBins free_blocks;
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
