// NextUseHeap: the victim order of BlockCache's offline-optimal eviction mode
// (next_use_ranking.h): the evictable device block needed farthest in the future first, the
// deeper block on equal next use (so that a parent never leaves before a child it is needed
// with), then the larger key, for a total, deterministic order. A binary heap with lazy
// deletion: Remove only invalidates the block's entry (a per-block stamp), Top discards invalid
// entries as it meets them, and the heap is rebuilt from the live entries when stale ones
// outnumber them, so each operation is O(log n) amortized. Nodes are arena indices of the
// owner; the heap holds no pointers and moves freely. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_
#define AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::kv::internal {

class NextUseHeap {
 public:
  static constexpr int32_t kNone = -1;

  // Sizes the per-block state for arena indices [0, blocks) and empties the heap.
  void Reset(size_t blocks) {
    entries_.clear();
    stamp_.assign(blocks, 0);
    queued_.assign(blocks, 0);
    depth_.assign(blocks, 0);
    rank_.assign(blocks, 0);
    live_ = 0;
  }

  // The depth of `block` in its chain (0 at the root), recorded when it is committed.
  void SetDepth(int32_t block, int32_t depth) { depth_[Index(block)] = depth; }
  int32_t depth(int32_t block) const { return depth_[Index(block)]; }

  // Queues `block` with `next_use`, replacing its entry if it is queued already.
  void Push(int32_t block, int64_t next_use, uint64_t key) {
    const size_t i = Index(block);
    if (queued_[i] == 0) ++live_;
    queued_[i] = 1;
    ++stamp_[i];
    rank_[i] = next_use;
    entries_.push_back(Entry{next_use, depth_[i], key, block, stamp_[i]});
    std::push_heap(entries_.begin(), entries_.end(), Before);
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

  // The next victim (it stays queued until removed), or kNone when nothing is queued.
  int32_t Top() {
    while (!entries_.empty() && !Live(entries_.front())) {
      std::pop_heap(entries_.begin(), entries_.end(), Before);
      entries_.pop_back();
    }
    return entries_.empty() ? kNone : entries_.front().block;
  }

  bool queued(int32_t block) const { return queued_[Index(block)] != 0; }
  // The next use `block` was last pushed with. Precondition: queued(block).
  int64_t rank(int32_t block) const { return rank_[Index(block)]; }
  int64_t size() const { return live_; }

 private:
  // Stale entries tolerated beyond twice the live ones before a rebuild.
  static constexpr size_t kSlack = 1024;

  struct Entry {
    int64_t next_use;
    int32_t depth;
    uint64_t key;
    int32_t block;
    uint32_t stamp;
  };

  // Heap order: `a` is evicted after `b`.
  static bool Before(const Entry& a, const Entry& b) {
    return std::tie(a.next_use, a.depth, a.key) < std::tie(b.next_use, b.depth, b.key);
  }

  static size_t Index(int32_t block) {
    AGENTKV_DCHECK(block >= 0);
    return static_cast<size_t>(block);
  }

  bool Live(const Entry& e) const {
    const size_t i = Index(e.block);
    return queued_[i] != 0 && stamp_[i] == e.stamp;
  }

  void Compact() {
    std::erase_if(entries_, [this](const Entry& e) { return !Live(e); });
    std::make_heap(entries_.begin(), entries_.end(), Before);
  }

  std::vector<Entry> entries_;
  std::vector<uint32_t> stamp_;
  std::vector<uint8_t> queued_;
  std::vector<int32_t> depth_;
  std::vector<int64_t> rank_;
  int64_t live_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_
