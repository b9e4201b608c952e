// BlockCache: the core of the engine-side KV cache: the block pool, the paged prefix index,
// the device and host tiers and priority eviction. KvCacheManager (kv_cache_manager.h) puts
// the agentic layers (SessionTable, ConversationRetention, SubagentDemotion) over it; they use
// only the "content" methods below, which name blocks by key, the identity of their content.
//
// It decides which KV blocks an engine keeps: a paged prefix index (one node per full block,
// keyed by chained BlockKeys), reference counts for blocks that running requests hold,
// priority-then-LRU eviction from the device tier, and a host (cold) tier that receives
// evicted blocks at or above the offload threshold. It stores no KV data, only the metadata
// an engine, the engine emulator or the simulator needs to account blocks exactly as a real
// engine would. Time is the scheduler step counter advanced by Step(); nothing reads a clock.
//
// Request lifecycle: AddRequest (match the prompt, hold the device prefix, onboard host
// blocks) -> Reserve (allocate blocks for new tokens, evicting as needed) -> Commit (enter
// full blocks into the prefix index) -> Release (drop the holds; the partial last block is
// freed, as vLLM and SGLang do: only full blocks are ever reused, so a turn's trailing
// partial block is recomputed by the next turn).
//
// Eviction unit. A block is never evicted while a resident block depends on it: evicting a
// block cascades to its dependents. A running request holds its whole chain, so every
// descendant of an unheld block is unheld (and queued at a priority no lower than the
// victim's): a cascade never touches a held block, and the victim's device descendants share
// its fate. When the victim is offloaded they move to the host with it, deepest first; when it
// is dropped, every dependent is dropped from both tiers. Under one priority a parent is
// always more recently used than its children (requests release deepest first), so plain LRU
// only ever picks leaves; cascades happen when a parent has a lower priority than a child.
//
// Eviction classes. A key reference (ReferenceKey) marks content a layer above still wants
// (an open session): a cached block whose key has one is evicted after every block whose key
// has none. References name keys, not slots: they outlive eviction and apply again to a
// block recomputed under the same key.
//
// Offline-optimal mode. Given a NextUseRanking (SetNextUseRanking), the device tier evicts by
// the caller's knowledge of the future instead (Belady's MIN: the evictable block needed
// farthest ahead, the deeper one on ties); priorities and eviction classes are then ignored.
// It is a bound for replays that know their whole request stream, not a serving policy.
//
// Gap-aware order (KvCacheOptions::eviction_order = kGapAware). Within an eviction class and a
// priority, device blocks leave by effective last use instead of recency: Release ranks a
// request's blocks by the time its caller says they count as last used (ReleaseRank: the finish
// less the pause its session is expected to take; the cache clock by default), a block several
// requests use keeps the latest such time (the soonest-needed user wins), and the blocks only
// an ended session used, or that a closing session dereferences, go first. Classes and
// priorities keep their precedence; with every rank equal to the release time it is LRU.
//
// The victim order (LRU, gap-aware or offline-optimal) is one of the small order classes of
// internal/victim_order.h, chosen once: at construction from eviction_order, or when a next-use
// ranking is set on the empty cache. The cache tells it each event (a block became evictable,
// was re-queued, was held again, a request released, a session ended) and asks it for victims;
// no call site tests which order runs.
//
// Payloads. A caller that keeps something per cached block (an engine adapter: the page of KV
// slots the engine computed the block in) may give each committed block one int64, its payload
// (Commit, SetPayload): Match reads the device prefix's payloads in the same walk, and every
// event carries the block's payload, so the adapter needs no table of its own. The cache never
// interprets a payload; a block stored without one has payload 0. The payload array is
// allocated the first time a payload is given (8 bytes per block); until then nothing costs.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Owns its arena; move-only. Deterministic: equal options and calls give
// equal results and events.
#ifndef AGENTKV_KV_BLOCK_CACHE_H_
#define AGENTKV_KV_BLOCK_CACHE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/base/huge_page_allocator.h"
#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/internal/block.h"
#include "agentkv/kv/internal/block_index.h"
#include "agentkv/kv/internal/event_log.h"
#include "agentkv/kv/internal/expiry_queue.h"
#include "agentkv/kv/internal/key_count_map.h"
#include "agentkv/kv/internal/priority_lru_queue.h"
#include "agentkv/kv/internal/victim_order.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/next_use_ranking.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

