// BlockCache: the block pool, prefix index, tiers and eviction (block_cache.h).
//
// Invariants (CheckInvariants, in block_cache_invariants.cc, verifies each):
//  - Every arena slot is in exactly one state: kFree (in the free list), kUncommitted (held by
//    exactly one request, not indexed), kDevice or kHost (committed: in the prefix index under
//    its key, linked under its parent).
//  - Tier counts conserve: device_used_ = #kUncommitted + #kDevice <= device_blocks,
//    host_used_ = #kHost <= host_blocks, free_count_ = #kFree.
//  - The device queue holds exactly the kDevice blocks with ref_count == 0, the host queue
//    exactly the kHost blocks, each in the bucket of its priority; host blocks are never held.
//  - A kDevice block's parent is kDevice; a kHost block's parent is kDevice or kHost (each tier
//    is closed under prefixes, so a match never skips a block).
//  - A request holds a chain: ref_count(parent) >= ref_count(child), hence every descendant of
//    an unheld block is unheld and cascades never reach a held block.
//  - With a next-use ranking, the next-use heap queues exactly the device queue's blocks.
//  - In the gap-aware order, the gap-order heap queues exactly the device queue's blocks, each
//    in its current queue bucket.
//  - A committed block is key_referenced exactly when key_refs_ holds its key; key_refs_ holds
//    only positive counts.
#include "agentkv/kv/block_cache.h"

#include <algorithm>
#include <string>

#include "agentkv/base/check.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kNone = -1;

// How far ahead of its probe a walk along a chain of keys prefetches index chunks: enough
// blocks of work to cover one memory access (the index outgrows the caches at a few hundred
// thousand blocks).
constexpr size_t kPrefetchAhead = 16;
// Below this many blocks the arena and the index fit in a core's L2 cache, where software
// prefetches only cost instructions (measured: a 10K-block match is 1.4x slower with them, a
// 1M-block one 2x faster).
constexpr size_t kPrefetchMinBlocks = size_t{1} << 16;

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckRequestArguments(int64_t prompt_tokens,
                             const std::optional<RetentionConfig>& retention) {
  if (prompt_tokens < 0) {
    return InvalidArgumentError("prompt_tokens must be >= 0, got " + Str(prompt_tokens));
  }
  if (retention.has_value()) return retention->Validate();
  return Status::Ok();
}

}  // namespace

StatusOr<BlockCache> BlockCache::Create(const KvCacheOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return BlockCache(options);
}

BlockCache::BlockCache(const KvCacheOptions& options)
    : options_(options),
      hasher_(options.hash_seed),
      index_(options.device_blocks + options.host_blocks),
      events_(options.event_log_capacity) {
  const int64_t total = options.device_blocks + options.host_blocks;
  blocks_.resize(static_cast<size_t>(total));
  for (int64_t i = total - 1; i >= 0; --i) ReturnFreeBlock(static_cast<int32_t>(i));
  counters_.device.capacity = options.device_blocks;
  counters_.host.capacity = options.host_blocks;
  if (options.eviction_order == EvictionOrder::kGapAware) gap_order_.Reset(blocks_.size());
}

int64_t BlockCache::BlocksForTokens(int64_t tokens) const {
  return (tokens + options_.tokens_per_block - 1) / options_.tokens_per_block;
}

int32_t BlockCache::FindChild(int32_t parent, BlockKey key) const {
  const int32_t b = FindBlock(key);
  if (b == kNone || blocks_[static_cast<size_t>(b)].parent != parent) return kNone;
  return b;
}

void BlockCache::PrefetchIndex(std::span<const BlockKey> keys, size_t i) const {
  if (blocks_.size() < kPrefetchMinBlocks) return;
  if (i == 0) {
    for (size_t j = 0; j < kPrefetchAhead && j < keys.size(); ++j) index_.Prefetch(keys[j].value());
  }
  if (i + kPrefetchAhead < keys.size()) index_.Prefetch(keys[i + kPrefetchAhead].value());
}

