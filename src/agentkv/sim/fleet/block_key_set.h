// BlockKeySet: a set of block keys, open addressing with linear probing over a power of two of
// 8-byte slots kept at most half full: about 16 bytes a key where std::unordered_set takes about
// 40 and an allocation each. Keys are chained hashes already, so a multiply spreads them.
// Insert-only (the simulator's record of keys ever lost never forgets one). Thread-compatible.
#ifndef AGENTKV_SIM_FLEET_BLOCK_KEY_SET_H_
#define AGENTKV_SIM_FLEET_BLOCK_KEY_SET_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "agentkv/kv/block_key.h"

namespace agentkv::sim {

class BlockKeySet {
 public:
  // Adds `key`; false when it was in already.
  bool insert(kv::BlockKey key) {
    if (key.value() == 0) {
      const bool added = !has_zero_;
      has_zero_ = true;
      return added;
    }
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key.value(), mask);; i = (i + 1) & mask) {
      if (slots_[i] == key.value()) return false;
      if (slots_[i] == 0) {
        slots_[i] = key.value();
        ++size_;
        return true;
      }
    }
  }
  bool contains(kv::BlockKey key) const {
    if (key.value() == 0) return has_zero_;
    if (slots_.empty()) return false;
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(key.value(), mask);; i = (i + 1) & mask) {
      if (slots_[i] == key.value()) return true;
      if (slots_[i] == 0) return false;
    }
  }
  size_t size() const { return size_ + (has_zero_ ? 1 : 0); }

 private:
  static size_t Home(uint64_t key, size_t mask) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
  }
  void Grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, 0);
    const size_t mask = slots_.size() - 1;
    for (const uint64_t key : old) {
      if (key == 0) continue;
      size_t i = Home(key, mask);
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = key;
    }
  }

  // 0 marks an empty slot; the key 0 is kept apart.
  std::vector<uint64_t> slots_;
  size_t size_ = 0;
  bool has_zero_ = false;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_BLOCK_KEY_SET_H_