// The result of matching a chain of block keys against the cache.
struct PrefixMatch {
  // Leading blocks resident on the device.
  int64_t device_blocks = 0;
  // Blocks right after those that are resident on the host (to be onboarded before use).
  int64_t host_blocks = 0;

  int64_t total_blocks() const { return device_blocks + host_blocks; }
  friend bool operator==(const PrefixMatch&, const PrefixMatch&) = default;
};

// Where a match of a chain ended, kept so that the next match of the same chain resumes there
// (BlockCache::Match(keys, resume)). Opaque; a default value resumes nothing.
class MatchResume {
 private:
  friend class BlockCache;
  // The cache's count of removals and moves when this was filled (none: never filled).
  uint64_t removals_ = ~uint64_t{0};
  // How many keys were matched against, what was found, and the block of the last key found.
  size_t keys_ = 0;
  PrefixMatch match_;
  int32_t last_ = -1;
};

// A running request's committed blocks by key, as the layers above record them when it ends.
struct CommittedChain {
  // In chain order, the prefix matched at admission first.
  std::vector<BlockKey> keys;
  // Leading blocks the request found cached at admission (the prefix it reused).
  int64_t reused_blocks = 0;
};

// How Release ranks a finished request's committed blocks in the gap-aware eviction order
// (KvCacheOptions::eviction_order = kGapAware); ignored under LRU.
struct ReleaseRank {
  // When its blocks count as last used: the finish less the gap expected before the session's
  // next request (a block keeps the latest time any request gave it). Unset: the cache clock
  // (AdvanceClock), i.e. plain recency.
  std::optional<TimeNs> last_use;
  // The session ended with this request: RankUnneeded from its deepest committed block (the
  // blocks nothing else needs go first within their priority; the others keep their rank).
  bool session_ended = false;
};

class BlockCache {
 public:
  // Validates `options` (InvalidArgument naming the field) and builds an empty cache. Only
  // the block options are used here; the agentic ones belong to the layers above.
  static StatusOr<BlockCache> Create(const KvCacheOptions& options);

  BlockCache(BlockCache&&) = default;
  BlockCache& operator=(BlockCache&&) = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  const KvCacheOptions& options() const { return options_; }
  const BlockKeyHasher& hasher() const { return hasher_; }
  int32_t tokens_per_block() const { return options_.tokens_per_block; }

  // ---- Requests --------------------------------------------------------------------------

  // How many leading blocks of `keys` (a chain from one root) are on the device, and how
  // many after those are on the host. No side effects: recency and stats are unchanged.
  PrefixMatch Match(std::span<const BlockKey> keys) const;
  // Match, also appending to `device_payloads` the payloads of the matched device blocks,
  // in chain order.
  PrefixMatch Match(std::span<const BlockKey> keys, std::vector<int64_t>& device_payloads) const;
  // Match(keys), resumed where the match that filled `resume` ended when no cached block has
  // left the cache or changed tier since (every such change is counted): blocks are only added
  // meanwhile, so that match still holds and only the keys after it are looked up. A request
  // waiting at the head of the queue is matched every step; this makes those matches cost
  // the blocks committed since, not the whole prompt. Precondition: `keys` begins with the keys
  // `resume` was last filled with (the same chain, as long or longer); fills `resume`.
  PrefixMatch Match(std::span<const BlockKey> keys, MatchResume& resume) const;
  // stats().device_evictions and stats().onboards (an engine reads them around every step).
  int64_t device_evictions() const { return counters_.device_evictions; }
  int64_t onboards() const { return counters_.onboards; }
  // stats().device, without the copy of every counter (the scheduler reads it per admission).
  TierGauges device_gauges() const {
    return TierGauges{options_.device_blocks, options_.device_blocks - device_used_, held_blocks_,
                      device_queue_.size(), device_cached_};
  }