void BlockCache::PrefetchLookup(std::span<const BlockKey> keys, size_t i) const {
  if (blocks_.size() < kPrefetchMinBlocks) return;
  // Index chunks kSlotsAhead keys ahead, blocks kBlocksAhead ahead (their chunks were
  // prefetched kSlotsAhead - kBlocksAhead keys ago). A match does little per block, so it reaches
  // further ahead than a commit.
  constexpr size_t kSlotsAhead = 4 * kPrefetchAhead;
  constexpr size_t kBlocksAhead = 2 * kPrefetchAhead;
  if (i == 0) {
    // The head of the chain: its chunks all at once, then the blocks they name (these loads
    // wait for the chunks, but together, not one per block).
    for (size_t j = 0; j < kSlotsAhead && j < keys.size(); ++j) index_.Prefetch(keys[j].value());
    for (size_t j = 0; j < kBlocksAhead && j < keys.size(); ++j) {
      const int32_t b = index_.Candidate(keys[j].value());
      if (b != kNone) __builtin_prefetch(&blocks_[static_cast<size_t>(b)]);
    }
  }
  if (i + kSlotsAhead < keys.size()) index_.Prefetch(keys[i + kSlotsAhead].value());
  if (i + kBlocksAhead < keys.size()) {
    const int32_t b = index_.Candidate(keys[i + kBlocksAhead].value());
    if (b != kNone) __builtin_prefetch(&blocks_[static_cast<size_t>(b)]);
  }
}

PrefixMatch BlockCache::Match(std::span<const BlockKey> keys) const {
  PrefixMatch match;
  int32_t parent = kNone;
  size_t i = 0;
  for (; i < keys.size(); ++i) {
    PrefetchLookup(keys, i);
    const int32_t b = FindChild(parent, keys[i]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kDevice) break;
    parent = b;
  }
  match.device_blocks = static_cast<int64_t>(i);
  for (; i < keys.size(); ++i) {
    const int32_t b = FindChild(parent, keys[i]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kHost) break;
    parent = b;
  }
  match.host_blocks = static_cast<int64_t>(i) - match.device_blocks;
  return match;
}

Status BlockCache::CheckNewRequest(RequestId request, int64_t prompt_tokens,
                                   const std::optional<RetentionConfig>& retention) const {
  AGENTKV_RETURN_IF_ERROR(CheckRequestArguments(prompt_tokens, retention));
  if (requests_.contains(request)) {
    return AlreadyExistsError("request " + Str(request.value()) + " is already active");
  }
  return Status::Ok();
}

StatusOr<PrefixMatch> BlockCache::AddRequest(RequestId request,
                                             std::span<const BlockKey> prompt_keys,
                                             int64_t prompt_tokens,
                                             const std::optional<RetentionConfig>& retention) {
  AGENTKV_RETURN_IF_ERROR(CheckRequestArguments(prompt_tokens, retention));
  auto [it, inserted] = requests_.try_emplace(request);
  if (!inserted) {
    return AlreadyExistsError("request " + Str(request.value()) + " is already active");
  }
  internal::RequestState& state = it->second;
  state.prompt_tokens = prompt_tokens;
  state.retention = retention;
  if (!spare_block_lists_.empty()) {
    state.blocks = std::move(spare_block_lists_.back());
    spare_block_lists_.pop_back();
  }
  state.blocks.reserve(prompt_keys.size());

  PrefixMatch match;
  int32_t parent = kNone;
  size_t i = 0;
  for (; i < prompt_keys.size(); ++i) {
    PrefetchLookup(prompt_keys, i);
    const int32_t b = FindChild(parent, prompt_keys[i]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kDevice) break;
    Hold(b);
    state.blocks.push_back(b);
    parent = b;
  }
  match.device_blocks = static_cast<int64_t>(i);
  for (; i < prompt_keys.size(); ++i) {
    const int32_t b = FindChild(parent, prompt_keys[i]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kHost) break;
    if (!CanFreeDevice(1)) break;
    Onboard(b);
    state.blocks.push_back(b);
    parent = b;
  }
  match.host_blocks = static_cast<int64_t>(i) - match.device_blocks;
  state.num_committed = match.total_blocks();
  state.reused_blocks = match.total_blocks();

  const int64_t tpb = options_.tokens_per_block;
  ++counters_.lookups;
  counters_.lookup_blocks += static_cast<int64_t>(prompt_keys.size());
  counters_.matched_device_blocks += match.device_blocks;
  counters_.matched_host_blocks += match.host_blocks;
  counters_.matched_device_tokens += match.device_blocks * tpb;
  counters_.matched_host_tokens += match.host_blocks * tpb;
  counters_.uncached_tokens += std::max<int64_t>(0, prompt_tokens - match.total_blocks() * tpb);
  return match;
}

