#pragma once
// The free blocks of one pool, searched by best fit: the smallest free block of the caller's
// stream whose size is at least the request, the lowest address among blocks of that size. This
// is the order PyTorch's allocator keeps in one ordered set keyed by (stream, size, address);
// walking one tree of random sizes costs a mispredicted branch at nearly every level, which made
// the tree walks most of the allocator's time on random-size workloads.
//
// Here sizes map to size classes (bins) the way TLSF maps them: one bin per 512-byte size below
// 8 KiB, sixteen bins per power of two above. A bitmap marks the bins that hold blocks, so the
// first non-empty bin at or above a request's bin is two bit scans. A bin spans at most 1/16 of a
// power of two, so it usually holds one block or none: a lone block is held by pointer (O(1) in
// and out); from the second on, the bin's blocks go into a tree ordered by (size, address), so
// that many free blocks of one size stay O(log n). Either way the block chosen is exactly the one
// the single ordered set chose.
#include <array>
#include <boost/intrusive/set.hpp>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "memory/block.h"

namespace sublet::memory {

class FreeBlockBins {
 public:
  static constexpr unsigned kSubBinBits = 4;                 // 16 bins per power of two
  static constexpr std::size_t kUnitShift = 9;               // sizes are counted in 512-byte units
  static constexpr std::size_t kNumBins = 49 << kSubBinBits;  // sizes up to 2^60 bytes
  static constexpr std::size_t kNumWords = (kNumBins + 63) / 64;

  // The bin of a block or request of `bytes`; bins grow with size (never smaller for more bytes).
  static std::size_t bin_of(std::size_t bytes) {
    const std::size_t units = bytes >> kUnitShift;
    if (units < (std::size_t{1} << kSubBinBits)) return units;
    const unsigned top = static_cast<unsigned>(std::bit_width(units)) - 1;  // >= kSubBinBits
    const std::size_t sub = (units >> (top - kSubBinBits)) & ((std::size_t{1} << kSubBinBits) - 1);
    return ((top - kSubBinBits + 1) << kSubBinBits) | sub;
  }

  // Inline: the lone-block paths are the hot path of every allocate and free.
  void insert(Block& block) {
    StreamBins& s = find_or_add(block.stream);
    const std::size_t bin = bin_of(block.size);
    Bin& b = s.bin_for_insert(bin);
    block.free_bin = static_cast<std::uint16_t>(bin);
    block.cached = true;
    ++count_;
    if (!b.empty()) return insert_into_tree(b, block);
    b.lone = &block;
    s.mark(bin);
  }
  void erase(Block& block) { remove(*find(block.stream), block); }
  // Best fit as above, taken out of the bins; nullptr when no free block of `stream` is large
  // enough or `accept` refuses the best one (which then stays).
  template <typename Accept>
  Block* take_best_fit(StreamHandle stream, std::size_t bytes, Accept&& accept) {
    StreamBins* s = find(stream);
    if (!s) return nullptr;
    Block* b = best_fit(*s, bytes);
    if (!b || !accept(*b)) return nullptr;
    remove(*s, *b);
    return b;
  }

  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

  // Every free block, in no particular order (sums and maxima need none). `f` must not insert or erase.
  template <typename F>
  void for_each_unordered(F&& f) const {
    for (const auto& [handle, s] : streams_)
      for (std::size_t bin = s->first_bin_from(0); bin < kNumBins; bin = s->first_bin_from(bin + 1))
        if (const Block* lone = s->bin(bin).lone) f(*lone);
        else for (const Block& b : s->bin(bin).tree) f(b);
  }

  // Every free block in (stream, size, address) order. `f` must not insert or erase.
  template <typename F>
  void for_each(F&& f) { visit(*this, f); }
  template <typename F>
  void for_each(F&& f) const { visit(*this, f); }

 private:
  // Within a bin: size, then address.
  struct SizeAddressOrder {
    bool operator()(const Block& a, const Block& b) const {
      if (a.size != b.size) return a.size < b.size;
      return reinterpret_cast<std::uintptr_t>(a.ptr) < reinterpret_cast<std::uintptr_t>(b.ptr);
    }
  };
  struct SizeOnlyOrder {
    bool operator()(const Block& b, std::size_t bytes) const { return b.size < bytes; }
    bool operator()(std::size_t bytes, const Block& b) const { return bytes < b.size; }
  };
  using BinTree = boost::intrusive::multiset<
      Block, boost::intrusive::member_hook<Block, FreeSetHook, &Block::free_hook>,
      boost::intrusive::compare<SizeAddressOrder>, boost::intrusive::constant_time_size<false>>;

  // A lone block, or a tree once two or more have met (until the bin empties again).
  struct Bin {
    Block* lone = nullptr;
    BinTree tree;
    bool empty() const { return lone == nullptr && tree.empty(); }
    Block& smallest() { return lone ? *lone : *tree.begin(); }
  };

