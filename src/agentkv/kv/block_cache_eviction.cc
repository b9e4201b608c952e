// BlockCache (block_cache.h): eviction: making device room, the victim order's events,
// evictions and their cascades, holds, priorities and the tree links they walk. The
// invariants are listed in block_cache.cc.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "agentkv/base/check.h"
#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kNone = -1;

std::string Str(int64_t v) { return std::to_string(v); }

}  // namespace

// ---- The victim order ------------------------------------------------------------------

void BlockCache::RankUnneeded(BlockKey tip) {
  const int32_t b = FindBlock(tip);
  if (b != kNone) RankUnneededFrom(b);
}

void BlockCache::RankUnneededFrom(int32_t tip) {
  std::visit([&](auto& order) { order.OnSessionEnded(tip, blocks_, host_queue_); }, order_);
}

Status BlockCache::SetNextUseRanking(const NextUseRanking* ranking) {
  if (options_.host_blocks > 0) {
    return InvalidArgumentError("a next-use ranking covers the device tier only; host_blocks is " +
                                Str(options_.host_blocks));
  }
  if (device_used_ > 0 || host_used_ > 0 || !requests_.empty()) {
    return FailedPreconditionError("a next-use ranking is set on an empty cache only");
  }
  if (options_.eviction_order == EvictionOrder::kGapAware && ranking != nullptr) {
    return InvalidArgumentError(
        "a next-use ranking replaces the eviction order; eviction_order is " +
        std::string(EvictionOrderName(options_.eviction_order)));
  }
  order_ = internal::MakeVictimOrder(options_.eviction_order, ranking, blocks_.size());
  return Status::Ok();
}

void BlockCache::RefreshNextUse(BlockKey key) {
  // Only the offline-optimal order reads a ranking.
  auto* order = std::get_if<internal::NextUseOrder>(&order_);
  if (order == nullptr) return;
  const int32_t b = FindBlock(key);
  if (b != kNone) order->Refresh(b, blocks_);
}

// ---- Device room and eviction ---------------------------------------------------------

bool BlockCache::CanFreeDevice(int64_t n) const {
  // Every queued device block can be evicted (cascades only free more), so this bound is exact.
  return options_.device_blocks - device_used_ + device_queue_.size() >= n;
}

void BlockCache::MakeDeviceRoom(int64_t n) {
  if (options_.device_blocks - device_used_ >= n) return;
  // The victims' index entries are erased after the loop, their chunks prefetched as each
  // leaves: the misses overlap instead of stalling one eviction each. Nothing between looks a
  // key up, and no freed block is reused before the batch is erased.
  AGENTKV_DCHECK(deferred_erase_.empty());
  defer_index_erase_ = true;
  while (options_.device_blocks - device_used_ < n) {
    const int32_t victim =
        std::visit([&](auto& order) { return order.Victim(device_queue_, blocks_); }, order_);
    AGENTKV_CHECK(victim != kNone) << "MakeDeviceRoom without CanFreeDevice";
    EvictFromDevice(victim);
  }
  defer_index_erase_ = false;
  for (const auto& [key, b] : deferred_erase_) index_.Erase(key, b);
  deferred_erase_.clear();
}

int64_t BlockCache::EvictDevice(int64_t blocks) {
  AGENTKV_CHECK_GE(blocks, 0);
  const int64_t free_before = options_.device_blocks - device_used_;
  const int64_t want = free_before + std::min(blocks, device_queue_.size());
  MakeDeviceRoom(want);
  return options_.device_blocks - device_used_ - free_before;
}

int32_t BlockCache::TakeFreeBlock() {
  AGENTKV_CHECK(free_head_ != kNone);
  const int32_t b = free_head_;
  Block& blk = blocks_[static_cast<size_t>(b)];
  free_head_ = blk.next;
  --free_count_;
  // Fields of a free block are stale except `state` and `next`; a block is reset here, once,
  // rather than on every return to the free list.
  blk = Block{};
  blk.priority = static_cast<uint8_t>(options_.default_priority);
  std::visit([&](auto& order) { order.OnSlotTaken(b); }, order_);
  return b;
}

void BlockCache::ReturnFreeBlock(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.queue_pos == internal::kNotQueued);
  blk.state = State::kFree;
  blk.next = free_head_;
  free_head_ = b;
  ++free_count_;
}

bool BlockCache::Offloadable(const Block& blk) const {
  return options_.host_blocks > 0 && blk.priority >= options_.offload_threshold;
}

void BlockCache::EvictFromDevice(int32_t victim) {
  const Block& v = blocks_[static_cast<size_t>(victim)];
  // Content nobody needs again is not worth a host slot.
  if (!Offloadable(v) ||
      std::visit([&](const auto& order) { return order.Unneeded(victim); }, order_)) {
    DropSubtree(victim, KvEventKind::kDropped);
    return;
  }
  if (v.first_child == kNone) {  // A leaf, the common case.
    MoveToHost(victim);
    return;
  }
  // The victim has the lowest priority of all queued device blocks, and its device
  // descendants are all queued (a held block's ancestors are held), so they are offloadable
  // too. They move bottom-up (reverse pre-order) so that each tier stays closed under prefixes
  // at every moment.
  // Depth-first pre-order with an explicit stack (children are listed newest first, so the
  // oldest is visited first); reversed, it is a post-order that moves newer children first.
  offload_.clear();
  cascade_.clear();
  cascade_.push_back(victim);
  while (!cascade_.empty()) {
    const int32_t b = cascade_.back();
    cascade_.pop_back();
    offload_.push_back(b);
    const Block& blk = blocks_[static_cast<size_t>(b)];
    AGENTKV_DCHECK(Offloadable(blk));
    for (int32_t c = blk.first_child; c != kNone;
         c = blocks_[static_cast<size_t>(c)].next_sibling) {
      if (blocks_[static_cast<size_t>(c)].state == State::kDevice) cascade_.push_back(c);
    }
  }
  for (size_t i = offload_.size(); i-- > 0;) MoveToHost(offload_[i]);
}