Status BlockCache::Reserve(RequestId request, int64_t total_tokens) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return NotFoundError("unknown request " + Str(request.value()));
  internal::RequestState& state = it->second;
  const int64_t need = BlocksForTokens(total_tokens) - static_cast<int64_t>(state.blocks.size());
  if (need <= 0) return Status::Ok();
  if (!CanFreeDevice(need)) {
    return ResourceExhaustedError("request " + Str(request.value()) + " needs " + Str(need) +
                                  " more blocks; the device has " +
                                  Str(options_.device_blocks - device_used_) + " free and " +
                                  Str(device_queue_.size()) + " evictable");
  }
  MakeDeviceRoom(need);
  for (int64_t n = 0; n < need; ++n) {
    const int32_t b = TakeFreeBlock();
    Block& blk = blocks_[static_cast<size_t>(b)];
    blk.state = State::kUncommitted;
    blk.ref_count = 1;
    ++device_used_;
    ++held_blocks_;
    state.blocks.push_back(b);
  }
  return Status::Ok();
}

Status BlockCache::Commit(RequestId request, std::span<const BlockKey> next_keys) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return NotFoundError("unknown request " + Str(request.value()));
  internal::RequestState& state = it->second;
  const int64_t held = static_cast<int64_t>(state.blocks.size());
  const int64_t want = state.num_committed + static_cast<int64_t>(next_keys.size());
  if (want > held) {
    return FailedPreconditionError("request " + Str(request.value()) + " commits " + Str(want) +
                                   " blocks but holds " + Str(held));
  }
  for (size_t k = 0; k < next_keys.size(); ++k) {
    PrefetchIndex(next_keys, k);
    const BlockKey key = next_keys[k];
    const size_t pos = static_cast<size_t>(state.num_committed);
    const int32_t own = state.blocks[pos];
    const int32_t parent = pos == 0 ? kNone : state.blocks[pos - 1];
    AGENTKV_DCHECK(blocks_[static_cast<size_t>(own)].state == State::kUncommitted);
    // Most committed blocks are new: probe once, inserting `own` under `key` when absent.
    const int32_t existing = index_.FindOrInsert(
        key.value(), own, [this](uint32_t id) { return blocks_[static_cast<size_t>(id)].key; });
    if (existing == kNone) {
      Block& blk = blocks_[static_cast<size_t>(own)];
      blk.key = key.value();
      blk.state = State::kDevice;
      blk.priority = static_cast<uint8_t>(options_.default_priority);
      LinkChild(parent, own);
      if (next_use_ != nullptr) {
        next_use_heap_.SetDepth(own, parent == kNone ? 0 : next_use_heap_.depth(parent) + 1);
      }
      ++device_cached_;
      ++counters_.stored_blocks;
      // Key references name content: a block recomputed while its key is still referenced
      // is referenced again.
      if (!key_refs_.empty() && key_refs_.contains(key.value())) blk.key_referenced = true;
      Record(KvEventKind::kStored, blk, Tier::kDevice);
    } else if (blocks_[static_cast<size_t>(existing)].parent == parent) {
      // Another request computed this block first: share its copy and free ours. A host copy
      // is promoted into the slot ours occupied, so the device count is unchanged.
      Block& own_blk = blocks_[static_cast<size_t>(own)];
      own_blk.ref_count = 0;
      --held_blocks_;
      --device_used_;
      ReturnFreeBlock(own);
      if (blocks_[static_cast<size_t>(existing)].state == State::kHost) {
        Onboard(existing);
      } else {
        Hold(existing);
      }
      state.blocks[pos] = existing;
    } else {
      return AlreadyExistsError("request " + Str(request.value()) + " block " + Str(int64_t(pos)) +
                                ": key collides with a cached block of another prefix; " +
                                "the block stays uncommitted");
    }
    ++state.num_committed;
  }
  return Status::Ok();
}

StatusOr<CommittedChain> BlockCache::CommittedChainOf(RequestId request) const {
  auto it = requests_.find(request);
  if (it == requests_.end()) return NotFoundError("unknown request " + Str(request.value()));
  const internal::RequestState& state = it->second;
  CommittedChain chain;
  chain.keys.reserve(static_cast<size_t>(state.num_committed));
  for (int64_t i = 0; i < state.num_committed; ++i) {
    chain.keys.push_back(
        BlockKey(blocks_[static_cast<size_t>(state.blocks[static_cast<size_t>(i)])].key));
  }
  chain.reused_blocks = state.reused_blocks;
  return chain;
}

