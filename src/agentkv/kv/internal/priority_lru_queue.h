// PriorityLruQueue: eviction order "lower class first, then lower priority, least recently
// used within a priority" in O(1) per operation.
//
// 2 x 101 intrusive doubly linked lists (one per eviction class and priority) over nodes that
// live in the owner's arena, plus a 256-bit non-empty bitmap, so the first non-empty bucket
// is found with a few count-trailing-zeros. A node has int32 `prev` and `next` fields and a
// uint8 `priority`; when it also has `int queue_bucket() const` (class * 101 + priority),
// that is its bucket, which is how the KV cache puts blocks an open session references after
// all others. A queued node's bucket must not change while it is queued: the owner Removes
// it, changes its priority or class, and Pushes it again, which is how every change re-queues
// (never a stale bucket). The owner passes its arena to every call, so the queue holds no
// pointers and moves freely. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_
#define AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_

#include <array>
#include <bit>
#include <cstdint>
#include <span>

#include "agentkv/base/check.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv::internal {

// Eviction classes, evicted in this order.
inline constexpr int kNumEvictionClasses = 2;
inline constexpr int kNumQueueBuckets = kNumEvictionClasses * kNumPriorities;

template <typename Node>
int QueueBucketOf(const Node& n) {
  if constexpr (requires { n.queue_bucket(); }) {
    return n.queue_bucket();
  } else {
    return n.priority;
  }
}

template <typename Node>
class PriorityLruQueue {
 public:
  static constexpr int32_t kNone = -1;

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends `id` at the most recently used end of its bucket, or at the least recently used
  // end (evicted next) when `front`. Precondition: `id` is in no list.
  void Push(std::span<Node> nodes, int32_t id, bool front = false) {
    Node& n = nodes[Index(id)];
    const int p = QueueBucketOf(n);
    AGENTKV_DCHECK(p >= 0 && p < kNumQueueBuckets);
    Bucket& b = buckets_[static_cast<size_t>(p)];
    if (b.head == kNone) {
      n.prev = n.next = kNone;
      b.head = b.tail = id;
      SetBit(p);
    } else if (front) {
      n.prev = kNone;
      n.next = b.head;
      nodes[Index(b.head)].prev = id;
      b.head = id;
    } else {
      n.next = kNone;
      n.prev = b.tail;
      nodes[Index(b.tail)].next = id;
      b.tail = id;
    }
    ++size_;
  }

  // Unlinks `id` from its bucket. Precondition: `id` is queued here.
  void Remove(std::span<Node> nodes, int32_t id) {
    Node& n = nodes[Index(id)];
    const int p = QueueBucketOf(n);
    Bucket& b = buckets_[static_cast<size_t>(p)];
    if (n.prev == kNone) {
      AGENTKV_DCHECK(b.head == id);
      b.head = n.next;
    } else {
      nodes[Index(n.prev)].next = n.next;
    }
    if (n.next == kNone) {
      AGENTKV_DCHECK(b.tail == id);
      b.tail = n.prev;
    } else {
      nodes[Index(n.next)].prev = n.prev;
    }
    n.prev = n.next = kNone;
    if (b.head == kNone) ClearBit(p);
    --size_;
  }

  // The next victim (first non-empty bucket, its least recently used node), or kNone.
  int32_t Peek() const {
    for (size_t w = 0; w < bits_.size(); ++w) {
      if (bits_[w] != 0) {
        return buckets_[w * 64 + static_cast<size_t>(std::countr_zero(bits_[w]))].head;
      }
    }
    return kNone;
  }

  // Visits the nodes of bucket `p` from least to most recently used.
  template <typename Fn>
  void ForEachInBucket(std::span<const Node> nodes, int p, Fn&& fn) const {
    for (int32_t id = buckets_[static_cast<size_t>(p)].head; id != kNone;
         id = nodes[Index(id)].next) {
      fn(id);
    }
  }

  bool BucketBitSet(int p) const { return (bits_[static_cast<size_t>(p / 64)] >> (p % 64)) & 1; }

  void Clear() {
    buckets_.fill(Bucket{});
    bits_.fill(0);
    size_ = 0;
  }

 private:
  struct Bucket {
    int32_t head = kNone;
    int32_t tail = kNone;
  };

  static size_t Index(int32_t id) { return static_cast<size_t>(id); }
  void SetBit(int p) { bits_[static_cast<size_t>(p / 64)] |= uint64_t{1} << (p % 64); }
  void ClearBit(int p) { bits_[static_cast<size_t>(p / 64)] &= ~(uint64_t{1} << (p % 64)); }

  std::array<Bucket, kNumQueueBuckets> buckets_{};
  std::array<uint64_t, (kNumQueueBuckets + 63) / 64> bits_{};
  int64_t size_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_