void BlockCache::DropSubtree(int32_t root, KvEventKind root_kind) {
  UnlinkChild(root);
  if (blocks_[static_cast<size_t>(root)].first_child == kNone) {  // A leaf: the common case.
    DropBlock(root, root_kind);
    return;
  }
  cascade_.clear();
  cascade_.push_back(root);
  for (size_t i = 0; i < cascade_.size(); ++i) {
    const Block& blk = blocks_[static_cast<size_t>(cascade_[i])];
    for (int32_t c = blk.first_child; c != kNone;
         c = blocks_[static_cast<size_t>(c)].next_sibling) {
      cascade_.push_back(c);
    }
  }
  for (size_t i = 0; i < cascade_.size(); ++i) {
    DropBlock(cascade_[i], i == 0 ? root_kind : KvEventKind::kDropped);
  }
}

void BlockCache::DropBlock(int32_t b, KvEventKind kind, bool eviction) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_CHECK(blk.ref_count == 0) << "cascade reached a held block";
  Tier tier = Tier::kDevice;
  if (blk.state == State::kHost) {
    tier = Tier::kHost;
    host_queue_.Remove(blocks_, b);
    --host_used_;
  } else {
    device_queue_.Remove(blocks_, b);
    std::visit([&](auto& order) { order.OnUnevictable(b); }, order_);
    --device_used_;
    --device_cached_;
    if (eviction) ++counters_.device_evictions;
  }
  if (defer_index_erase_) {
    index_.Prefetch(blk.key);
    deferred_erase_.emplace_back(blk.key, b);
  } else {
    index_.Erase(blk.key, b);
  }
  if (blk.expires) {
    expiry_.Cancel(b);
    blk.expires = false;
  }
  blk.key_referenced = false;
  if (eviction) ++counters_.drops;
  Record(kind, blk, tier);
  ReturnFreeBlock(b);
}

// ---- Tree links, holds, queues ---------------------------------------------------------

void BlockCache::LinkChild(int32_t parent, int32_t child) {
  Block& c = blocks_[static_cast<size_t>(child)];
  c.parent = parent;
  c.prev_sibling = kNone;
  c.next_sibling = kNone;
  // Blocks at the root of a chain are not linked: the root is never evicted, so nothing
  // needs to enumerate its children.
  if (parent == kNone) return;
  Block& p = blocks_[static_cast<size_t>(parent)];
  c.next_sibling = p.first_child;
  if (p.first_child != kNone) blocks_[static_cast<size_t>(p.first_child)].prev_sibling = child;
  p.first_child = child;
}

void BlockCache::UnlinkChild(int32_t child) {
  Block& c = blocks_[static_cast<size_t>(child)];
  if (c.parent == kNone) return;
  if (c.prev_sibling != kNone) {
    blocks_[static_cast<size_t>(c.prev_sibling)].next_sibling = c.next_sibling;
  } else {
    blocks_[static_cast<size_t>(c.parent)].first_child = c.next_sibling;
  }
  if (c.next_sibling != kNone) {
    blocks_[static_cast<size_t>(c.next_sibling)].prev_sibling = c.prev_sibling;
  }
  c.prev_sibling = c.next_sibling = kNone;
}

void BlockCache::Hold(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.state == State::kDevice);
  if (blk.ref_count++ == 0) {
    device_queue_.Remove(blocks_, b);
    std::visit([&](auto& order) { order.OnUnevictable(b); }, order_);
    ++held_blocks_;
  }
}

void BlockCache::Unhold(int32_t b) {
  if (DropHold(b)) device_queue_.Push(blocks_, b);
}

bool BlockCache::DropHold(int32_t b) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.state == State::kDevice && blk.ref_count > 0);
  if (--blk.ref_count > 0) return false;
  --held_blocks_;
  std::visit([&](auto& order) { order.OnEvictable(b, blk); }, order_);
  return true;
}

internal::PriorityLruQueue<BlockCache::Block>* BlockCache::QueueOf(int32_t b) {
  const Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.state == State::kHost) return &host_queue_;
  if (blk.state == State::kDevice && blk.ref_count == 0) return &device_queue_;
  return nullptr;
}

void BlockCache::Reprioritize(int32_t b, Priority p, std::optional<agentkv::Step> duration,
                              bool front) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  internal::PriorityLruQueue<Block>* queue = QueueOf(b);
  if (queue != nullptr) queue->Remove(blocks_, b);
  blk.priority = static_cast<uint8_t>(p);
  if (duration.has_value()) {
    expiry_.Schedule(b, step_ + *duration);
    blk.expires = true;
  } else if (blk.expires) {
    expiry_.Cancel(b);
    blk.expires = false;
  }
  if (queue != nullptr) queue->Push(blocks_, b, front);
  if (queue == &device_queue_) {
    std::visit([&](auto& order) { order.OnRequeued(b, blk, front); }, order_);
  }
}

}  // namespace agentkv::kv
