// BlockIndex: the prefix index's key -> block map, an open-addressing hash table.
//
// Sized once for the most blocks the cache can hold (both tiers), so it never rehashes and
// its memory is fixed: 8 bytes per slot, a power of two of at least 1.5 slots per entry, so
// the load factor stays at or below 2/3 (12 to 24 bytes per entry). Each slot keeps the block
// id and the low 32 bits of its key, whose top bits choose the home slot; the owner supplies
// full keys for the final comparison (a `KeyOf` callable), so a probe touches a block only on
// a likely hit. Linear probing with backward-shift deletion: no tombstones, so lookup cost
// never degrades.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_
#define AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_

#include <cstdint>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/base/huge_page_allocator.h"

namespace agentkv::kv::internal {

class BlockIndex {
 public:
  static constexpr int32_t kNone = -1;

  BlockIndex() = default;
  // An empty index for up to `max_entries` entries.
  explicit BlockIndex(int64_t max_entries);

  int64_t size() const { return size_; }
  int64_t slot_count() const { return static_cast<int64_t>(slots_.size()); }
  int64_t MemoryBytes() const { return slot_count() * static_cast<int64_t>(sizeof(Slot)); }

  // The block whose key is `key`, or kNone. `key_of(id)` returns the full key of block `id`.
  template <typename KeyOf>
  int32_t Find(uint64_t key, const KeyOf& key_of) const {
    if (slots_.empty()) return kNone;
    const uint32_t lo = static_cast<uint32_t>(key);
    for (size_t i = Home(lo);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id_plus_one == 0) return kNone;
      if (s.key_lo == lo && key_of(s.id_plus_one - 1) == key) {
        return static_cast<int32_t>(s.id_plus_one - 1);
      }
    }
  }

  // The block whose key is `key` if present; otherwise adds `key` -> `id` and returns kNone.
  // One probe sequence serves both. Precondition: size() < max_entries when absent.
  template <typename KeyOf>
  int32_t FindOrInsert(uint64_t key, int32_t id, const KeyOf& key_of) {
    const uint32_t lo = static_cast<uint32_t>(key);
    size_t i = Home(lo);
    for (;; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id_plus_one == 0) break;
      if (s.key_lo == lo && key_of(s.id_plus_one - 1) == key) {
        return static_cast<int32_t>(s.id_plus_one - 1);
      }
    }
    AGENTKV_CHECK(size_ < max_entries_);
    slots_[i] = Slot{static_cast<uint32_t>(id) + 1, lo};
    ++size_;
    return kNone;
  }

  // Starts loading the home slot of `key` into the cache ahead of a Find, FindOrInsert or
  // Erase of it. A hint: no effect on contents.
  void Prefetch(uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[Home(static_cast<uint32_t>(key))]);
  }

  // The first block in `key`'s probe run whose slot matches the key's low bits (the block
  // Find would compare first), or kNone; no full-key comparison. For prefetching the block
  // ahead of a Find: a likely hit, not a certain one.
  int32_t Candidate(uint64_t key) const {
    if (slots_.empty()) return kNone;
    const uint32_t lo = static_cast<uint32_t>(key);
    for (size_t i = Home(lo);; i = Next(i)) {
      const Slot& s = slots_[i];
      if (s.id_plus_one == 0) return kNone;
      if (s.key_lo == lo) return static_cast<int32_t>(s.id_plus_one - 1);
    }
  }

  // Adds `key` -> `id`. Precondition: `key` is absent and size() < max_entries.
  void Insert(uint64_t key, int32_t id);

  // Removes the entry of block `id` whose key is `key`. Precondition: it is present.
  void Erase(uint64_t key, int32_t id);

  // Removes every entry.
  void Clear();

 private:
  struct Slot {
    uint32_t id_plus_one = 0;  // 0 = empty
    uint32_t key_lo = 0;
  };

  size_t Home(uint32_t key_lo) const { return static_cast<size_t>(key_lo >> shift_); }
  size_t Next(size_t i) const { return (i + 1) & mask_; }

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  int shift_ = 32;   // 32 - log2(slot count)
  size_t mask_ = 0;  // slot count - 1
  int64_t size_ = 0;
  int64_t max_entries_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_BLOCK_INDEX_H_
