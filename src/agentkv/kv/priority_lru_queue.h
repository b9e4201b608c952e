// PriorityLruQueue: eviction order "lowest priority first, least recently used within a
// priority" in O(1) per operation.
//
// 101 intrusive doubly linked lists (one per priority) over nodes that live in the owner's
// arena (`Node` has int32 `prev`, `next` and uint8 `priority` fields), plus a 128-bit
// non-empty bitmap so the lowest non-empty bucket is found with one count-trailing-zeros.
// A queued node's bucket is its `priority` field: the owner must Remove a node before
// changing its priority and Push it again after, which is how a priority change always
// re-queues (never a stale bucket). The owner passes its arena to every call, so the queue
// holds no pointers and moves freely. Thread-compatible.
#ifndef AGENTKV_KV_PRIORITY_LRU_QUEUE_H_
#define AGENTKV_KV_PRIORITY_LRU_QUEUE_H_

#include <array>
#include <bit>
#include <cstdint>
#include <span>

#include "agentkv/base/check.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

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
    const int p = n.priority;
    AGENTKV_DCHECK(p >= 0 && p < kNumPriorities);
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

  // Unlinks `id` from the bucket of its current priority. Precondition: `id` is queued here.
  void Remove(std::span<Node> nodes, int32_t id) {
    Node& n = nodes[Index(id)];
    const int p = n.priority;
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

  // The next victim (lowest non-empty priority, its least recently used node), or kNone.
  int32_t Peek() const {
    if (bits_[0] != 0) return buckets_[static_cast<size_t>(std::countr_zero(bits_[0]))].head;
    if (bits_[1] != 0) {
      return buckets_[static_cast<size_t>(64 + std::countr_zero(bits_[1]))].head;
    }
    return kNone;
  }

  // Visits the nodes of priority `p` from least to most recently used.
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
    bits_ = {0, 0};
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

  std::array<Bucket, kNumPriorities> buckets_{};
  std::array<uint64_t, 2> bits_{0, 0};
  int64_t size_ = 0;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_PRIORITY_LRU_QUEUE_H_
