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
#include <span>
#include <string>
#include <variant>

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
      order_(internal::MakeVictimOrder(
          options.eviction_order, nullptr,
          static_cast<size_t>(options.device_blocks + options.host_blocks))),
      events_(options.event_log_capacity) {
  const int64_t total = options.device_blocks + options.host_blocks;
  blocks_.resize(static_cast<size_t>(total));
  for (int64_t i = total - 1; i >= 0; --i) ReturnFreeBlock(static_cast<int32_t>(i));
  counters_.device.capacity = options.device_blocks;
  counters_.host.capacity = options.host_blocks;
}

int64_t BlockCache::BlocksForTokens(int64_t tokens) const {
  return (tokens + options_.tokens_per_block - 1) / options_.tokens_per_block;
}

int32_t BlockCache::FindChild(int32_t parent, BlockKey key) const {
  if (parent != kNone) {
    const int32_t newest = blocks_[static_cast<size_t>(parent)].first_child;
    if (newest != kNone && blocks_[static_cast<size_t>(newest)].key == key.value()) return newest;
  }
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

int32_t BlockCache::ChainWalk::Next(const BlockCache& cache, int32_t parent, size_t i) {
  if (window_start_ == kFollowingLinks) {
    // A chain's first block has no parent to follow: one probe, no window.
    if (parent == kNone) return cache.FindChild(parent, keys_[i]);
    const int32_t newest = cache.blocks_[static_cast<size_t>(parent)].first_child;
    if (newest == parent + 1 &&
        cache.blocks_[static_cast<size_t>(newest)].key == keys_[i].value()) {
      return newest;
    }
    window_start_ = i;
  }
  cache.PrefetchLookup(keys_, i, window_start_);
  return cache.FindChild(parent, keys_[i]);
}

void BlockCache::PrefetchLookup(std::span<const BlockKey> keys, size_t i, size_t start) const {
  if (blocks_.size() < kPrefetchMinBlocks) return;
  // Index chunks kSlotsAhead keys ahead, blocks kBlocksAhead ahead (their chunks were
  // prefetched kSlotsAhead - kBlocksAhead keys ago). A match does little per block, so it reaches
  // further ahead than a commit.
  constexpr size_t kSlotsAhead = 4 * kPrefetchAhead;
  constexpr size_t kBlocksAhead = 2 * kPrefetchAhead;
  if (i == start) {
    // The head of the window: its chunks all at once, then the blocks they name (these loads
    // wait for the chunks, but together, not one per block).
    for (size_t j = i; j < i + kSlotsAhead && j < keys.size(); ++j) {
      index_.Prefetch(keys[j].value());
    }
    for (size_t j = i; j < i + kBlocksAhead && j < keys.size(); ++j) {
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
  std::vector<int64_t>* no_payloads = nullptr;
  return MatchChain(keys, no_payloads);
}

PrefixMatch BlockCache::Match(std::span<const BlockKey> keys,
                              std::vector<int64_t>& device_payloads) const {
  return MatchChain(keys, &device_payloads);
}

PrefixMatch BlockCache::Match(std::span<const BlockKey> keys, MatchResume& resume) const {
  PrefixMatch match;
  int32_t parent = kNone;
  size_t i = 0;
  size_t end = keys.size();
  bool device_phase = true;
  if (resume.removals_ == removals_ && keys.size() >= resume.keys_) {
    // Nothing left or moved since: the previous match holds. Only where it ran out of keys, or
    // where its device prefix met an absent block (one committed since extends it), can it
    // now go further; a host run that met anything else still stops there.
    match = resume.match_;
    parent = resume.last_;
    i = static_cast<size_t>(match.total_blocks());
    if (match.host_blocks > 0) {
      device_phase = false;
      if (i < resume.keys_) end = i;
    }
  }
  if (device_phase) {
    ChainWalk walk(keys);
    for (; i < end; ++i) {
      const int32_t b = walk.Next(*this, parent, i);
      if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kDevice) break;
      parent = b;
    }
    match.device_blocks = static_cast<int64_t>(i);
  }
  for (; i < end; ++i) {
    const int32_t b = FindChild(parent, keys[i]);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kHost) break;
    parent = b;
  }
  match.host_blocks = static_cast<int64_t>(i) - match.device_blocks;
  resume.removals_ = removals_;
  resume.keys_ = keys.size();
  resume.match_ = match;
  resume.last_ = parent;
  return match;
}

PrefixMatch BlockCache::MatchChain(std::span<const BlockKey> keys,
                                   std::vector<int64_t>* device_payloads) const {
  PrefixMatch match;
  int32_t parent = kNone;
  size_t i = 0;
  ChainWalk walk(keys);
  for (; i < keys.size(); ++i) {
    const int32_t b = walk.Next(*this, parent, i);
    if (b == kNone || blocks_[static_cast<size_t>(b)].state != State::kDevice) break;
    if (device_payloads != nullptr) device_payloads->push_back(PayloadOf(b));
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
  ChainWalk walk(prompt_keys);
  for (; i < prompt_keys.size(); ++i) {
    const int32_t b = walk.Next(*this, parent, i);
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
  return CommitBlocks(request, next_keys, {});
}

Status BlockCache::Commit(RequestId request, std::span<const BlockKey> next_keys,
                          std::span<const int64_t> payloads) {
  if (payloads.size() != next_keys.size()) {
    return InvalidArgumentError("commit: " + Str(static_cast<int64_t>(next_keys.size())) +
                                " keys but " + Str(static_cast<int64_t>(payloads.size())) +
                                " payloads");
  }
  if (!next_keys.empty()) EnsurePayloads();
  return CommitBlocks(request, next_keys, payloads);
}

void BlockCache::EnsurePayloads() {
  if (payloads_.empty()) payloads_.assign(blocks_.size(), 0);
}

Status BlockCache::SetPayload(BlockKey key, int64_t payload) {
  const int32_t b = FindBlock(key);
  if (b == kNoBlock)
    return NotFoundError("block " + Str(static_cast<int64_t>(key.value())) + " is not cached");
  EnsurePayloads();
  payloads_[static_cast<size_t>(b)] = payload;
  return Status::Ok();
}

StatusOr<int64_t> BlockCache::Payload(BlockKey key) const {
  const int32_t b = FindBlock(key);
  if (b == kNoBlock)
    return NotFoundError("block " + Str(static_cast<int64_t>(key.value())) + " is not cached");
  return PayloadOf(b);
}

std::vector<std::pair<BlockKey, int64_t>> BlockCache::CachedPayloads(Tier tier) const {
  const State want = tier == Tier::kDevice ? State::kDevice : State::kHost;
  std::vector<std::pair<BlockKey, int64_t>> out;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].state == want) {
      out.emplace_back(BlockKey(blocks_[b].key), PayloadOf(static_cast<ptrdiff_t>(b)));
    }
  }
  return out;
}

