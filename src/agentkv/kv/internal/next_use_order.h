// NextUseOrder: BlockCache's offline-optimal victim order (BlockCache::SetNextUseRanking,
// next_use_ranking.h): Belady's MIN over the evictable device blocks, by the caller's knowledge
// of the future. The block needed farthest ahead leaves first, the deeper one on ties, then the
// larger key (NextUseHeap); priorities and eviction classes are ignored. A bound for replays that
// know their whole request stream, not a serving policy; it covers a cache without a host tier.
//
// One of the victim orders of victim_order.h, whose interface it implements. The ranking is not
// owned and must outlive the order. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_NEXT_USE_ORDER_H_
#define AGENTKV_KV_INTERNAL_NEXT_USE_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "agentkv/base/check.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/internal/block.h"
#include "agentkv/kv/internal/next_use_heap.h"
#include "agentkv/kv/internal/priority_lru_queue.h"
#include "agentkv/kv/next_use_ranking.h"

namespace agentkv::kv::internal {

class NextUseOrder {
 public:
  // Sized for arena indices [0, blocks). Precondition: `ranking` is not null.
  NextUseOrder(const NextUseRanking* ranking, size_t blocks) : ranking_(ranking) {
    AGENTKV_CHECK(ranking != nullptr);
    heap_.Reset(blocks);
  }

  const NextUseRanking* ranking() const { return ranking_; }

  void Reset(size_t blocks) { heap_.Reset(blocks); }
  void OnSlotTaken(int32_t /*block*/) {}
  // Records the block's depth in its chain (0 at a root), which breaks ties toward the deeper.
  void OnCommitted(int32_t block, int32_t parent) {
    heap_.SetDepth(block, parent < 0 ? 0 : heap_.depth(parent) + 1);
  }
  void OnReleasing(std::span<const int32_t> /*committed*/, TimeNs /*last_use*/) {}
  // Reads the ranking: a block's rank is fixed while it is evictable (unless Refresh re-reads it).
  void OnEvictable(int32_t block, const Block& blk) {
    heap_.Push(block, ranking_->NextUse(BlockKey(blk.key)), blk.key);
  }
  // Priorities and eviction classes do not order victims here.
  void OnRequeued(int32_t /*block*/, const Block& /*blk*/, bool /*front*/) {}
  void OnUnevictable(int32_t block) { heap_.Remove(block); }
  void OnSessionEnded(int32_t /*tip*/, std::span<Block> /*blocks*/,
                      PriorityLruQueue<Block>& /*host_queue*/) {}

  // Re-reads the ranking of `block` when it is evictable (else a no-op), never later than one of
  // its queued children: evicting it would take them along.
  void Refresh(int32_t block, std::span<const Block> blocks);

  // The evictable device block needed farthest ahead, the deeper one on ties.
  int32_t Victim(PriorityLruQueue<Block>& /*device_queue*/, std::span<const Block> /*blocks*/) {
    return heap_.Top();
  }
  bool Unneeded(int32_t /*block*/) const { return false; }
  // Not counted in the metadata: an offline bound, not a serving configuration.
  int64_t MemoryBytes() const { return 0; }
  // Internal unless the heap queues exactly the blocks `in_device_queue` marks (value 1), as many
  // as the device queue holds.
  Status CheckQueued(std::span<const Block> blocks, std::span<const int8_t> in_device_queue,
                     int64_t device_queue_size) const;

 private:
  const NextUseRanking* ranking_;
  NextUseHeap heap_;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_NEXT_USE_ORDER_H_
