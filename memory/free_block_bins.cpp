#include "memory/free_block_bins.h"

#include <algorithm>

namespace sublet::memory {
FreeBlockBins::StreamBins& FreeBlockBins::add_stream(StreamHandle stream) {
  // A stream's first free block: rare (its first segment), so the heap allocation is fine here.
  std::unique_ptr<StreamBins>& slot = streams_[stream];
  if (!slot) slot = std::make_unique<StreamBins>(stream);
  return *(recent_ = slot.get());
}

std::vector<const FreeBlockBins::StreamBins*> FreeBlockBins::streams_in_order() const {
  std::vector<const StreamBins*> order;
  order.reserve(streams_.size());
  for (const auto& [handle, bins] : streams_) order.push_back(bins.get());
  std::sort(order.begin(), order.end(), [](const StreamBins* a, const StreamBins* b) {
    return reinterpret_cast<std::uintptr_t>(a->stream) < reinterpret_cast<std::uintptr_t>(b->stream);
  });
  return order;
}

void FreeBlockBins::insert_into_tree(Bin& b, Block& block) {
  if (b.lone) {  // the second block: both go into the tree
    b.tree.insert(*b.lone);
    b.lone = nullptr;
  }
  b.tree.insert(block);
}

void FreeBlockBins::erase_from_tree(StreamBins& s, Bin& b, Block& block) {
  b.tree.erase(b.tree.iterator_to(block));
  if (b.tree.empty()) s.unmark(block.free_bin);
}

Block* FreeBlockBins::first_fit_in_tree(Bin& b, std::size_t bytes) {
  // By size alone: the first block of the smallest fitting size, which has the lowest address.
  auto it = b.tree.lower_bound(bytes, SizeOnlyOrder{});
  return it == b.tree.end() ? nullptr : &*it;
}

}  // namespace sublet::memory