  // What AddRequest would refuse, checked without side effects: InvalidArgument for a
  // negative `prompt_tokens` or a bad retention config, AlreadyExists if `request` is active.
  Status CheckNewRequest(RequestId request, int64_t prompt_tokens,
                         const std::optional<RetentionConfig>& retention) const;

  // Starts `request` with the prompt's full-block keys `prompt_keys` (callers that must
  // recompute the last prompt token pass the keys of prompt[:-1]). Holds the device-resident
  // prefix and onboards the host-resident blocks after it, in order, while device blocks can
  // be freed for them; blocks that could not be onboarded count as uncached. Returns what the
  // request now holds: device_blocks = matched on the device, host_blocks = onboarded.
  // `prompt_tokens` splits prompt from decode blocks for `retention`, which Release applies.
  // Fails as CheckNewRequest does, with nothing changed.
  StatusOr<PrefixMatch> AddRequest(RequestId request, std::span<const BlockKey> prompt_keys,
                                   int64_t prompt_tokens = 0,
                                   const std::optional<RetentionConfig>& retention = std::nullopt);

  // Makes `request` hold enough blocks for `total_tokens` tokens, allocating the missing ones
  // and evicting (lowest priority first, LRU within a priority) when the device is full.
  // ResourceExhausted, with nothing changed, when the device cannot free enough blocks;
  // NotFound for an unknown request. Holding more already is a no-op.
  Status Reserve(RequestId request, int64_t total_tokens);

  // Evicts up to `blocks` unheld device blocks beyond those free, in the cache's own order,
  // exactly as an allocation that needed that much room would (offloads, cascades, events);
  // for an engine whose own allocator asks the cache for room. Returns the device blocks
  // freed: at least min(blocks, evictable) (a cascade may free more). Precondition:
  // blocks >= 0.
  int64_t EvictDevice(int64_t blocks);

  // Enters the request's next `next_keys.size()` full blocks into the prefix index, in order
  // after those already committed (the first call commits from block 0 on, after the matched
  // prefix, whose keys must not be repeated). A key already cached (another request computed
  // the same block) is shared: the request switches to the cached block and frees its own.
  // FailedPrecondition when the request holds fewer blocks; NotFound for an unknown request;
  // AlreadyExists when a key is cached under a different parent (a 64-bit key collision, or
  // keys not chained from this request's prefix): the keys before it stay committed, that
  // block and the ones after it stay uncommitted and are freed on Release.
  Status Commit(RequestId request, std::span<const BlockKey> next_keys);
  // Commit, giving each block a payload: `payloads[k]` for next_keys[k]. A newly stored
  // block, and a host copy promoted into the request's block, take it; a block already cached
  // on the device keeps its own (the caller frees its duplicate). InvalidArgument, with
  // nothing changed, unless the sizes are equal.
  Status Commit(RequestId request, std::span<const BlockKey> next_keys,
                std::span<const int64_t> payloads);

  // The committed blocks of the running `request`, by key. NotFound for an unknown request.
  StatusOr<CommittedChain> CommittedChainOf(RequestId request) const;

  // Ends `request`: applies its retention config to its committed blocks, drops its holds
  // (deepest block first, so parents stay more recent than children) and frees its
  // uncommitted blocks; in the gap-aware order, ranks its committed blocks by `rank`.
  // NotFound for an unknown request.
  Status Release(RequestId request, const ReleaseRank& rank = {});

  int64_t active_requests() const { return static_cast<int64_t>(requests_.size()); }
  bool RequestActive(RequestId request) const { return requests_.contains(request); }

  // ---- Content, by key: the interface of the agentic layers ------------------------------

