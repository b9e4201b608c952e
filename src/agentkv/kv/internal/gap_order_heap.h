// GapOrderHeap: the victim order of BlockCache's gap-aware eviction order
// (KvCacheOptions::eviction_order = kGapAware): the evictable device block of the lowest queue
// bucket (eviction class, then priority, as PriorityLruQueue orders them) first and, within a
// bucket, the one with the earliest effective last use, ties by push order (so that with
// effective last use = plain recency the order is exactly LRU within a bucket). The effective
// last use of a block is its owner's (BlockCache's) per-block value: the finish time of the
// requests that used it less the gap expected before their sessions return, combined over
// users by the latest (the soonest-needed user wins); kUnneeded for content nobody needs again
// and kFirstInBucket for content its owner asked to evict first. It persists while the block is
// held and re-queued and is reset (to kFirstInBucket) when the slot is taken from the free list.
//
// A binary min-heap with lazy deletion, as NextUseHeap: Remove only invalidates the block's
// entry (a per-block stamp), Top discards invalid entries, and the heap is rebuilt when stale
// entries outnumber live ones, so each operation is O(log n) amortized. Nodes are arena
// indices of the owner; the heap holds no pointers and moves freely. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_
#define AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::kv::internal {

class GapOrderHeap {
 public:
  static constexpr int32_t kNone = -1;
  // The effective last use of content nobody needs again: first in its bucket, and dropped
  // rather than offloaded when evicted.
  static constexpr int64_t kUnneeded = std::numeric_limits<int64_t>::min();
  // The effective last use of content to evict first (a closed session's, an unpinned one's):
  // after the unneeded, before everything else of its bucket.
  static constexpr int64_t kFirstInBucket = kUnneeded + 1;

  // Sizes the per-block state for arena indices [0, blocks) and empties the heap.
  void Reset(size_t blocks) {
    entries_.clear();
    stamp_.assign(blocks, 0);
    queued_.assign(blocks, 0);
    bucket_.assign(blocks, 0);
    last_use_.assign(blocks, kFirstInBucket);
    live_ = 0;
    sequence_ = 0;
  }
  bool enabled() const { return !stamp_.empty(); }

  // The effective last use of `block` (kFirstInBucket for a fresh slot).
  int64_t last_use(int32_t block) const { return last_use_[Index(block)]; }
  // Sets it; a queued block must be pushed again for the change to take effect.
  void set_last_use(int32_t block, int64_t last_use) { last_use_[Index(block)] = last_use; }
  // Forgets it (the slot was freed).
  void ClearLastUse(int32_t block) { last_use_[Index(block)] = kFirstInBucket; }

  // Queues `block` in `bucket` with its current effective last use, after every entry of equal
  // bucket and last use; replaces its entry if it is queued already.
  void Push(int32_t block, int bucket) {
    const size_t i = Index(block);
    if (queued_[i] == 0) ++live_;
    queued_[i] = 1;
    ++stamp_[i];
    bucket_[i] = bucket;
    entries_.push_back(Entry{bucket, last_use_[i], sequence_++, block, stamp_[i]});
    std::push_heap(entries_.begin(), entries_.end(), After);
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
      std::pop_heap(entries_.begin(), entries_.end(), After);
      entries_.pop_back();
    }
    return entries_.empty() ? kNone : entries_.front().block;
  }

  bool queued(int32_t block) const { return queued_[Index(block)] != 0; }
  // The bucket `block` was last pushed in. Precondition: queued(block).
  int bucket(int32_t block) const { return bucket_[Index(block)]; }
  int64_t size() const { return live_; }
  // Bytes allocated for the per-block state and the entries.
  int64_t MemoryBytes() const {
    return static_cast<int64_t>(entries_.capacity() * sizeof(Entry) +
                                stamp_.capacity() * sizeof(uint32_t) + queued_.capacity() +
                                bucket_.capacity() * sizeof(int) +
                                last_use_.capacity() * sizeof(int64_t));
  }

 private:
  // Stale entries tolerated beyond twice the live ones before a rebuild.
  static constexpr size_t kSlack = 1024;

  struct Entry {
    int bucket;
    int64_t last_use;
    uint64_t sequence;
    int32_t block;
    uint32_t stamp;
  };

  // Heap order (std heaps keep the greatest on top): `a` is evicted after `b`.
  static bool After(const Entry& a, const Entry& b) {
    return std::tie(a.bucket, a.last_use, a.sequence) > std::tie(b.bucket, b.last_use, b.sequence);
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
    std::make_heap(entries_.begin(), entries_.end(), After);
  }

  std::vector<Entry> entries_;
  std::vector<uint32_t> stamp_;
  std::vector<uint8_t> queued_;
  std::vector<int> bucket_;
  std::vector<int64_t> last_use_;
  int64_t live_ = 0;
  uint64_t sequence_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_
