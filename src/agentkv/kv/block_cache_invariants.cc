// BlockCache::CheckInvariants: the invariants listed at the top of block_cache.cc,
// made executable, one named check each. O(blocks + index chunks); tests call it after every
// mutation.
#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

Status Broken(const std::string& what) { return InternalError("invariant broken: " + what); }

std::string Id(size_t b) { return "block " + std::to_string(b); }

}  // namespace

// What the checks found so far, for the checks after them.
struct BlockCache::InvariantScan {
  explicit InvariantScan(size_t n) : in_free(n, 0), queued(n, 0), refs(n, 0) {}

  std::vector<int8_t> in_free;
  std::vector<int8_t> queued;  // 1 = device queue, 2 = host queue
  std::vector<int32_t> refs;   // holds by running requests
  int64_t uncommitted = 0, device = 0, host = 0, held = 0, children_links = 0, linked = 0;
};

Status BlockCache::CheckInvariants() const {
  InvariantScan scan(blocks_.size());
  if (!payloads_.empty() && payloads_.size() != blocks_.size()) {
    return Broken("the payload array has " + std::to_string(payloads_.size()) + " entries for " +
                  std::to_string(blocks_.size()) + " blocks");
  }
  AGENTKV_RETURN_IF_ERROR(CheckFreeList(scan));
  AGENTKV_RETURN_IF_ERROR(CheckQueues(scan));
  AGENTKV_RETURN_IF_ERROR(std::visit(
      [&](const auto& order) {
        return order.CheckQueued(std::span<const Block>(blocks_), scan.queued,
                                 device_queue_.size());
      },
      order_));
  AGENTKV_RETURN_IF_ERROR(CheckRequests(scan));
  AGENTKV_RETURN_IF_ERROR(CheckBlocks(scan));
  return CheckCounts(scan);
}

// The free list is acyclic and as long as free_count_ says.
Status BlockCache::CheckFreeList(InvariantScan& scan) const {
  int64_t free_seen = 0;
  for (int32_t b = free_head_; b != -1; b = blocks_[static_cast<size_t>(b)].next) {
    if (scan.in_free[static_cast<size_t>(b)]++)
      return Broken("free list has a cycle at " + Id(size_t(b)));
    ++free_seen;
  }
  if (free_seen != free_count_) return Broken("free list length != free_count_");
  return Status::Ok();
}

