// NextUseRanking: the future a caller knows, as BlockCache's offline-optimal eviction mode
// (Belady's MIN) consults it. A replay that knows its whole request stream ranks every block key
// by when a request will next look it up; a cache given a ranking (BlockCache::
// SetNextUseRanking) evicts, among its evictable device blocks, the one needed farthest in the
// future, the deeper one on ties, so that the cache stays closed under prefixes. Without a ranking
// the cache evicts by priority and LRU as always.
//
// The ranking is the caller's object: the cache keeps a non-owning pointer and reads it whenever
// a block becomes evictable (its last holder releases it). A block's rank must therefore not
// change while it is evictable, unless the caller re-ranks it with BlockCache::RefreshNextUse.
// Implementations must be deterministic and must not call back into the cache.
#ifndef AGENTKV_KV_NEXT_USE_RANKING_H_
#define AGENTKV_KV_NEXT_USE_RANKING_H_

#include <cstdint>
#include <limits>

#include "agentkv/kv/block_key.h"

namespace agentkv::kv {

class NextUseRanking {
 public:
  // The rank of content never needed again: evicted before any block that is.
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  virtual ~NextUseRanking() = default;

  // When the block `key` is next needed, in the caller's order (e.g. the index of the next
  // request whose prompt holds it): a larger value is needed later and evicted sooner; kNever
  // for content that is never needed again.
  virtual int64_t NextUse(BlockKey key) const = 0;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_NEXT_USE_RANKING_H_