  // Sets the retention priority of the cached block `key` and re-queues it (to the front of
  // its new bucket when `evict_first`, else to the back). A duration reverts it to the
  // default after that many steps. NotFound when not cached; InvalidArgument for a priority
  // outside [0, 100] or a non-positive duration.
  Status SetPriority(BlockKey key, Priority priority, std::optional<Step> duration = std::nullopt,
                     bool evict_first = false);

  // The priority of the cached block `key`, or NotFound.
  StatusOr<Priority> GetPriority(BlockKey key) const;
  // The tier the cached block `key` is in, or nullopt.
  std::optional<Tier> FindTier(BlockKey key) const;
  // Sets the payload of the cached block `key` (either tier; a block that changed tiers gets
  // the caller's new location). NotFound when not cached.
  Status SetPayload(BlockKey key, int64_t payload);
  // The payload of the cached block `key` (0 when none was given), or NotFound.
  StatusOr<int64_t> Payload(BlockKey key) const;
  // Every cached block of `tier` with its payload, in block-id order (a scan of the arena: for
  // checks and dumps, not per request).
  std::vector<std::pair<BlockKey, int64_t>> CachedPayloads(Tier tier) const;

  // The cached block `key`, or nullopt. The id stays valid until the next call that can
  // evict, drop or release a block (AddRequest, Reserve, Commit, Release, ReleaseIfUnused,
  // Reset); re-prioritizing and key references keep it.
  std::optional<BlockId> Find(BlockKey key) const {
    const int32_t b = FindBlock(key);
    if (b == kNoBlock) return std::nullopt;
    return BlockId(b);
  }
  BlockKey KeyOf(BlockId block) const { return BlockKey(BlockAt(block).key); }
  // Whether a cached child of `block` is not in `blocks`: another path extends it.
  bool ExtendedOutside(BlockId block, const std::unordered_set<BlockId>& blocks) const;
  // Gives `block` the retention priority `priority` with no duration (cancelling a pending
  // one) and re-queues it at the back of its new bucket. Precondition: priority in [0, 100].
  void SetBlockPriority(BlockId block, Priority priority);

  // Releases the cached block `key` when no request holds it and no cached block extends it
  // (a `released` event; not an eviction). Returns whether it did.
  bool ReleaseIfUnused(BlockKey key);

  // Adds a reference to `key`. The first one moves its cached block, if any, to the second
  // eviction class (the back of its bucket there).
  void ReferenceKey(BlockKey key);
  // Drops one reference to `key`. Precondition: it has one. The last one moves its cached
  // block, if any, back to the first eviction class, at the front of its bucket when
  // `evict_first`.
  void DereferenceKey(BlockKey key, bool evict_first);
  // The number of references to `key`.
  int32_t KeyReferences(BlockKey key) const;
  // The number of keys that have references.
  int64_t referenced_keys() const { return static_cast<int64_t>(key_refs_.size()); }

  // ---- Stall offload: tier moves ahead of demand (engine/stall_offload_policy.h) ---------

  // Moves to the host tier, ahead of demand, the device blocks of the chain `keys` (read from
  // its root, as Match reads it) that no running request holds and no other path needs on the
  // device: from the deepest device-resident block of the chain up, stopping at the first one
  // that is held, that a cached device block outside the chain extends (a fork: a shared
  // prefix stays on the device), whose priority is below the offload threshold (an eviction
  // would drop it), or when the host tier is full: a move ahead of demand only fills free host
  // room, it never evicts from the host. Each tier stays closed under prefixes. Counted in
  // stall_offloaded_blocks, not as evictions or offloads; `offloaded` events. Returns the
  // blocks moved: 0 without a host tier or in offline-optimal mode.
  int64_t OffloadChain(std::span<const BlockKey> keys);

