// Invariant: every entry is reachable from its home slot by probing forward without passing
// an empty slot (the linear-probing invariant that backward-shift deletion preserves).
#include "agentkv/kv/internal/block_index.h"

#include <algorithm>

namespace agentkv::kv::internal {

BlockIndex::BlockIndex(int64_t max_entries) : max_entries_(max_entries) {
  AGENTKV_CHECK_GE(max_entries, 0);
  AGENTKV_CHECK(max_entries < (int64_t{1} << 31));
  // A load factor of at most 2/3 keeps probe runs short (a miss probes about 5 slots at
  // worst, within one cache line) and at least one slot empty, so probing terminates. A
  // power-of-two size makes the home slot a shift and wrap-around a mask.
  int bits = 3;
  while ((int64_t{1} << bits) < max_entries + max_entries / 2 + 1) ++bits;
  AGENTKV_CHECK(bits <= 32);
  slots_.assign(size_t{1} << bits, Slot{});
  shift_ = 32 - bits;
  mask_ = slots_.size() - 1;
}

void BlockIndex::Insert(uint64_t key, int32_t id) {
  AGENTKV_CHECK_LT(size_, max_entries_);
  AGENTKV_DCHECK(id >= 0);
  const uint32_t lo = static_cast<uint32_t>(key);
  size_t i = Home(lo);
  while (slots_[i].id_plus_one != 0) i = Next(i);
  slots_[i] = Slot{static_cast<uint32_t>(id) + 1, lo};
  ++size_;
}

void BlockIndex::Erase(uint64_t key, int32_t id) {
  const uint32_t lo = static_cast<uint32_t>(key);
  const uint32_t want = static_cast<uint32_t>(id) + 1;
  size_t hole = Home(lo);
  while (slots_[hole].id_plus_one != want) {
    AGENTKV_CHECK(slots_[hole].id_plus_one != 0) << "BlockIndex::Erase of an absent block " << id;
    hole = Next(hole);
  }
  // Backward shift: move later entries of the probe run into the hole when the hole lies
  // cyclically within [their home, their slot).
  size_t j = hole;
  while (true) {
    j = Next(j);
    const Slot s = slots_[j];
    if (s.id_plus_one == 0) break;
    const size_t home = Home(s.key_lo);
    if (((hole - home) & mask_) < ((j - home) & mask_)) {
      slots_[hole] = s;
      hole = j;
    }
  }
  slots_[hole] = Slot{};
  --size_;
}

void BlockIndex::Clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

}  // namespace agentkv::kv::internal
