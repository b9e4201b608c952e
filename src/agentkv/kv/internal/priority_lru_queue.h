// PriorityLruQueue: eviction order "lower class first, then lower priority, least recently
// used within a priority" in amortized O(1) per operation.
//
// 2 x 101 buckets (one per eviction class and priority), each a ring of node ids in eviction
// order, plus a 256-bit bitmap of the buckets that hold a queued node, so the first one is
// found with a few count-trailing-zeros. A node has a uint32 `queue_pos` field (kNotQueued
// when it is in no queue: a new node must start so) and a uint8 `priority`; when it also has
// `int queue_bucket() const` (class * 101 + priority), that is its bucket, which is how the KV
// cache puts blocks an open session references after all others. A queued node's bucket must
// not change while it is queued: the owner Removes it, changes its priority or class, and
// Pushes it again, which is how every change re-queues. Owners whose nodes move between
// several queues give each queue a tag and their nodes `int queue_tag() const`, the tag of the
// queue a node may be in (for the KV cache, its tier).
//
// Why rings and not linked lists. Victims leave from the head of a bucket one after another;
// in a linked list each victim's successor is known only once the victim itself is loaded,
// so evicting from a large arena waits for one cache miss per victim, in series. In a ring the
// next victims' ids sit side by side, and Peek prefetches the nodes a few places ahead, so
// the misses overlap. Remove is lazy: it marks the node unqueued (queue_pos = kNotQueued) and
// leaves its entry in the ring, where it is skipped as stale (an entry is live exactly when
// its node is queued, in this queue and bucket, at this entry's position). A bit per entry
// says which are live, so skipping stale entries and compacting read no node: with most
// blocks matched again and few evicted (a cache near its working set), the ring fills with
// stale entries and compaction is frequent. A bucket whose ring fills with stale entries is
// compacted in place before it grows, so a ring holds at most about twice its live entries
// (4 bytes and a bit each).
//
// The owner passes its arena to every call, so the queue holds no pointers and moves freely.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_
#define AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv::internal {

// Eviction classes, evicted in this order.
inline constexpr int kNumEvictionClasses = 2;
inline constexpr int kNumQueueBuckets = kNumEvictionClasses * kNumPriorities;

// The `queue_pos` of a node in no queue.
inline constexpr uint32_t kNotQueued = 0xFFFFFFFFu;

template <typename Node>
int QueueBucketOf(const Node& n) {
  if constexpr (requires { n.queue_bucket(); }) {
    return n.queue_bucket();
  } else {
    return n.priority;
  }
}

template <typename Node>
int QueueTagOf(const Node& n) {
  if constexpr (requires { n.queue_tag(); }) {
    return n.queue_tag();
  } else {
    return 0;
  }
}

template <typename Node>
class PriorityLruQueue {
 public:
  static constexpr int32_t kNone = -1;

  // A queue for the nodes whose queue_tag() is `tag`.
  explicit PriorityLruQueue(int tag = 0) : tag_(tag) {}

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Appends `id` at the most recently used end of its bucket, or at the least recently used
  // end (evicted next) when `front`. Precondition: `id` is in no queue (queue_pos is
  // kNotQueued).
  void Push(std::span<Node> nodes, int32_t id, bool front = false) {
    Node& n = nodes[Index(id)];
    AGENTKV_DCHECK(n.queue_pos == kNotQueued);
    const int p = QueueBucketOf(n);
    AGENTKV_DCHECK(p >= 0 && p < kNumQueueBuckets);
    AGENTKV_DCHECK(QueueTagOf(n) == tag_);
    Ring& r = rings_[static_cast<size_t>(p)];
    // Positions wrap around; the one equal to kNotQueued is never handed out.
    if (r.count == r.slots.size() || (front ? r.head - 1 : r.head + r.count) == kNotQueued) {
      MakeRoom(nodes, p);
    }
    uint32_t pos;
    if (front) {
      pos = --r.head;
    } else {
      pos = r.head + r.count;
    }
    r.slots[pos & r.mask] = id;
    r.MarkLive(pos);
    ++r.count;
    n.queue_pos = pos;
    if (r.live++ == 0) SetBit(p);
    ++size_;
  }

