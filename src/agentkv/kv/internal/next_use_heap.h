// NextUseHeap: the victim order of BlockCache's offline-optimal eviction mode
// (next_use_ranking.h): the evictable device block needed farthest in the future first, the
// deeper block on equal next use (so that a parent never leaves before a child it is needed
// with), then the larger key, for a total, deterministic order. A LazyBlockHeap
// (lazy_block_heap.h: O(log n) amortized per operation) plus each block's depth and last rank.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_
#define AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_

#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "agentkv/kv/internal/lazy_block_heap.h"

namespace agentkv::kv::internal {

class NextUseHeap {
 public:
  static constexpr int32_t kNone = -1;

  // Sizes the per-block state for arena indices [0, blocks) and empties the heap.
  void Reset(size_t blocks) {
    heap_.Reset(blocks);
    depth_.assign(blocks, 0);
    rank_.assign(blocks, 0);
  }

  // The depth of `block` in its chain (0 at the root), recorded when it is committed.
  void SetDepth(int32_t block, int32_t depth) { depth_[Heap::Index(block)] = depth; }
  int32_t depth(int32_t block) const { return depth_[Heap::Index(block)]; }

  // Queues `block` with `next_use`, replacing its entry if it is queued already.
  void Push(int32_t block, int64_t next_use, uint64_t key) {
    const size_t i = Heap::Index(block);
    rank_[i] = next_use;
    heap_.Push(block, Order{next_use, depth_[i], key});
  }

  // Unqueues `block`; a no-op when it is not queued.
  void Remove(int32_t block) { heap_.Remove(block); }

  // The next victim (it stays queued until removed), or kNone when nothing is queued.
  int32_t Top() { return heap_.Top(); }

  bool queued(int32_t block) const { return heap_.queued(block); }
  // The next use `block` was last pushed with. Precondition: queued(block).
  int64_t rank(int32_t block) const { return rank_[Heap::Index(block)]; }
  int64_t size() const { return heap_.size(); }

 private:
  // Evicted first: the farthest next use, then the deeper block, then the larger key.
  using Order = std::tuple<int64_t, int32_t, uint64_t>;
  using Heap = LazyBlockHeap<Order, std::less<Order>>;

  Heap heap_;
  std::vector<int32_t> depth_;
  std::vector<int64_t> rank_;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_NEXT_USE_HEAP_H_
