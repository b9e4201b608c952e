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
// A LazyBlockHeap (lazy_block_heap.h, as NextUseHeap: O(log n) amortized per operation) plus
// each block's bucket and effective last use. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_
#define AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include "agentkv/kv/internal/lazy_block_heap.h"

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
    heap_.Reset(blocks);
    bucket_.assign(blocks, 0);
    last_use_.assign(blocks, kFirstInBucket);
    sequence_ = 0;
  }
  bool enabled() const { return heap_.sized(); }

  // The effective last use of `block` (kFirstInBucket for a fresh slot).
  int64_t last_use(int32_t block) const { return last_use_[Heap::Index(block)]; }
  // Sets it; a queued block must be pushed again for the change to take effect.
  void set_last_use(int32_t block, int64_t last_use) { last_use_[Heap::Index(block)] = last_use; }
  // Forgets it (the slot was freed).
  void ClearLastUse(int32_t block) { last_use_[Heap::Index(block)] = kFirstInBucket; }

  // Queues `block` in `bucket` with its current effective last use, after every entry of equal
  // bucket and last use; replaces its entry if it is queued already.
  void Push(int32_t block, int bucket) {
    const size_t i = Heap::Index(block);
    bucket_[i] = bucket;
    heap_.Push(block, Order{bucket, last_use_[i], sequence_++});
  }

  // Unqueues `block`; a no-op when it is not queued.
  void Remove(int32_t block) { heap_.Remove(block); }

  // The next victim (it stays queued until removed), or kNone when nothing is queued.
  int32_t Top() { return heap_.Top(); }

  bool queued(int32_t block) const { return heap_.queued(block); }
  // The bucket `block` was last pushed in. Precondition: queued(block).
  int bucket(int32_t block) const { return bucket_[Heap::Index(block)]; }
  int64_t size() const { return heap_.size(); }
  // Bytes allocated for the per-block state and the entries.
  int64_t MemoryBytes() const {
    return heap_.MemoryBytes() + static_cast<int64_t>(bucket_.capacity() * sizeof(int) +
                                                      last_use_.capacity() * sizeof(int64_t));
  }

 private:
  // Evicted first: the lowest bucket, then the earliest effective last use, then push order.
  using Order = std::tuple<int, int64_t, uint64_t>;
  using Heap = LazyBlockHeap<Order, std::greater<Order>>;

  Heap heap_;
  std::vector<int> bucket_;
  std::vector<int64_t> last_use_;
  uint64_t sequence_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_GAP_ORDER_HEAP_H_