Status BlockCache::Release(RequestId request, const ReleaseRank& rank) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return NotFoundError("unknown request " + Str(request.value()));
  internal::RequestState& state = it->second;
  if (gap_order_.enabled() && !rank.session_ended) {
    // Set before the holds drop, so that Unhold queues each block with its new rank.
    const int64_t use = rank.last_use.value_or(clock_).ns();
    for (int64_t i = 0; i < state.num_committed; ++i) {
      const int32_t b = state.blocks[static_cast<size_t>(i)];
      gap_order_.set_last_use(b, std::max(gap_order_.last_use(b), use));
    }
  }
  if (state.retention.has_value()) {
    const RetentionConfig& config = *state.retention;
    for (int64_t i = 0; i < state.num_committed; ++i) {
      const BlockRetention r =
          RetentionForBlock(config, i, options_.tokens_per_block, state.prompt_tokens);
      if (r.priority.has_value()) {
        Reprioritize(state.blocks[static_cast<size_t>(i)], *r.priority, r.duration, false);
      }
    }
  }
  // Deepest first; the blocks that become unheld join the device queue together, in that order.
  released_.clear();
  for (size_t i = state.blocks.size(); i-- > 0;) {
    const int32_t b = state.blocks[i];
    Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.state == State::kUncommitted) {
      blk.ref_count = 0;
      --held_blocks_;
      --device_used_;
      ReturnFreeBlock(b);
    } else if (DropHold(b)) {
      released_.push_back(b);
    }
  }
  device_queue_.PushAll(blocks_, released_);
  if (gap_order_.enabled() && rank.session_ended && state.num_committed > 0) {
    RankUnneededFrom(state.blocks[static_cast<size_t>(state.num_committed - 1)]);
  }
  // A few spares cover the requests running at once in the common loop; more, or longer
  // ones, would only hold memory.
  constexpr size_t kMaxSpareBlockLists = 16;
  constexpr size_t kMaxSpareBlocks = size_t{1} << 16;
  if (spare_block_lists_.size() < kMaxSpareBlockLists &&
      state.blocks.capacity() <= kMaxSpareBlocks) {
    state.blocks.clear();
    spare_block_lists_.push_back(std::move(state.blocks));
  }
  requests_.erase(it);
  return Status::Ok();
}

void BlockCache::RankUnneeded(BlockKey tip) {
  if (!gap_order_.enabled()) return;
  const int32_t b = FindBlock(tip);
  if (b != kNone) RankUnneededFrom(b);
}

void BlockCache::RankUnneededFrom(int32_t tip) {
  constexpr int64_t kUnneeded = internal::GapOrderHeap::kUnneeded;
  int32_t below = kNone;
  for (int32_t b = tip; b != kNone; b = blocks_[static_cast<size_t>(b)].parent) {
    const Block& blk = blocks_[static_cast<size_t>(b)];
    // A running request holds it (and every block above it).
    if (blk.ref_count > 0) return;
    // Another path that is still needed extends it. (A held child has held ancestors, so the
    // walk never reaches the parent of a block being computed.)
    for (int32_t c = blk.first_child; c != kNone;
         c = blocks_[static_cast<size_t>(c)].next_sibling) {
      if (c != below && gap_order_.last_use(c) != kUnneeded) return;
    }
    gap_order_.set_last_use(b, kUnneeded);
    if (blk.state == State::kDevice) {
      gap_order_.Push(b, blk.queue_bucket());
    } else {
      // The host tier orders by recency: first there.
      host_queue_.Remove(blocks_, b);
      host_queue_.Push(blocks_, b, /*front=*/true);
    }
    below = b;
  }
}

void BlockCache::RequeueGapOrder(int32_t b, bool front) {
  if (front) gap_order_.set_last_use(b, internal::GapOrderHeap::kFirstInBucket);
  gap_order_.Push(b, blocks_[static_cast<size_t>(b)].queue_bucket());
}

Status BlockCache::SetPriority(BlockKey key, Priority priority,
                               std::optional<agentkv::Step> duration, bool evict_first) {
  if (priority < kMinPriority || priority > kMaxPriority) {
    return InvalidArgumentError("priority must be in [0, 100], got " + Str(priority));
  }
  if (duration.has_value() && duration->value() <= 0) {
    return InvalidArgumentError("duration must be > 0 steps, got " + Str(duration->value()));
  }
  const int32_t b = FindBlock(key);
  if (b == kNone)
    return NotFoundError("block " + Str(static_cast<int64_t>(key.value())) + " is not cached");
  Reprioritize(b, priority, duration, evict_first);
  return Status::Ok();
}

