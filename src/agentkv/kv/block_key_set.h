// BlockKeySet: a set of block keys over a FlatKeyTable (flat_key_table.h) of 8-byte slots: about
// 16 bytes a key where std::unordered_set takes about 40 and an allocation each. Used for a
// session's member keys (SessionTable) and the simulator's record of lost keys. Thread-compatible.
#ifndef AGENTKV_KV_BLOCK_KEY_SET_H_
#define AGENTKV_KV_BLOCK_KEY_SET_H_

#include <cstddef>
#include <cstdint>

#include "agentkv/kv/block_key.h"
#include "agentkv/kv/flat_key_table.h"

namespace agentkv::kv {

class BlockKeySet {
 public:
  // Adds `key`; false when it was in already.
  bool insert(BlockKey key) {
    if (key.value() == 0) {
      const bool added = !has_zero_;
      has_zero_ = true;
      return added;
    }
    return table_.FindOrInsert(key.value()).second;
  }
  // Removes `key`; false when it was not in.
  bool erase(BlockKey key) {
    if (key.value() == 0) {
      const bool had = has_zero_;
      has_zero_ = false;
      return had;
    }
    Slot* slot = table_.Find(key.value());
    if (slot == nullptr) return false;
    table_.Erase(slot);
    return true;
  }
  bool contains(BlockKey key) const {
    if (key.value() == 0) return has_zero_;
    return table_.Find(key.value()) != nullptr;
  }
  size_t size() const { return table_.size() + (has_zero_ ? 1 : 0); }

 private:
  struct Slot {
    uint64_t key = 0;
  };
  FlatKeyTable<Slot> table_;
  // The key 0 marks an empty slot, so it is kept apart.
  bool has_zero_ = false;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_BLOCK_KEY_SET_H_
