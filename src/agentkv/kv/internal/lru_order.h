// LruOrder: BlockCache's default victim order (KvCacheOptions::eviction_order = kLru): the
// device eviction queue's own order, lowest eviction class and priority first and, within a
// bucket, the least recently used (PriorityLruQueue). It keeps no state of its own: the device
// queue, which BlockCache maintains in every order, is the order. Every event of the victim
// order interface (victim_order.h) is a no-op here. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_LRU_ORDER_H_
#define AGENTKV_KV_INTERNAL_LRU_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/internal/block.h"
#include "agentkv/kv/internal/priority_lru_queue.h"

namespace agentkv::kv::internal {

class LruOrder {
 public:
  void Reset(size_t /*blocks*/) {}
  void OnSlotTaken(int32_t /*block*/) {}
  void OnCommitted(int32_t /*block*/, int32_t /*parent*/) {}
  void OnReleasing(std::span<const int32_t> /*committed*/, TimeNs /*last_use*/) {}
  void OnEvictable(int32_t /*block*/, const Block& /*blk*/) {}
  void OnRequeued(int32_t /*block*/, const Block& /*blk*/, bool /*front*/) {}
  void OnUnevictable(int32_t /*block*/) {}
  void OnSessionEnded(int32_t /*tip*/, std::span<Block> /*blocks*/,
                      PriorityLruQueue<Block>& /*host_queue*/) {}

  // The device queue's next victim: the least recently used block of its lowest bucket.
  int32_t Victim(PriorityLruQueue<Block>& device_queue, std::span<const Block> blocks) {
    return device_queue.Peek(blocks);
  }
  bool Unneeded(int32_t /*block*/) const { return false; }
  int64_t MemoryBytes() const { return 0; }
  Status CheckQueued(std::span<const Block> /*blocks*/, std::span<const int8_t> /*in_device_queue*/,
                     int64_t /*device_queue_size*/) const {
    return Status::Ok();
  }
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_LRU_ORDER_H_