StatusOr<Priority> BlockCache::GetPriority(BlockKey key) const {
  const int32_t b = FindBlock(key);
  if (b == kNone) return NotFoundError("block is not cached");
  return static_cast<Priority>(blocks_[static_cast<size_t>(b)].priority);
}

std::optional<Tier> BlockCache::FindTier(BlockKey key) const {
  const int32_t b = FindBlock(key);
  if (b == kNone) return std::nullopt;
  return blocks_[static_cast<size_t>(b)].state == State::kHost ? Tier::kHost : Tier::kDevice;
}

void BlockCache::Step() { AdvanceSteps(1); }

void BlockCache::AdvanceSteps(int64_t n) {
  AGENTKV_CHECK_GE(n, 0);
  // Expiries pop in (step, scheduling) order, so one pass over n steps re-queues blocks in the
  // same order as n single steps: nothing else happens between them.
  step_ = step_ + agentkv::Step(n);
  expired_.clear();
  expiry_.PopExpired(step_, expired_);
  for (size_t i = 0; i < expired_.size(); ++i) {
    const int32_t b = expired_[i];
    blocks_[static_cast<size_t>(b)].expires = false;
    Reprioritize(b, options_.default_priority, std::nullopt, false);
    ++counters_.expirations;
  }
}

Status BlockCache::Reset() {
  if (!requests_.empty()) {
    return FailedPreconditionError("reset refused: " + Str(active_requests()) +
                                   " requests hold blocks");
  }
  device_queue_.Clear();
  host_queue_.Clear();
  expiry_.Clear();
  if (next_use_ != nullptr) next_use_heap_.Reset(blocks_.size());
  if (gap_order_.enabled()) gap_order_.Reset(blocks_.size());
  index_.Clear();
  free_head_ = kNone;
  free_count_ = 0;
  std::fill(blocks_.begin(), blocks_.end(), Block{});
  for (int64_t i = static_cast<int64_t>(blocks_.size()) - 1; i >= 0; --i) {
    ReturnFreeBlock(static_cast<int32_t>(i));
  }
  device_used_ = host_used_ = device_cached_ = held_blocks_ = 0;
  events_.Add(KvEvent{KvEventKind::kCleared, BlockKey(), Tier::kDevice, step_});
  return Status::Ok();
}

KvCacheStats BlockCache::stats() const {
  KvCacheStats s = counters_;
  s.device = TierGauges{options_.device_blocks, options_.device_blocks - device_used_, held_blocks_,
                        device_queue_.size(), device_cached_};
  s.host = TierGauges{options_.host_blocks, options_.host_blocks - host_used_, 0,
                      host_queue_.size(), host_used_};
  return s;
}

int64_t BlockCache::MetadataBytes() const {
  return static_cast<int64_t>(blocks_.capacity() * sizeof(Block)) + index_.MemoryBytes() +
         static_cast<int64_t>(sizeof(device_queue_) + sizeof(host_queue_)) +
         device_queue_.MemoryBytes() + host_queue_.MemoryBytes() + gap_order_.MemoryBytes();
}

// ---- Content, by key -------------------------------------------------------------------

bool BlockCache::ExtendedOutside(BlockId block, const std::unordered_set<BlockId>& blocks) const {
  for (int32_t c = BlockAt(block).first_child; c != kNone;
       c = blocks_[static_cast<size_t>(c)].next_sibling) {
    if (!blocks.contains(BlockId(c))) return true;
  }
  return false;
}

void BlockCache::SetBlockPriority(BlockId block, Priority priority) {
  AGENTKV_CHECK(priority >= kMinPriority && priority <= kMaxPriority);
  AGENTKV_DCHECK(blocks_[static_cast<size_t>(block.value())].state != State::kFree);
  Reprioritize(block.value(), priority, std::nullopt, /*front=*/false);
}

bool BlockCache::ReleaseIfUnused(BlockKey key) {
  const int32_t b = FindBlock(key);
  if (b == kNone) return false;
  const Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.ref_count > 0 || blk.first_child != kNone) return false;
  UnlinkChild(b);
  DropBlock(b, KvEventKind::kReleased, /*eviction=*/false);
  return true;
}

void BlockCache::ReferenceKey(BlockKey key) {
  if (++key_refs_[key.value()] != 1) return;
  const int32_t b = FindBlock(key);
  if (b != kNone) SetKeyReferenced(b, true, /*front=*/false);
}