  // The bins of one bitmap word, allocated when a block first goes there: a stream costs a few
  // pages, not all kNumBins bins (a trace of 10^5 streams would otherwise need gigabytes).
  struct BinPage {
    std::array<Bin, 64> bins;
  };

  // One stream's bins. Streams are usually one or two, but traces may hold 10^5: found by hash.
  struct StreamBins {
    explicit StreamBins(StreamHandle s) : stream(s) {}
    StreamHandle stream;
    std::uint64_t summary = 0;                     // bit w: words[w] != 0
    std::array<std::uint64_t, kNumWords> words{};  // bit b % 64 of word b / 64: bin b non-empty
    std::array<std::unique_ptr<BinPage>, kNumWords> pages;  // pages[w]: bins of word w, once used

    // A bin whose page exists: one that holds or held a block.
    Bin& bin(std::size_t b) const { return pages[b / 64]->bins[b % 64]; }
    Bin& bin_for_insert(std::size_t b) {
      std::unique_ptr<BinPage>& page = pages[b / 64];
      if (!page) page = std::make_unique<BinPage>();
      return page->bins[b % 64];
    }

    // The first non-empty bin >= `bin`, or kNumBins.
    std::size_t first_bin_from(std::size_t bin) const {
      if (bin >= kNumBins) return kNumBins;
      std::size_t word = bin / 64;
      const std::uint64_t here = words[word] & (~std::uint64_t{0} << (bin % 64));
      if (here) return word * 64 + static_cast<std::size_t>(std::countr_zero(here));
      const std::uint64_t later = word + 1 < 64 ? summary & (~std::uint64_t{0} << (word + 1)) : 0;
      if (!later) return kNumBins;
      word = static_cast<std::size_t>(std::countr_zero(later));
      return word * 64 + static_cast<std::size_t>(std::countr_zero(words[word]));
    }
    void mark(std::size_t bin) {
      words[bin / 64] |= std::uint64_t{1} << (bin % 64);
      summary |= std::uint64_t{1} << (bin / 64);
    }
    void unmark(std::size_t bin) {
      words[bin / 64] &= ~(std::uint64_t{1} << (bin % 64));
      if (words[bin / 64] == 0) summary &= ~(std::uint64_t{1} << (bin / 64));
    }
  };
  static_assert(kNumWords <= 64, "the summary word has one bit per bitmap word");

  // The last stream looked up answers first: one load and a compare on the hot path.
  StreamBins* find(StreamHandle stream) const {
    if (recent_ && recent_->stream == stream) return recent_;
    const auto it = streams_.find(stream);
    return it == streams_.end() ? nullptr : (recent_ = it->second.get());
  }
  static Block* best_fit(StreamBins& s, std::size_t bytes) {
    const std::size_t bin = bin_of(bytes);
    // The request's own bin holds sizes on both sides of it: the first that fits, if any.
    if (s.words[bin / 64] & (std::uint64_t{1} << (bin % 64))) {
      Bin& b = s.bin(bin);
      if (!b.lone) {
        if (Block* fit = first_fit_in_tree(b, bytes)) return fit;
      } else if (b.lone->size >= bytes) {
        return b.lone;
      }
    }
    // Every block of a later bin fits; the first non-empty one's smallest is the best.
    const std::size_t next = s.first_bin_from(bin + 1);
    return next == kNumBins ? nullptr : &s.bin(next).smallest();
  }
  void remove(StreamBins& s, Block& block) {
    Bin& b = s.bin(block.free_bin);
    block.cached = false;
    --count_;
    if (b.lone != &block) return erase_from_tree(s, b, block);
    b.lone = nullptr;  // a lone block means the tree is empty: the bin is now empty
    s.unmark(block.free_bin);
  }
  // The rarer paths: bins holding two or more blocks.
  static void insert_into_tree(Bin& b, Block& block);
  static void erase_from_tree(StreamBins& s, Bin& b, Block& block);
  static Block* first_fit_in_tree(Bin& b, std::size_t bytes);
  StreamBins& find_or_add(StreamHandle stream) {
    if (recent_ && recent_->stream == stream) return *recent_;
    return add_stream(stream);
  }
  StreamBins& add_stream(StreamHandle stream);

  // Streams in ascending handle order (sorted here: visits are rare, lookups are not).
  std::vector<const StreamBins*> streams_in_order() const;
  template <typename Self, typename F>
  static void visit(Self& self, F& f) {
    for (const StreamBins* s : self.streams_in_order())
      for (std::size_t bin = s->first_bin_from(0); bin < kNumBins; bin = s->first_bin_from(bin + 1))
        if (s->bin(bin).lone) f(*s->bin(bin).lone);
        else for (auto& b : s->bin(bin).tree) f(b);
  }

  std::unordered_map<StreamHandle, std::unique_ptr<StreamBins>> streams_;
  mutable StreamBins* recent_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace sublet::memory
