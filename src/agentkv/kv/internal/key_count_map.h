// KeyCountMap: a positive count per block key (BlockCache's key references) over a FlatKeyTable
// (flat_key_table.h) of 16-byte slots; a key whose count falls to 0 leaves the table. The key 0
// (which marks an empty slot) is kept apart. Internal to the kv module.
//
// Deterministic: the same calls leave the same slots, so ForEach visits in the same order.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_KEY_COUNT_MAP_H_
#define AGENTKV_KV_INTERNAL_KEY_COUNT_MAP_H_

#include <cstddef>
#include <cstdint>

#include "agentkv/base/check.h"
#include "agentkv/kv/flat_key_table.h"

namespace agentkv::kv::internal {

class KeyCountMap {
 public:
  // The count of `key`; 0 when absent.
  int32_t count(uint64_t key) const {
    if (key == 0) return zero_count_;
    const Slot* slot = table_.Find(key);
    return slot == nullptr ? 0 : slot->count;
  }
  bool contains(uint64_t key) const { return count(key) != 0; }

  // Adds one to the count of `key` (an absent key enters at 1); returns the new count.
  int32_t Increment(uint64_t key) {
    if (key == 0) return ++zero_count_;
    return ++table_.FindOrInsert(key).first->count;
  }

  // Subtracts one from the count of `key`, which leaves at 0; returns the new count.
  // Precondition (checked): count(key) > 0.
  int32_t Decrement(uint64_t key) {
    if (key == 0) {
      AGENTKV_CHECK(zero_count_ > 0) << "KeyCountMap: decrement of an absent key";
      return --zero_count_;
    }
    Slot* slot = table_.Find(key);
    AGENTKV_CHECK(slot != nullptr) << "KeyCountMap: decrement of an absent key";
    const int32_t left = --slot->count;
    if (left == 0) table_.Erase(slot);
    return left;
  }

  // The number of keys with a count.
  size_t size() const { return table_.size() + (zero_count_ > 0 ? 1 : 0); }
  bool empty() const { return size() == 0; }

  // Calls fn(key, count) for every key, the key 0 first, then in slot order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    if (zero_count_ > 0) fn(uint64_t{0}, zero_count_);
    table_.ForEach([&fn](const Slot& slot) { fn(slot.key, slot.count); });
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t count = 0;
  };
  FlatKeyTable<Slot> table_;
  int32_t zero_count_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_KEY_COUNT_MAP_H_
