#include "memory/free_block_bins.h"

#include <algorithm>

namespace sublet::memory {
namespace {
std::uintptr_t handle_order(StreamHandle s) { return reinterpret_cast<std::uintptr_t>(s); }
}  // namespace

FreeBlockBins::StreamBins& FreeBlockBins::add_stream(StreamHandle stream) {
  if (StreamBins* s = find(stream)) return *s;
  // A stream's first free block: rare (its first segment), so the heap allocation is fine here.
  auto at = std::find_if(streams_.begin(), streams_.end(),
                         [&](const auto& s) { return handle_order(s->stream) > handle_order(stream); });
  return **streams_.insert(at, std::make_unique<StreamBins>(stream));
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
