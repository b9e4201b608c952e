// GapAwareOrder: BlockCache's gap-aware victim order (KvCacheOptions::eviction_order =
// kGapAware). Within an eviction class and a priority, the evictable device blocks leave by
// effective last use instead of recency (GapOrderHeap): a release ranks a request's committed
// blocks by the time its caller says they count as last used (the finish less the pause its
// session is expected to take), a block several requests use keeps the latest such time, and
// the blocks only an ended session used go first, and are dropped rather than offloaded. With
// every rank equal to the release time it is exactly LRU within a bucket.
//
// One of the victim orders of victim_order.h, whose interface it implements. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_GAP_AWARE_ORDER_H_
#define AGENTKV_KV_INTERNAL_GAP_AWARE_ORDER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/internal/block.h"
#include "agentkv/kv/internal/gap_order_heap.h"
#include "agentkv/kv/internal/priority_lru_queue.h"

namespace agentkv::kv::internal {

class GapAwareOrder {
 public:
  // Sized for arena indices [0, blocks).
  explicit GapAwareOrder(size_t blocks) { heap_.Reset(blocks); }

  void Reset(size_t blocks) { heap_.Reset(blocks); }
  // A fresh slot holds no content yet: first in its bucket.
  void OnSlotTaken(int32_t block) { heap_.ClearLastUse(block); }
  void OnCommitted(int32_t /*block*/, int32_t /*parent*/) {}
  // Each committed block keeps the latest last use any request gave it. Called before the
  // holds drop, so that OnEvictable queues each block with its new rank.
  void OnReleasing(std::span<const int32_t> committed, TimeNs last_use) {
    for (const int32_t b : committed) {
      heap_.set_last_use(b, std::max(heap_.last_use(b), last_use.ns()));
    }
  }
  void OnEvictable(int32_t block, const Block& blk) { heap_.Push(block, blk.queue_bucket()); }
  // The block changed bucket; `front` makes it first in its new bucket (nobody needs it again).
  void OnRequeued(int32_t block, const Block& blk, bool front) {
    if (front) heap_.set_last_use(block, GapOrderHeap::kFirstInBucket);
    heap_.Push(block, blk.queue_bucket());
  }
  void OnUnevictable(int32_t block) { heap_.Remove(block); }
  // The session that used the cached block `tip` ended. Walking up from `tip`, each block that
  // no request holds and whose every cached child is unneeded (or is the block just walked
  // from) becomes unneeded: first in its device bucket, or at the front of the host queue (the
  // host tier orders by recency), until a later release ranks it again. The first other block
  // ends the walk: it and its ancestors still serve a live path.
  void OnSessionEnded(int32_t tip, std::span<Block> blocks, PriorityLruQueue<Block>& host_queue);

  // The evictable device block of the lowest bucket with the earliest effective last use.
  int32_t Victim(PriorityLruQueue<Block>& /*device_queue*/, std::span<const Block> /*blocks*/) {
    return heap_.Top();
  }
  // Whether nobody needs `block` again (an eviction drops it instead of offloading it).
  bool Unneeded(int32_t block) const { return heap_.last_use(block) == GapOrderHeap::kUnneeded; }
  int64_t MemoryBytes() const { return heap_.MemoryBytes(); }
  // Internal unless the heap queues exactly the blocks `in_device_queue` marks (value 1), each in
  // its current bucket, and as many as the device queue holds.
  Status CheckQueued(std::span<const Block> blocks, std::span<const int8_t> in_device_queue,
                     int64_t device_queue_size) const;

  // The effective last use of `block` (GapOrderHeap::kFirstInBucket for a fresh slot).
  int64_t last_use(int32_t block) const { return heap_.last_use(block); }

 private:
  GapOrderHeap heap_;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_GAP_AWARE_ORDER_H_
