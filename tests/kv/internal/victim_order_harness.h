// A small arena that drives a victim order (victim_order.h) as BlockCache does: blocks are
// committed held, join the device queue and the order when released, leave both when held
// again or evicted. For the order tests under tests/kv/internal/.
#ifndef AGENTKV_TESTS_KV_INTERNAL_VICTIM_ORDER_HARNESS_H_
#define AGENTKV_TESTS_KV_INTERNAL_VICTIM_ORDER_HARNESS_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/kv/internal/block.h"
#include "agentkv/kv/internal/priority_lru_queue.h"
#include "agentkv/kv/internal/victim_order.h"

namespace agentkv::kv::internal {

template <typename Order>
class VictimOrderHarness {
 public:
  static constexpr int32_t kNone = -1;

  VictimOrderHarness(Order order, int32_t blocks)
      : order_(std::move(order)), blocks_(static_cast<size_t>(blocks)) {}

  Order& order() { return order_; }
  Block& block(int32_t b) { return blocks_[static_cast<size_t>(b)]; }
  std::span<Block> blocks() { return blocks_; }
  PriorityLruQueue<Block>& host_queue() { return host_queue_; }

  // Commits `b` on the device under `parent` (kNone at a root), held once, keyed 1000 + b.
  void Commit(int32_t b, int32_t parent = kNone) {
    order_.OnSlotTaken(b);
    Block& blk = block(b);
    blk = Block{};
    blk.key = 1000 + static_cast<uint64_t>(b);
    blk.state = BlockState::kDevice;
    blk.parent = parent;
    blk.ref_count = 1;
    if (parent != kNone) {
      blk.next_sibling = block(parent).first_child;
      block(parent).first_child = b;
    }
    order_.OnCommitted(b, parent);
  }
  // Ends the requests holding `chain` (root first) at `last_use`: the order ranks the chain,
  // then the blocks become evictable deepest first, as BlockCache::Release does.
  void Release(std::vector<int32_t> chain, int64_t last_use = 0) {
    order_.OnReleasing(chain, TimeNs(last_use));
    for (size_t i = chain.size(); i-- > 0;) {
      const int32_t b = chain[i];
      if (--block(b).ref_count > 0) continue;
      device_queue_.Push(blocks_, b);
      order_.OnEvictable(b, block(b));
    }
  }
  // A request holds the evictable `b` again.
  void Hold(int32_t b) {
    if (block(b).ref_count++ > 0) return;
    device_queue_.Remove(blocks_, b);
    order_.OnUnevictable(b);
  }
  // Gives the evictable `b` priority `p`, re-queued (first in its bucket when `front`).
  void SetPriority(int32_t b, int p, bool front = false) {
    device_queue_.Remove(blocks_, b);
    block(b).priority = static_cast<uint8_t>(p);
    device_queue_.Push(blocks_, b, front);
    order_.OnRequeued(b, block(b), front);
  }
  // Moves the evictable device block `b` to the host queue.
  void Offload(int32_t b) {
    device_queue_.Remove(blocks_, b);
    order_.OnUnevictable(b);
    block(b).state = BlockState::kHost;
    host_queue_.Push(blocks_, b);
  }
  int32_t Victim() { return order_.Victim(device_queue_, blocks_); }
  // Evicts victims until none is left; returns them in order.
  std::vector<int32_t> Drain() {
    std::vector<int32_t> victims;
    for (int32_t b = Victim(); b != kNone; b = Victim()) {
      victims.push_back(b);
      device_queue_.Remove(blocks_, b);
      order_.OnUnevictable(b);
      block(b).state = BlockState::kFree;
    }
    return victims;
  }
  // The order's own consistency check against the device queue.
  Status Check() const {
    std::vector<int8_t> queued(blocks_.size(), 0);
    for (int p = 0; p < kNumQueueBuckets; ++p) {
      device_queue_.ForEachInBucket(std::span<const Block>(blocks_), p,
                                    [&](int32_t b) { queued[static_cast<size_t>(b)] = 1; });
    }
    return order_.CheckQueued(blocks_, queued, device_queue_.size());
  }
  // Puts `b` in the device queue without telling the order (to break the invariant).
  void PushBehindTheOrdersBack(int32_t b) { device_queue_.Push(blocks_, b); }

 private:
  Order order_;
  std::vector<Block> blocks_;
  PriorityLruQueue<Block> device_queue_{static_cast<int>(BlockState::kDevice)};
  PriorityLruQueue<Block> host_queue_{static_cast<int>(BlockState::kHost)};
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_TESTS_KV_INTERNAL_VICTIM_ORDER_HARNESS_H_
