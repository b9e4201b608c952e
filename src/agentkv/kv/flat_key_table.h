// FlatKeyTable: the open-addressing table under BlockKeySet (block_key_set.h), the cache's key
// reference counts (internal/key_count_map.h) and the simulator's pending events. Slots of a
// caller's type, each with a `uint64_t key` (0 marks an empty slot, so a table never holds the
// key 0: its users keep that one apart), over a power of two of slots kept at most half full,
// linear probing. Erase moves back the later slots of the probe run (no tombstones), so a table
// under churn stays as fast as a fresh one. The home slot comes from the key times the golden
// ratio (Fibonacci hashing), which spreads hashes and consecutive integers alike. Where a
// node-based std::unordered_map takes an allocation per key and a pointer chase per probe, a
// probe here usually reads one slot.
//
// Deterministic: the same calls leave the same slots, so ForEach visits in the same order.
// Slot pointers stay valid until the next FindOrInsert or Erase; slots are moved, never copied,
// once stored (a slot may own something, as the simulator's event callbacks do).
// Thread-compatible.
#ifndef AGENTKV_KV_FLAT_KEY_TABLE_H_
#define AGENTKV_KV_FLAT_KEY_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::kv {

template <typename Slot>
class FlatKeyTable {
 public:
  // The slot of `key`, or nullptr. Precondition: key != 0.
  const Slot* Find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key, mask);; i = (i + 1) & mask) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == 0) return nullptr;
    }
  }
  Slot* Find(uint64_t key) {
    return const_cast<Slot*>(static_cast<const FlatKeyTable&>(*this).Find(key));
  }

  // The slot of `key`, and whether it was absent: a new slot is Slot{} with its key set.
  // Precondition: key != 0.
  std::pair<Slot*, bool> FindOrInsert(uint64_t key) {
    AGENTKV_DCHECK(key != 0);
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key, mask);; i = (i + 1) & mask) {
      if (slots_[i].key == key) return {&slots_[i], false};
      if (slots_[i].key == 0) {
        slots_[i] = Slot{};
        slots_[i].key = key;
        ++size_;
        return {&slots_[i], true};
      }
    }
  }

  // Removes the occupied `slot` (from Find or FindOrInsert) and moves back each later slot of
  // its probe run whose home does not lie cyclically in (hole, that slot], so every key stays
  // reachable from its home.
  void Erase(Slot* slot) {
    AGENTKV_DCHECK(slot != nullptr && slot->key != 0);
    const size_t mask = slots_.size() - 1;
    size_t hole = static_cast<size_t>(slot - slots_.data());
    for (size_t i = (hole + 1) & mask; slots_[i].key != 0; i = (i + 1) & mask) {
      const size_t home = Home(slots_[i].key, mask);
      const bool reachable = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
      if (reachable) continue;
      slots_[hole] = std::move(slots_[i]);
      hole = i;
    }
    slots_[hole] = Slot{};
    --size_;
  }

  size_t size() const { return size_; }

  // Calls fn(slot) for every occupied slot, in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.key != 0) fn(slot);
    }
  }

 private:
  static size_t Home(uint64_t key, size_t mask) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
  }

  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    const size_t mask = slots_.size() - 1;
    for (Slot& slot : old) {
      if (slot.key == 0) continue;
      size_t i = Home(slot.key, mask);
      while (slots_[i].key != 0) i = (i + 1) & mask;
      slots_[i] = std::move(slot);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_FLAT_KEY_TABLE_H_