  // Loads back to the device, ahead of a request, the host-resident blocks of the chain `keys`
  // that follow its device-resident prefix, in chain order, at most `max_blocks` of them, while
  // device room can be made (free blocks first, then evictions in the cache's own order, as an
  // allocation makes room; held blocks never move; the caller bounds what it may evict through
  // `max_blocks`). The blocks land unheld, the chain's root
  // the most recently used, as a released request leaves its chain. Counted in
  // prefetched_blocks, not onboards (no request waits for them); `onboarded` events. Returns
  // the blocks moved. Precondition: max_blocks >= 0.
  int64_t PrefetchChain(std::span<const BlockKey> keys, int64_t max_blocks);

  // Gap-aware order (a no-op under LRU): the session that used the cached block `tip` ended.
  // Walking up from `tip`, each block that no request holds and whose every cached child is
  // unneeded (or is the block just walked from) becomes unneeded: first in its bucket, until a
  // later release ranks it again. The first other block ends the walk: it and its ancestors
  // still serve a live path. An uncached `tip` is a no-op.
  void RankUnneeded(BlockKey tip);

  // ---- Offline-optimal eviction (next_use_ranking.h) -------------------------------------

  // Makes device evictions follow `ranking` (nullptr: back to priority and LRU). `ranking` is
  // not owned and must outlive its use; it is read when a block becomes evictable and by
  // RefreshNextUse. FailedPrecondition unless the cache is empty (no cached block, no active
  // request); InvalidArgument with a host tier (the mode covers the device tier only).
  Status SetNextUseRanking(const NextUseRanking* ranking);
  bool has_next_use_ranking() const {
    return std::holds_alternative<internal::NextUseOrder>(order_);
  }

  // Re-reads the ranking of the cached block `key` when it is evictable on the device (the
  // caller's rank for it changed); otherwise, or without a ranking, a no-op. The block is never
  // ranked later than one of its cached children (evicting it would take them along), so a
  // caller re-ranking a chain goes deepest first.
  void RefreshNextUse(BlockKey key);

  // ---- Time, reset, observability --------------------------------------------------------

  // Sets the caller's wall clock, which a Release without an explicit rank uses in the
  // gap-aware order. It never goes back: an earlier time is ignored.
  void AdvanceClock(TimeNs now) { clock_ = std::max(clock_, now); }
  TimeNs clock() const { return clock_; }

  // Advances the scheduler step by one and reverts expired retention priorities.
  void Step();
  // Advances by `n` steps at once, exactly as `n` calls to Step() would (for replays that
  // map idle time to steps). Precondition: n >= 0.
  void AdvanceSteps(int64_t n);
  agentkv::Step current_step() const { return step_; }

  // Removes every cached block from both tiers; key references stay. FailedPrecondition while
  // any request is active (held blocks are never dropped).
  Status Reset();

  // The block counters and tier gauges (the agentic counters are left zero).
  KvCacheStats stats() const;

  // Events recorded since the last call, oldest first (empty when the log is disabled). The
  // log keeps the newest `event_log_capacity` events; `dropped_events()` counts the rest.
  std::vector<KvEvent> TakeEvents() { return events_.Take(); }
  int64_t dropped_events() const { return events_.overflowed(); }

  // Verifies every invariant listed at the top of block_cache.cc and returns Internal naming
  // the first broken one.
  Status CheckInvariants() const;

  // Bytes of metadata allocated for blocks (arena, index, queues), for the per-block memory
  // target. Excludes per-request state.
  int64_t MetadataBytes() const;

 private:
  using Block = internal::Block;
  using State = internal::BlockState;
  static constexpr int32_t kNoBlock = -1;

  explicit BlockCache(const KvCacheOptions& options);