  // Pushes `ids` in order at the most recently used end of their buckets: the same as Push of
  // each in turn. Along a run of one bucket the ring's position and counts stay in registers
  // (a chain of releases pushes a whole request's blocks, usually into one bucket).
  // Precondition: no id is queued, none twice.
  void PushAll(std::span<Node> nodes, std::span<const int32_t> ids) {
    size_t i = 0;
    while (i < ids.size()) {
      const int p = QueueBucketOf(nodes[Index(ids[i])]);
      AGENTKV_DCHECK(p >= 0 && p < kNumQueueBuckets);
      Ring& r = rings_[static_cast<size_t>(p)];
      const uint32_t live_before = r.live;
      uint32_t head = r.head;
      uint32_t count = r.count;
      uint32_t pushed = 0;
      for (; i < ids.size(); ++i) {
        const int32_t id = ids[i];
        Node& n = nodes[Index(id)];
        if (QueueBucketOf(n) != p) break;
        AGENTKV_DCHECK(n.queue_pos == kNotQueued);
        AGENTKV_DCHECK(QueueTagOf(n) == tag_);
        if (count == r.slots.size() || head + count == kNotQueued) {
          r.count = count;
          r.live = live_before + pushed;
          MakeRoom(nodes, p);
          head = r.head;
          count = r.count;
        }
        const uint32_t pos = head + count;
        r.slots[pos & r.mask] = id;
        r.MarkLive(pos);
        ++count;
        n.queue_pos = pos;
        ++pushed;
      }
      r.count = count;
      r.live = live_before + pushed;
      if (live_before == 0) SetBit(p);
      size_ += pushed;
    }
  }

  // Takes `id` out of its bucket. Precondition: `id` is queued here.
  void Remove(std::span<Node> nodes, int32_t id) {
    Node& n = nodes[Index(id)];
    AGENTKV_DCHECK(n.queue_pos != kNotQueued);
    const int p = QueueBucketOf(n);
    Ring& r = rings_[static_cast<size_t>(p)];
    AGENTKV_DCHECK(r.slots[n.queue_pos & r.mask] == id);
    r.MarkStale(n.queue_pos);
    if (n.queue_pos == r.head) {  // The victim, usually: its entry goes at once.
      ++r.head;
      --r.count;
    }
    n.queue_pos = kNotQueued;
    if (--r.live == 0) {
      r.head = kFirstPos;  // Every entry left is stale.
      r.count = 0;
      ClearBit(p);
    }
    --size_;
  }

  // The next victim (first non-empty bucket, its least recently used node), or kNone. Drops
  // the stale entries before it, and prefetches the node of an entry a few places after it, a
  // victim that follows.
  int32_t Peek(std::span<const Node> nodes) {
    for (size_t w = 0; w < bits_.size(); ++w) {
      if (bits_[w] == 0) continue;
      const int p = static_cast<int>(w * 64 + static_cast<size_t>(std::countr_zero(bits_[w])));
      Ring& r = rings_[static_cast<size_t>(p)];
      while (!Live(nodes, r, p, r.head)) {  // No node is read: the bit says.
        ++r.head;
        --r.count;
      }
      // Victims leave one by one from the head, so one prefetch per call, the entry
      // kPrefetchAhead places on, keeps every node of the window on its way.
      if (kPrefetchAhead < r.count) {
        __builtin_prefetch(&nodes[Index(r.slots[(r.head + kPrefetchAhead) & r.mask])]);
      }
      return r.slots[r.head & r.mask];
    }
    return kNone;
  }

  // Visits the nodes of bucket `p` from least to most recently used.
  template <typename Fn>
  void ForEachInBucket(std::span<const Node> nodes, int p, Fn&& fn) const {
    const Ring& r = rings_[static_cast<size_t>(p)];
    for (uint32_t i = 0; i < r.count; ++i) {
      if (Live(nodes, r, p, r.head + i)) fn(r.slots[(r.head + i) & r.mask]);
    }
  }

  bool BucketBitSet(int p) const { return (bits_[static_cast<size_t>(p / 64)] >> (p % 64)) & 1; }

  // Empties every bucket. The nodes' queue_pos fields are the owner's to reset.
  void Clear() {
    for (Ring& r : rings_) r = Ring{};
    bits_.fill(0);
    size_ = 0;
  }

  // Bytes the rings hold.
  int64_t MemoryBytes() const {
    int64_t bytes = 0;
    for (const Ring& r : rings_) {
      bytes += static_cast<int64_t>(r.slots.capacity() * sizeof(int32_t) +
                                    r.live_bits.capacity() * sizeof(uint64_t));
    }
    return bytes;
  }