// Each block sits in at most one queue, in the bucket of its priority; bitmaps and sizes agree.
Status BlockCache::CheckQueues(InvariantScan& scan) const {
  for (int which = 1; which <= 2; ++which) {
    const internal::PriorityLruQueue<Block>& q = which == 1 ? device_queue_ : host_queue_;
    int64_t seen = 0;
    for (int p = 0; p < internal::kNumQueueBuckets; ++p) {
      int64_t in_bucket = 0;
      Status status = Status::Ok();
      q.ForEachInBucket(std::span<const Block>(blocks_), p, [&](int32_t b) {
        const size_t i = static_cast<size_t>(b);
        if (scan.queued[i] != 0 && status.ok()) status = Broken(Id(i) + " queued twice");
        scan.queued[i] = static_cast<int8_t>(which);
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
  return Status::Ok();
}

// Each request holds a chain: committed blocks first, each the child of the one before.
Status BlockCache::CheckRequests(InvariantScan& scan) const {
  for (const auto& [request, state] : requests_) {
    if (state.num_committed > static_cast<int64_t>(state.blocks.size())) {
      return Broken("request " + std::to_string(request.value()) + " committed > held");
    }
    for (size_t i = 0; i < state.blocks.size(); ++i) {
      const size_t b = static_cast<size_t>(state.blocks[i]);
      ++scan.refs[b];
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
  return Status::Ok();
}

// Every slot: its holds, priority and expiry agree; then its state's rules; committed blocks'
// index entries and tree links.
Status BlockCache::CheckBlocks(InvariantScan& scan) const {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.ref_count != scan.refs[i]) {
      return Broken(Id(i) + " ref_count " + std::to_string(b.ref_count) + " but " +
                    std::to_string(scan.refs[i]) + " request references");
    }
    if (b.priority > kMaxPriority) return Broken(Id(i) + " priority out of range");
    if (b.expires != expiry_.Pending(static_cast<int32_t>(i))) {
      return Broken(Id(i) + " expires flag disagrees with the expiry queue");
    }
    const bool free_listed = scan.in_free[i] != 0;
    if (free_listed != (b.state == State::kFree)) return Broken(Id(i) + " free-list mismatch");
    AGENTKV_RETURN_IF_ERROR(CheckBlockState(i, scan));
    if (b.state == State::kDevice || b.state == State::kHost) {
      AGENTKV_RETURN_IF_ERROR(CheckCommittedBlock(i, scan));
    }
  }
  if (scan.children_links != scan.linked) return Broken("child lists disagree with parent links");
  return Status::Ok();
}

// The rules of the slot's state: free, uncommitted (held once), on the device (queued iff
// unheld, under a device parent) or on the host (queued there, under a cached parent).
Status BlockCache::CheckBlockState(size_t i, InvariantScan& scan) const {
  const Block& b = blocks_[i];
  const int8_t queued = scan.queued[i];
  switch (b.state) {
    case State::kFree:
      if (queued != 0 || b.ref_count != 0) return Broken(Id(i) + " free but in use");
      if (expiry_.Pending(static_cast<int32_t>(i))) return Broken(Id(i) + " free with expiry");
      break;
    case State::kUncommitted:
      ++scan.uncommitted;
      ++scan.held;
      if (b.ref_count != 1 || queued != 0 || b.first_child != -1) {
        return Broken(Id(i) + " uncommitted but shared, queued or parent");
      }
      break;
    case State::kDevice:
      ++scan.device;
      if (b.ref_count > 0) ++scan.held;
      if ((queued == 1) != (b.ref_count == 0) || queued == 2) {
        return Broken(Id(i) + " on the device: queued iff unheld violated");
      }
      if (b.parent != -1 && blocks_[static_cast<size_t>(b.parent)].state != State::kDevice) {
        return Broken(Id(i) + " on the device under a parent not on the device");
      }
      break;
    case State::kHost:
      ++scan.host;
      if (queued != 2 || b.ref_count != 0) return Broken(Id(i) + " on the host: not queued there");
      if (b.parent != -1) {
        const State ps = blocks_[static_cast<size_t>(b.parent)].state;
        if (ps != State::kDevice && ps != State::kHost) {
          return Broken(Id(i) + " on the host under an uncached parent");
        }
      }
      break;
  }
  return Status::Ok();
}

// A committed block: its eviction class, its index entry and its tree links.
Status BlockCache::CheckCommittedBlock(size_t i, InvariantScan& scan) const {
  const Block& b = blocks_[i];
  const auto key_of = [this](uint32_t id) { return blocks_[static_cast<size_t>(id)].key; };
  if (b.key_referenced != key_refs_.contains(b.key)) {
    return Broken(Id(i) + " key_referenced disagrees with the key references");
  }
  if (index_.Find(b.key, key_of) != static_cast<int32_t>(i)) {
    return Broken(Id(i) + " is not indexed under its key");
  }
  if (b.parent != -1) {
    ++scan.linked;
    if (blocks_[static_cast<size_t>(b.parent)].ref_count < b.ref_count) {
      return Broken(Id(i) + " is held more often than its parent");
    }
  }
  for (int32_t c = b.first_child; c != -1; c = blocks_[static_cast<size_t>(c)].next_sibling) {
    if (blocks_[static_cast<size_t>(c)].parent != static_cast<int32_t>(i)) {
      return Broken(Id(i) + " lists a child whose parent differs");
    }
    ++scan.children_links;
  }
  return Status::Ok();
}

// Key references are positive; the tier gauges match the slots counted; slots conserve.
Status BlockCache::CheckCounts(const InvariantScan& scan) const {
  int32_t lowest = 1;
  key_refs_.ForEach([&lowest](uint64_t, int32_t count) { lowest = std::min(lowest, count); });
  if (lowest <= 0) return Broken("a key keeps a reference count of " + std::to_string(lowest));
  if (scan.uncommitted + scan.device != device_used_) return Broken("device_used_ disagrees");
  if (scan.device != device_cached_) return Broken("device_cached_ disagrees");
  if (scan.host != host_used_) return Broken("host_used_ disagrees");
  if (scan.held != held_blocks_) return Broken("held_blocks_ disagrees");
  if (device_used_ > options_.device_blocks) return Broken("device over capacity");
  if (host_used_ > options_.host_blocks) return Broken("host over capacity");
  if (index_.size() != scan.device + scan.host) {
    return Broken("index size disagrees with cached blocks");
  }
  if (free_count_ + device_used_ + static_cast<int64_t>(host_used_) !=
      static_cast<int64_t>(blocks_.size())) {
    return Broken("slots do not conserve");
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