Status BlockCache::CommitBlocks(RequestId request, std::span<const BlockKey> next_keys,
                                std::span<const int64_t> payloads) {
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
      if (!payloads_.empty())
        payloads_[static_cast<size_t>(own)] = payloads.empty() ? 0 : payloads[k];
      blk.key = key.value();
      blk.state = State::kDevice;
      blk.priority = static_cast<uint8_t>(options_.default_priority);
      LinkChild(parent, own);
      std::visit([&](auto& order) { order.OnCommitted(own, parent); }, order_);
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
        if (!payloads.empty()) payloads_[static_cast<size_t>(existing)] = payloads[k];
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
  if (!rank.session_ended) {
    // Before the holds drop, so that the order queues each block with its new rank.
    const std::span<const int32_t> committed(state.blocks.data(),
                                             static_cast<size_t>(state.num_committed));
    const TimeNs use = rank.last_use.value_or(clock_);
    std::visit([&](auto& order) { order.OnReleasing(committed, use); }, order_);
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
  if (rank.session_ended && state.num_committed > 0) {
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
  ++removals_;
  device_queue_.Clear();
  host_queue_.Clear();
  expiry_.Clear();
  std::visit([&](auto& order) { order.Reset(blocks_.size()); }, order_);
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
  s.device = device_gauges();
  s.host = TierGauges{options_.host_blocks, options_.host_blocks - host_used_, 0,
                      host_queue_.size(), host_used_};
  return s;
}

int64_t BlockCache::MetadataBytes() const {
  return static_cast<int64_t>(blocks_.capacity() * sizeof(Block)) + index_.MemoryBytes() +
         static_cast<int64_t>(payloads_.capacity() * sizeof(int64_t)) +
         static_cast<int64_t>(sizeof(device_queue_) + sizeof(host_queue_)) +
         device_queue_.MemoryBytes() + host_queue_.MemoryBytes() +
         std::visit([](const auto& order) { return order.MemoryBytes(); }, order_);
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
  if (key_refs_.Increment(key.value()) != 1) return;
  const int32_t b = FindBlock(key);
  if (b != kNone) SetKeyReferenced(b, true, /*front=*/false);
}

void BlockCache::DereferenceKey(BlockKey key, bool evict_first) {
  AGENTKV_CHECK(key_refs_.contains(key.value())) << "DereferenceKey of an unreferenced key";
  if (key_refs_.Decrement(key.value()) > 0) return;
  const int32_t b = FindBlock(key);
  if (b != kNone) SetKeyReferenced(b, false, evict_first);
}

int32_t BlockCache::KeyReferences(BlockKey key) const { return key_refs_.count(key.value()); }

void BlockCache::SetKeyReferenced(int32_t b, bool referenced, bool front) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.key_referenced == referenced) return;
  internal::PriorityLruQueue<Block>* queue = QueueOf(b);
  if (queue != nullptr) queue->Remove(blocks_, b);
  blk.key_referenced = referenced;
  if (queue != nullptr) queue->Push(blocks_, b, front);
  if (queue == &device_queue_) {
    std::visit([&](auto& order) { order.OnRequeued(b, blk, front); }, order_);
  }
}

}  // namespace agentkv::kv
