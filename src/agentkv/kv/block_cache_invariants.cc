// BlockCache::CheckInvariants: the invariants listed at the top of block_cache.cc,
// made executable. O(blocks + index chunks); tests call it after every mutation.
#include <string>

#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

Status Broken(const std::string& what) { return InternalError("invariant broken: " + what); }

std::string Id(size_t b) { return "block " + std::to_string(b); }

}  // namespace

Status BlockCache::CheckInvariants() const {
  const size_t n = blocks_.size();
  const auto key_of = [this](uint32_t id) { return blocks_[static_cast<size_t>(id)].key; };

  // Membership of the free list and of each queue, with the bucket each block is found in.
  std::vector<int8_t> in_free(n, 0);
  int64_t free_seen = 0;
  for (int32_t b = free_head_; b != -1; b = blocks_[static_cast<size_t>(b)].next) {
    if (in_free[static_cast<size_t>(b)]++)
      return Broken("free list has a cycle at " + Id(size_t(b)));
    ++free_seen;
  }
  if (free_seen != free_count_) return Broken("free list length != free_count_");

  std::vector<int8_t> queued(n, 0);  // 1 = device queue, 2 = host queue
  for (int which = 1; which <= 2; ++which) {
    const internal::PriorityLruQueue<Block>& q = which == 1 ? device_queue_ : host_queue_;
    int64_t seen = 0;
    for (int p = 0; p < internal::kNumQueueBuckets; ++p) {
      int64_t in_bucket = 0;
      Status status = Status::Ok();
      q.ForEachInBucket(std::span<const Block>(blocks_), p, [&](int32_t b) {
        const size_t i = static_cast<size_t>(b);
        if (queued[i] != 0 && status.ok()) status = Broken(Id(i) + " queued twice");
        queued[i] = static_cast<int8_t>(which);
        if (blocks_[i].queue_bucket() != p && status.ok()) {
          status = Broken(Id(i) + " of bucket " + std::to_string(blocks_[i].queue_bucket()) +
                          " sits in bucket " + std::to_string(p));
        }
        ++in_bucket;
      });
      if (!status.ok()) return status;
      if ((in_bucket > 0) != q.BucketBitSet(p)) {
        return Broken("bitmap bit " + std::to_string(p) + " disagrees with its bucket");
      }
      seen += in_bucket;
    }
    if (seen != q.size()) return Broken("queue size disagrees with its buckets");
  }
  if (next_use_ != nullptr) {
    if (next_use_heap_.size() != device_queue_.size()) {
      return Broken("the next-use heap and the device queue hold different counts");
    }
    for (size_t i = 0; i < n; ++i) {
      if ((queued[i] == 1) != next_use_heap_.queued(static_cast<int32_t>(i))) {
        return Broken(Id(i) + " is in only one of the device queue and the next-use heap");
      }
    }
  }
  if (gap_order_.enabled()) {
    if (gap_order_.size() != device_queue_.size()) {
      return Broken("the gap-order heap and the device queue hold different counts");
    }
    for (size_t i = 0; i < n; ++i) {
      const auto b = static_cast<int32_t>(i);
      if ((queued[i] == 1) != gap_order_.queued(b)) {
        return Broken(Id(i) + " is in only one of the device queue and the gap-order heap");
      }
      if (queued[i] == 1 && gap_order_.bucket(b) != blocks_[i].queue_bucket()) {
        return Broken(Id(i) + " sits in a stale bucket of the gap-order heap");
      }
    }
  }

  // References from requests.
  std::vector<int32_t> refs(n, 0);
  for (const auto& [request, state] : requests_) {
    if (state.num_committed > static_cast<int64_t>(state.blocks.size())) {
      return Broken("request " + std::to_string(request.value()) + " committed > held");
    }
    for (size_t i = 0; i < state.blocks.size(); ++i) {
      const size_t b = static_cast<size_t>(state.blocks[i]);
      ++refs[b];
      const bool committed = static_cast<int64_t>(i) < state.num_committed;
      if (committed != (blocks_[b].state == State::kDevice)) {
        return Broken("request " + std::to_string(request.value()) + " position " +
                      std::to_string(i) + " has the wrong commit state");
      }
      if (committed && i > 0 && blocks_[b].parent != state.blocks[i - 1]) {
        return Broken("request " + std::to_string(request.value()) + " holds a broken chain");
      }
    }
  }

  int64_t uncommitted = 0, device = 0, host = 0, held = 0, children_links = 0, linked = 0;
  for (size_t i = 0; i < n; ++i) {
    const Block& b = blocks_[i];
    if (b.ref_count != refs[i]) {
      return Broken(Id(i) + " ref_count " + std::to_string(b.ref_count) + " but " +
                    std::to_string(refs[i]) + " request references");
    }
    if (b.priority > kMaxPriority) return Broken(Id(i) + " priority out of range");
    if (b.expires != expiry_.Pending(static_cast<int32_t>(i))) {
      return Broken(Id(i) + " expires flag disagrees with the expiry queue");
    }
    const bool free_listed = in_free[i] != 0;
    if (free_listed != (b.state == State::kFree)) return Broken(Id(i) + " free-list mismatch");
    switch (b.state) {
      case State::kFree:
        if (queued[i] != 0 || b.ref_count != 0) return Broken(Id(i) + " free but in use");
        if (expiry_.Pending(static_cast<int32_t>(i))) return Broken(Id(i) + " free with expiry");
        continue;
      case State::kUncommitted:
        ++uncommitted;
        ++held;
        if (b.ref_count != 1 || queued[i] != 0 || b.first_child != -1) {
          return Broken(Id(i) + " uncommitted but shared, queued or parent");
        }
        continue;
      case State::kDevice:
        ++device;
        if (b.ref_count > 0) ++held;
        if ((queued[i] == 1) != (b.ref_count == 0) || queued[i] == 2) {
          return Broken(Id(i) + " on the device: queued iff unheld violated");
        }
        if (b.parent != -1 && blocks_[static_cast<size_t>(b.parent)].state != State::kDevice) {
          return Broken(Id(i) + " on the device under a parent not on the device");
        }
        break;
      case State::kHost:
        ++host;
        if (queued[i] != 2 || b.ref_count != 0)
          return Broken(Id(i) + " on the host: not queued there");
        if (b.parent != -1) {
          const State ps = blocks_[static_cast<size_t>(b.parent)].state;
          if (ps != State::kDevice && ps != State::kHost) {
            return Broken(Id(i) + " on the host under an uncached parent");
          }
        }
        break;
    }
    // Committed blocks only from here.
    if (b.key_referenced != key_refs_.contains(b.key)) {
      return Broken(Id(i) + " key_referenced disagrees with the key references");
    }
    if (index_.Find(b.key, key_of) != static_cast<int32_t>(i)) {
      return Broken(Id(i) + " is not indexed under its key");
    }
    if (b.parent != -1) {
      ++linked;
      if (blocks_[static_cast<size_t>(b.parent)].ref_count < b.ref_count) {
        return Broken(Id(i) + " is held more often than its parent");
      }
    }
    for (int32_t c = b.first_child; c != -1; c = blocks_[static_cast<size_t>(c)].next_sibling) {
      if (blocks_[static_cast<size_t>(c)].parent != static_cast<int32_t>(i)) {
        return Broken(Id(i) + " lists a child whose parent differs");
      }
      ++children_links;
    }
  }
  if (children_links != linked) return Broken("child lists disagree with parent links");

  for (const auto& [key, count] : key_refs_) {
    if (count <= 0) return Broken("a key keeps a reference count of " + std::to_string(count));
  }
  if (uncommitted + device != device_used_) return Broken("device_used_ disagrees");
  if (device != device_cached_) return Broken("device_cached_ disagrees");
  if (host != host_used_) return Broken("host_used_ disagrees");
  if (held != held_blocks_) return Broken("held_blocks_ disagrees");
  if (device_used_ > options_.device_blocks) return Broken("device over capacity");
  if (host_used_ > options_.host_blocks) return Broken("host over capacity");
  if (index_.size() != device + host) return Broken("index size disagrees with cached blocks");
  if (free_count_ + device_used_ + host_used_ != static_cast<int64_t>(n)) {
    return Broken("slots do not conserve");
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