void BlockCache::DereferenceKey(BlockKey key, bool evict_first) {
  auto ref = key_refs_.find(key.value());
  AGENTKV_CHECK(ref != key_refs_.end()) << "DereferenceKey of an unreferenced key";
  if (--ref->second > 0) return;
  key_refs_.erase(ref);
  const int32_t b = FindBlock(key);
  if (b != kNone) SetKeyReferenced(b, false, evict_first);
}

int32_t BlockCache::KeyReferences(BlockKey key) const {
  auto ref = key_refs_.find(key.value());
  return ref == key_refs_.end() ? 0 : ref->second;
}

void BlockCache::SetKeyReferenced(int32_t b, bool referenced, bool front) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.key_referenced == referenced) return;
  internal::PriorityLruQueue<Block>* queue = QueueOf(b);
  if (queue != nullptr) queue->Remove(blocks_, b);
  blk.key_referenced = referenced;
  if (queue != nullptr) queue->Push(blocks_, b, front);
  if (queue == &device_queue_ && gap_order_.enabled()) RequeueGapOrder(b, front);
}

// ---- Stall offload ---------------------------------------------------------------------

int64_t BlockCache::OffloadChain(std::span<const BlockKey> keys) {
  if (options_.host_blocks == 0 || next_use_ != nullptr) return 0;
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

// ---- Offline-optimal eviction ---------------------------------------------------------

Status BlockCache::SetNextUseRanking(const NextUseRanking* ranking) {
  if (options_.host_blocks > 0) {
    return InvalidArgumentError("a next-use ranking covers the device tier only; host_blocks is " +
                                Str(options_.host_blocks));
  }
  if (device_used_ > 0 || host_used_ > 0 || !requests_.empty()) {
    return FailedPreconditionError("a next-use ranking is set on an empty cache only");
  }
  if (gap_order_.enabled() && ranking != nullptr) {
    return InvalidArgumentError(
        "a next-use ranking replaces the eviction order; eviction_order is " +
        std::string(EvictionOrderName(options_.eviction_order)));
  }
  next_use_ = ranking;
  next_use_heap_.Reset(ranking == nullptr ? 0 : blocks_.size());
  return Status::Ok();
}

void BlockCache::RefreshNextUse(BlockKey key) {
  if (next_use_ == nullptr) return;
  const int32_t b = FindBlock(key);
  if (b == kNone || !next_use_heap_.queued(b)) return;
  // Never later than a cached child: evicting the block would take the child with it. (Children
  // of an evictable block are evictable, and device-resident without a host tier.)
  int64_t rank = next_use_->NextUse(key);
  for (int32_t c = blocks_[static_cast<size_t>(b)].first_child; c != kNone;
       c = blocks_[static_cast<size_t>(c)].next_sibling) {
    if (next_use_heap_.queued(c)) rank = std::min(rank, next_use_heap_.rank(c));
  }
  next_use_heap_.Push(b, rank, key.value());
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
    const int32_t victim = next_use_ != nullptr   ? next_use_heap_.Top()
                           : gap_order_.enabled() ? gap_order_.Top()
                                                  : device_queue_.Peek(blocks_);
    AGENTKV_CHECK(victim != kNone) << "MakeDeviceRoom without CanFreeDevice";
    EvictFromDevice(victim);
  }
  defer_index_erase_ = false;
  for (const auto& [key, b] : deferred_erase_) index_.Erase(key, b);
  deferred_erase_.clear();
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
  if (gap_order_.enabled()) gap_order_.ClearLastUse(b);
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
      (gap_order_.enabled() && gap_order_.last_use(victim) == internal::GapOrderHeap::kUnneeded)) {
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

void BlockCache::MoveToHost(int32_t b, bool eviction) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  AGENTKV_DCHECK(blk.state == State::kDevice && blk.ref_count == 0);
  device_queue_.Remove(blocks_, b);
  if (gap_order_.enabled()) gap_order_.Remove(b);
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
    if (next_use_ != nullptr) next_use_heap_.Remove(b);
    if (gap_order_.enabled()) gap_order_.Remove(b);
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
    if (next_use_ != nullptr) next_use_heap_.Remove(b);
    if (gap_order_.enabled()) gap_order_.Remove(b);
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
  if (gap_order_.enabled()) gap_order_.Push(b, blk.queue_bucket());
  if (next_use_ != nullptr) {
    next_use_heap_.Push(b, next_use_->NextUse(BlockKey(blk.key)), blk.key);
  }
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
  if (queue == &device_queue_ && gap_order_.enabled()) RequeueGapOrder(b, front);
}

}  // namespace agentkv::kv
