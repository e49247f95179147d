#pragma once
// Recycles Block objects so that splitting on a cache hit allocates nothing on the heap once the
// arena has warmed up. Free Blocks are chained through their `next` field. Private to the caching
// allocator (caching_allocator_impl.h); inline because make() and recycle() are on the hot path.
#include <cstddef>
#include <memory>
#include <vector>

#include "memory/block.h"

namespace sublet::memory {

class BlockArena {
 public:
  Block* make() {
    if (!free_list_) grow();
    Block* b = free_list_;
    free_list_ = b->next;
    b->next = nullptr;
    return b;
  }
  void recycle(Block* b) {
    b->ptr = nullptr;
    b->size = b->requested_size = 0;
    b->stream = nullptr;
    b->pool = nullptr;
    b->prev = nullptr;
    b->allocated = false;
    b->pending_events = 0;
    b->free_stamp = 0;
    b->expandable = nullptr;
    b->category = BlockCategory::Unknown;
    b->annotation = 0;
    b->stream_uses.clear();
    b->next = free_list_;
    free_list_ = b;
  }

 private:
  static constexpr std::size_t kChunk = 256;
  [[gnu::noinline]] void grow() {  // rare: keeps make() small enough to inline
    chunks_.push_back(std::make_unique<Block[]>(kChunk));
    Block* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < kChunk; ++i) {
      chunk[i].next = free_list_;
      free_list_ = &chunk[i];
    }
  }
  std::vector<std::unique_ptr<Block[]>> chunks_;
  Block* free_list_ = nullptr;
};

}  // namespace sublet::memory