  int64_t BlocksForTokens(int64_t tokens) const;
  // The cached block `key`, or kNoBlock. Inline: the layers call it once per block they visit.
  int32_t FindBlock(BlockKey key) const {
    return index_.Find(key.value(),
                       [this](uint32_t id) { return blocks_[static_cast<size_t>(id)].key; });
  }
  // The cached block `block`. Precondition: committed (on either tier).
  const Block& BlockAt(BlockId block) const {
    const Block& blk = blocks_[static_cast<size_t>(block.value())];
    AGENTKV_DCHECK(blk.state == State::kDevice || blk.state == State::kHost);
    return blk;
  }
  // The committed child of `parent` (kNone: a chain's first block) keyed `key`, or kNone. The
  // parent's newest child is tried before the index: a chain committed in one piece links each
  // block to the next as its newest child.
  int32_t FindChild(int32_t parent, BlockKey key) const;
  // A walk down the tree along `keys`, one step per key, as a match does. While each block's
  // newest child is the next slot of the arena (a chain committed in one piece into consecutive
  // free slots) and is the one wanted, it follows the links and reads the arena in order, with
  // no index probe; from the first step where that fails it probes the index, prefetching a
  // window (PrefetchLookup) that starts there.
  class ChainWalk {
   public:
    explicit ChainWalk(std::span<const BlockKey> keys) : keys_(keys) {}
    // The block of keys[i] under `parent` (FindChild). Called with i = start, start + 1, ...
    int32_t Next(const BlockCache& cache, int32_t parent, size_t i);

   private:
    static constexpr size_t kFollowingLinks = SIZE_MAX;
    std::span<const BlockKey> keys_;
    // The position where the index window began, or kFollowingLinks.
    size_t window_start_ = kFollowingLinks;
  };
  PrefixMatch MatchChain(std::span<const BlockKey> keys,
                         std::vector<int64_t>* device_payloads) const;
  // Called at position `i` of a walk along `keys`: prefetches the index chunks of the keys
  // kPrefetchAhead positions on (at the start, of the first ones too).
  void PrefetchIndex(std::span<const BlockKey> keys, size_t i) const;
  // The same for a walk that reads the blocks it finds (a match): it also prefetches the block
  // each key's chunk names, once that chunk has had time to arrive. The walk's window began at
  // `start`, where the first chunks and blocks are prefetched all at once.
  void PrefetchLookup(std::span<const BlockKey> keys, size_t i, size_t start) const;

  // Device slots.
  bool CanFreeDevice(int64_t n) const;
  // Ensures `n` device blocks are free, evicting as needed. Precondition: CanFreeDevice(n).
  void MakeDeviceRoom(int64_t n);
  int32_t TakeFreeBlock();
  void ReturnFreeBlock(int32_t b);

  // Eviction and its cascades.
  bool Offloadable(const Block& blk) const;
  // Removes `victim` (an unheld device block) and its device descendants from the device.
  void EvictFromDevice(int32_t victim);
  // Removes `root` and every descendant from the cache; `root_kind` is the root's event.
  void DropSubtree(int32_t root, KvEventKind root_kind);
  // Removes the childless, unheld cached block `b` from the cache; `eviction` says whether
  // it left to make room (counted as an eviction and a drop) or was released.
  void DropBlock(int32_t b, KvEventKind kind, bool eviction = true);
  // Moves the unheld device block `b` to the host (making host room); `eviction` says whether
  // it left to make device room (an eviction and an offload) or ahead of demand (a stall
  // offload).
  void MoveToHost(int32_t b, bool eviction = true);
  // Moves the host block `b` to the device, held once (making device room); `prefetch` counts
  // it as a prefetch instead of an onboard.
  void Onboard(int32_t b, bool prefetch = false);

  // Tree links.
  void LinkChild(int32_t parent, int32_t child);
  void UnlinkChild(int32_t child);

  // Holds and queues.
  void Hold(int32_t b);
  void Unhold(int32_t b);
  // Unhold without the device queue: returns whether `b` became unheld, and then the caller
  // must push it there (Release pushes a request's blocks together).
  bool DropHold(int32_t b);
  // The eviction queue `b` is in, or nullptr (held, uncommitted or free).
  internal::PriorityLruQueue<Block>* QueueOf(int32_t b);
  void Reprioritize(int32_t b, Priority p, std::optional<agentkv::Step> duration, bool front);
  void SetKeyReferenced(int32_t b, bool referenced, bool front);
  // Tells the victim order that the cached block `tip`'s session ended (OnSessionEnded).
  void RankUnneededFrom(int32_t tip);

