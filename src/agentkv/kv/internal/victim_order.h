// VictimOrder: which evictable device block BlockCache evicts next, as one of three small order
// classes chosen once, when the cache is built (KvCacheOptions::eviction_order) or, for the
// offline-optimal order, when a next-use ranking is set on the empty cache:
//   LruOrder      (lru_order.h)        lowest eviction class and priority, then least recent;
//   GapAwareOrder (gap_aware_order.h)  the same buckets, then earliest effective last use;
//   NextUseOrder  (next_use_order.h)   Belady's MIN by the caller's ranking.
// BlockCache keeps its device eviction queue (PriorityLruQueue) in every order: it counts the
// evictable blocks and is LruOrder's order. It tells its order of each event below and asks it
// for victims through std::visit, so no call site tests which order it runs. Each order
// implements every call (a no-op where the event does not concern it):
//   Reset(blocks)                      empties the order, sized for arena indices [0, blocks);
//   OnSlotTaken(b)                     slot b left the free list (fresh content);
//   OnCommitted(b, parent)             b entered the prefix index on the device under parent
//                                      (-1 at a chain's root);
//   OnReleasing(committed, last_use)   a request ends: its committed blocks count as last used
//                                      at last_use (called before their holds drop, and not
//                                      for a request that ends its session);
//   OnEvictable(b, blk)                b joined the device queue (its last hold dropped);
//   OnRequeued(b, blk, front)          the evictable b changed bucket and was re-queued, at
//                                      the front of its bucket when `front`;
//   OnUnevictable(b)                   b left the device queue (held, offloaded or dropped);
//   OnSessionEnded(tip, blocks, host)  the session that used the cached block tip ended;
//   Victim(device_queue, blocks)       the next victim among the queued blocks, or -1 when
//                                      none; it stays queued until evicted;
//   Unneeded(b)                        whether evicting b drops it instead of offloading it;
//   MemoryBytes()                      bytes of per-block state the order allocates;
//   CheckQueued(blocks, in_queue, n)   Internal unless the order agrees with the device queue.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_VICTIM_ORDER_H_
#define AGENTKV_KV_INTERNAL_VICTIM_ORDER_H_

#include <cstddef>
#include <variant>

#include "agentkv/kv/internal/gap_aware_order.h"
#include "agentkv/kv/internal/lru_order.h"
#include "agentkv/kv/internal/next_use_order.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/next_use_ranking.h"

namespace agentkv::kv::internal {

using VictimOrder = std::variant<LruOrder, GapAwareOrder, NextUseOrder>;

// The order of a cache of `blocks` arena slots: NextUseOrder when `ranking` is set, else the one
// `order` names.
inline VictimOrder MakeVictimOrder(EvictionOrder order, const NextUseRanking* ranking,
                                   size_t blocks) {
  if (ranking != nullptr) return NextUseOrder(ranking, blocks);
  if (order == EvictionOrder::kGapAware) return GapAwareOrder(blocks);
  return LruOrder();
}

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_VICTIM_ORDER_H_
