// BlockCache (block_cache.h): the tier moves: a device block offloaded to the host, a host
// block onboarded, and the moves ahead of demand (stall offload, prefetch). The invariants are
// listed in block_cache.cc.
#include <cstdint>
#include <span>

#include "agentkv/base/check.h"
#include "agentkv/kv/block_cache.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kNone = -1;

}  // namespace

// ---- Stall offload ---------------------------------------------------------------------

int64_t BlockCache::OffloadChain(std::span<const BlockKey> keys) {
  // (The offline-optimal order runs without a host tier: SetNextUseRanking.)
  if (options_.host_blocks == 0) return 0;
  chain_.clear();
  int32_t parent = kNone;
  for (const BlockKey key : keys) {
    const int32_t b = FindChild(parent, key);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kDevice) break;
    chain_.push_back(b);
    parent = b;
  }
  int64_t moved = 0;
  // Deepest first: a block leaves only once it has no device child left (the chain's child
  // left before it), so the device tier stays closed under prefixes.
  for (size_t i = chain_.size(); i-- > 0;) {
    const int32_t b = chain_[i];
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.ref_count > 0 || !Offloadable(blk)) break;
    bool fork = false;
    for (int32_t c = blk.first_child; c != kNone;
         c = blocks_[static_cast<size_t>(c)].next_sibling) {
      if (blocks_[static_cast<size_t>(c)].state == State::kDevice) {
        fork = true;
        break;
      }
    }
    // Into free host room only: a move ahead of demand never pushes other blocks out of the
    // host tier (what it would lose is worth more than a guess about a pause).
    if (fork || host_used_ >= options_.host_blocks) break;
    MoveToHost(b, /*eviction=*/false);
    ++moved;
  }
  return moved;
}

int64_t BlockCache::PrefetchChain(std::span<const BlockKey> keys, int64_t max_blocks) {
  AGENTKV_CHECK_GE(max_blocks, 0);
  if (options_.host_blocks == 0 || max_blocks == 0) return 0;
  const PrefixMatch match = Match(keys);
  if (match.host_blocks == 0) return 0;
  // The whole chain is held while it loads, so that the room made for a block never takes its
  // device prefix or the blocks loaded before it (as AddRequest holds and onboards), then
  // released deepest first, as a finished request releases its chain.
  chain_.clear();
  int32_t parent = kNone;
  for (int64_t i = 0; i < match.device_blocks; ++i) {
    const int32_t b = FindChild(parent, keys[static_cast<size_t>(i)]);
    Hold(b);
    chain_.push_back(b);
    parent = b;
  }
  int64_t loaded = 0;
  for (int64_t i = match.device_blocks; i < match.total_blocks() && loaded < max_blocks; ++i) {
    // Room made for an earlier block may have evicted a later one from a full host tier.
    const int32_t b = FindChild(parent, keys[static_cast<size_t>(i)]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kHost) break;
    if (!CanFreeDevice(1)) break;
    Onboard(b, /*prefetch=*/true);
    chain_.push_back(b);
    parent = b;
    ++loaded;
  }
  for (size_t j = chain_.size(); j-- > 0;) Unhold(chain_[j]);
  return loaded;
}

// ---- Offload and onboard --------------------------------------------------------------

void BlockCache::MoveToHost(int32_t b, bool eviction) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.state == State::kDevice && blk.ref_count == 0);
  device_queue_.Remove(blocks_, b);
  std::visit([&](auto& order) { order.OnUnevictable(b); }, order_);
  while (host_used_ >= options_.host_blocks) {
    const int32_t victim = host_queue_.Peek(blocks_);
    AGENTKV_CHECK(victim != kNone);
    DropSubtree(victim, KvEventKind::kEvicted);
  }
  blk.state = State::kHost;
  --device_used_;
  --device_cached_;
  ++host_used_;
  host_queue_.Push(blocks_, b);
  if (eviction) {
    ++counters_.device_evictions;
    ++counters_.offloads;
  } else {
    ++counters_.stall_offloaded_blocks;
  }
  Record(KvEventKind::kOffloaded, blk, Tier::kDevice);
}

void BlockCache::Onboard(int32_t b, bool prefetch) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.state == State::kHost);
  // Out of the host queue first, so that host evictions made while room is freed on the
  // device cannot pick it.
  // Its host slot is released before device room is made: a device eviction may offload a
  // block into it.
  host_queue_.Remove(blocks_, b);
  --host_used_;
  MakeDeviceRoom(1);
  blk.state = State::kDevice;
  ++device_used_;
  ++device_cached_;
  blk.ref_count = 1;
  ++held_blocks_;
  if (prefetch) {
    ++counters_.prefetched_blocks;
  } else {
    ++counters_.onboards;
  }
  Record(KvEventKind::kOnboarded, blk, Tier::kHost);
}

}  // namespace agentkv::kv