  // CheckInvariants, one named check each (block_cache_invariants.cc); the scan carries what
  // the earlier checks found to the later ones.
  struct InvariantScan;
  Status CheckFreeList(InvariantScan& scan) const;
  Status CheckQueues(InvariantScan& scan) const;
  Status CheckRequests(InvariantScan& scan) const;
  Status CheckBlocks(InvariantScan& scan) const;
  Status CheckBlockState(size_t i, InvariantScan& scan) const;
  Status CheckCommittedBlock(size_t i, InvariantScan& scan) const;
  Status CheckCounts(const InvariantScan& scan) const;

  // Logs an event when the log is enabled (one inline branch when it is not: eviction calls
  // this once per block).
  void Record(KvEventKind kind, const Block& b, Tier tier) {
    // Every kind but a store removes a block from the index or moves it between tiers.
    if (kind != KvEventKind::kStored) ++removals_;
    if (events_.enabled()) {
      events_.Add(KvEvent{kind, BlockKey(b.key), tier, step_, PayloadOf(&b - blocks_.data())});
    }
  }
  int64_t PayloadOf(ptrdiff_t b) const {
    return payloads_.empty() ? 0 : payloads_[static_cast<size_t>(b)];
  }
  // Allocates the payload array (all 0) if it is not yet.
  void EnsurePayloads();
  Status CommitBlocks(RequestId request, std::span<const BlockKey> next_keys,
                      std::span<const int64_t> payloads);

  KvCacheOptions options_;
  BlockKeyHasher hasher_;
  agentkv::Step step_;
  // Blocks that left the index or changed tier, ever (MatchResume).
  uint64_t removals_ = 0;

  std::vector<Block, HugePageAllocator<Block>> blocks_;
  // Each block's payload, by block id; empty until a payload is first given.
  std::vector<int64_t> payloads_;
  internal::BlockIndex index_;
  internal::PriorityLruQueue<Block> device_queue_{static_cast<int>(State::kDevice)};
  internal::PriorityLruQueue<Block> host_queue_{static_cast<int>(State::kHost)};
  internal::ExpiryQueue expiry_;
  // The victim order among the device queue's blocks (victim_order.h), and the caller's wall
  // clock, which the gap-aware order reads.
  internal::VictimOrder order_;
  TimeNs clock_;
  int32_t free_head_ = -1;
  int64_t free_count_ = 0;
  int64_t device_used_ = 0;  // kUncommitted + kDevice
  int64_t host_used_ = 0;    // kHost
  int64_t device_cached_ = 0;
  int64_t held_blocks_ = 0;  // device blocks with ref_count > 0

  std::unordered_map<RequestId, internal::RequestState> requests_;
  // Block lists of released requests, emptied, kept for the next requests: admitting one then
  // costs no allocation once the cache has run a while.
  std::vector<std::vector<int32_t>> spare_block_lists_;
  // Key -> number of references (ReferenceKey); looked up, never iterated where order matters.
  internal::KeyCountMap key_refs_;

  // Buffers of expiries and cascades, kept to avoid an allocation per step or eviction.
  std::vector<int32_t> expired_;
  std::vector<int32_t> offload_;
  std::vector<int32_t> cascade_;
  // The chain a stall offload or a prefetch walks.
  std::vector<int32_t> chain_;
  std::vector<int32_t> released_;
  // While MakeDeviceRoom evicts: the index entries (key, block) of the blocks dropped so far,
  // erased together when it ends.
  bool defer_index_erase_ = false;
  std::vector<std::pair<uint64_t, int32_t>> deferred_erase_;

  internal::EventLog events_;
  KvCacheStats counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_BLOCK_CACHE_H_
