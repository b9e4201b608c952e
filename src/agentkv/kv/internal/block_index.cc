// Invariant: an entry homed at chunk h and stored in chunk s adds one to the overflow count of
// every chunk from h up to, not including, s (cyclically), unless that count is saturated. So
// every entry is reachable from its home chunk without passing a chunk whose count is zero.
#include "agentkv/kv/internal/block_index.h"

#include <algorithm>

namespace agentkv::kv::internal {

BlockIndex::BlockIndex(int64_t max_entries) : max_entries_(max_entries) {
  AGENTKV_CHECK_GE(max_entries, 0);
  AGENTKV_CHECK(max_entries < (int64_t{1} << 31));
  // At most kMaxMeanChunkLoad entries per chunk on average (half full) keeps overflow rare and
  // at least one slot free, so an insert always finds room. A power-of-two count makes the home
  // chunk a shift and wrap-around a mask.
  int bits = 0;
  while ((int64_t{1} << bits) * kMaxMeanChunkLoad < max_entries) ++bits;
  AGENTKV_CHECK(bits <= 32);
  chunks_.assign(size_t{1} << bits, Chunk{});
  shift_ = 32 - bits;
  mask_ = chunks_.size() - 1;
}

void BlockIndex::Insert(uint64_t key, int32_t id) {
  AGENTKV_CHECK_LT(size_, max_entries_);
  AGENTKV_DCHECK(id >= 0);
  size_t c = Home(key);
  while (chunks_[c].Full()) {
    if (chunks_[c].overflow != kOverflowSaturated) ++chunks_[c].overflow;
    c = Next(c);
  }
  Chunk& chunk = chunks_[c];
  const int slot = std::countr_one(chunk.occupied);
  chunk.tags[slot] = Tag(key);
  chunk.ids[slot] = static_cast<uint32_t>(id);
  chunk.occupied = static_cast<uint16_t>(chunk.occupied | (1u << slot));
  ++size_;
}

void BlockIndex::Erase(uint64_t key, int32_t id) {
  const uint16_t tag = Tag(key);
  const uint32_t want = static_cast<uint32_t>(id);
  const size_t home = Home(key);
  size_t c = home;
  for (size_t probed = 0;; ++probed) {
    AGENTKV_CHECK(probed < chunks_.size()) << "BlockIndex::Erase of an absent block " << id;
    Chunk& chunk = chunks_[c];
    uint32_t m = chunk.Matches(tag);
    while (m != 0 && chunk.ids[Chunk::SlotOf(m)] != want) m &= m - 1;
    if (m != 0) {
      const int slot = Chunk::SlotOf(m);
      chunk.tags[slot] = 0;
      chunk.occupied = static_cast<uint16_t>(chunk.occupied & ~(1u << slot));
      break;
    }
    AGENTKV_CHECK(chunk.overflow != 0) << "BlockIndex::Erase of an absent block " << id;
    c = Next(c);
  }
  // The entry no longer overflows the chunks it passed.
  for (size_t p = home; p != c; p = Next(p)) {
    if (chunks_[p].overflow != kOverflowSaturated) --chunks_[p].overflow;
  }
  --size_;
}

void BlockIndex::Clear() {
  std::fill(chunks_.begin(), chunks_.end(), Chunk{});
  size_ = 0;
}

}  // namespace agentkv::kv::internal
