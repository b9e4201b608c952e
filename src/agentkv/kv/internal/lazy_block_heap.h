// LazyBlockHeap: a binary heap of arena blocks with lazy deletion, the mechanism under the
// victim orders of BlockCache's offline-optimal mode (NextUseHeap) and gap-aware order
// (GapOrderHeap). Each queued block has one live entry keyed by `Key`; the top is the block
// whose key is greatest under `Less` (std heap order). Push replaces a block's entry and Remove
// only invalidates it (a per-block stamp); Top discards invalid entries as it meets them, and the
// heap is rebuilt from the live entries when stale ones outnumber them, so each operation is
// O(log n) amortized. Nodes are arena indices of the owner; the heap holds no pointers and moves
// freely. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_LAZY_BLOCK_HEAP_H_
#define AGENTKV_KV_INTERNAL_LAZY_BLOCK_HEAP_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::kv::internal {

template <typename Key, typename Less>
class LazyBlockHeap {
 public:
  static constexpr int32_t kNone = -1;

  // Sizes the per-block state for arena indices [0, blocks) and empties the heap.
  void Reset(size_t blocks) {
    entries_.clear();
    stamp_.assign(blocks, 0);
    queued_.assign(blocks, 0);
    live_ = 0;
  }
  // Whether Reset sized it for at least one block.
  bool sized() const { return !stamp_.empty(); }

  // Queues `block` with `key`, replacing its entry if it is queued already.
  void Push(int32_t block, const Key& key) {
    const size_t i = Index(block);
    if (queued_[i] == 0) ++live_;
    queued_[i] = 1;
    ++stamp_[i];
    entries_.push_back(Entry{key, block, stamp_[i]});
    std::push_heap(entries_.begin(), entries_.end(), Below);
    if (entries_.size() > 2 * static_cast<size_t>(live_) + kSlack) Compact();
  }

  // Unqueues `block`; a no-op when it is not queued.
  void Remove(int32_t block) {
    const size_t i = Index(block);
    if (queued_[i] == 0) return;
    queued_[i] = 0;
    ++stamp_[i];
    --live_;
  }

  // The block of the greatest key (it stays queued until removed), or kNone when nothing is.
  int32_t Top() {
    while (!entries_.empty() && !Live(entries_.front())) {
      std::pop_heap(entries_.begin(), entries_.end(), Below);
      entries_.pop_back();
    }
    return entries_.empty() ? kNone : entries_.front().block;
  }

  bool queued(int32_t block) const { return queued_[Index(block)] != 0; }
  int64_t size() const { return live_; }
  // Bytes allocated for the entries and the per-block state.
  int64_t MemoryBytes() const {
    return static_cast<int64_t>(entries_.capacity() * sizeof(Entry) +
                                stamp_.capacity() * sizeof(uint32_t) + queued_.capacity());
  }

  static size_t Index(int32_t block) {
    AGENTKV_DCHECK(block >= 0);
    return static_cast<size_t>(block);
  }

 private:
  // Stale entries tolerated beyond twice the live ones before a rebuild.
  static constexpr size_t kSlack = 1024;

  struct Entry {
    Key key;
    int32_t block;
    uint32_t stamp;
  };

  static bool Below(const Entry& a, const Entry& b) { return Less{}(a.key, b.key); }

  bool Live(const Entry& e) const {
    const size_t i = Index(e.block);
    return queued_[i] != 0 && stamp_[i] == e.stamp;
  }

  void Compact() {
    std::erase_if(entries_, [this](const Entry& e) { return !Live(e); });
    std::make_heap(entries_.begin(), entries_.end(), Below);
  }

  std::vector<Entry> entries_;
  std::vector<uint32_t> stamp_;
  std::vector<uint8_t> queued_;
  int64_t live_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_LAZY_BLOCK_HEAP_H_