 private:
  // Positions are uint32 and wrap; a compaction restarts them here, so that front pushes count
  // down and back pushes count up without ever reaching kNotQueued.
  static constexpr uint32_t kFirstPos = 0x80000000u;
  // How many victims ahead Peek prefetches.
  static constexpr uint32_t kPrefetchAhead = 16;

  struct Ring {
    std::vector<int32_t> slots;  // A power-of-two size; entry at position q is slots[q & mask].
    // Bit (q & mask) set exactly when the entry at position q is live: Push sets it, Remove
    // clears it, so telling a stale entry needs no read of its node.
    std::vector<uint64_t> live_bits;
    uint32_t mask = 0;
    uint32_t head = kFirstPos;  // Position of the first entry.
    uint32_t count = 0;         // Entries, live and stale.
    uint32_t live = 0;          // Live entries.

    bool LiveAt(uint32_t pos) const {
      const uint32_t i = pos & mask;
      return (live_bits[i / 64] >> (i % 64)) & 1;
    }
    void MarkLive(uint32_t pos) {
      const uint32_t i = pos & mask;
      live_bits[i / 64] |= uint64_t{1} << (i % 64);
    }
    void MarkStale(uint32_t pos) {
      const uint32_t i = pos & mask;
      live_bits[i / 64] &= ~(uint64_t{1} << (i % 64));
    }
  };

  static size_t Index(int32_t id) { return static_cast<size_t>(id); }

  // Whether the entry at `pos` of bucket `p`'s ring `r` is live: its node is queued in this
  // queue and bucket at this position (checked in debug builds; the bit alone decides).
  bool Live([[maybe_unused]] std::span<const Node> nodes, const Ring& r, [[maybe_unused]] int p,
            uint32_t pos) const {
    const bool live = r.LiveAt(pos);
    AGENTKV_DCHECK(live == (nodes[Index(r.slots[pos & r.mask])].queue_pos == pos &&
                            QueueBucketOf(nodes[Index(r.slots[pos & r.mask])]) == p &&
                            QueueTagOf(nodes[Index(r.slots[pos & r.mask])]) == tag_));
    return live;
  }

  // Makes room for one more entry in bucket `p`'s ring, and restarts its positions at
  // kFirstPos: a full ring drops its stale entries when they are at least half, else doubles.
  void MakeRoom(std::span<Node> nodes, int p) {
    Ring& r = rings_[static_cast<size_t>(p)];
    const size_t size = r.slots.empty()                                     ? 16
                        : r.count < r.slots.size() || r.live * 2 <= r.count ? r.slots.size()
                                                                            : r.slots.size() * 2;
    AGENTKV_CHECK(size <= (size_t{1} << 30)) << "eviction queue bucket overflow";
    std::vector<int32_t> slots(size);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < r.count; ++i) {
      const uint32_t pos = r.head + i;
      if (Live(nodes, r, p, pos)) slots[kept++] = r.slots[pos & r.mask];
    }
    AGENTKV_DCHECK(kept == r.live);
    // Renumbered only after the scan: a new position may equal an old one still to be read.
    for (uint32_t i = 0; i < kept; ++i) {
      if (i + kPrefetchAhead < kept) __builtin_prefetch(&nodes[Index(slots[i + kPrefetchAhead])]);
      nodes[Index(slots[i])].queue_pos = kFirstPos + i;
    }
    r.slots = std::move(slots);
    r.live_bits.assign((size + 63) / 64, 0);
    for (uint32_t i = 0; i < kept / 64; ++i) r.live_bits[i] = ~uint64_t{0};
    if (kept % 64 != 0) r.live_bits[kept / 64] = (uint64_t{1} << (kept % 64)) - 1;
    r.mask = static_cast<uint32_t>(size - 1);
    r.head = kFirstPos;
    r.count = kept;
  }

  void SetBit(int p) { bits_[static_cast<size_t>(p / 64)] |= uint64_t{1} << (p % 64); }
  void ClearBit(int p) { bits_[static_cast<size_t>(p / 64)] &= ~(uint64_t{1} << (p % 64)); }

  int tag_;
  std::array<Ring, kNumQueueBuckets> rings_{};
  std::array<uint64_t, (kNumQueueBuckets + 63) / 64> bits_{};
  int64_t size_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_PRIORITY_LRU_QUEUE_H_
