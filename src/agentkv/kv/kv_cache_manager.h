// KvCacheManager: the engine-side paged KV block cache of agentkv.
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
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: equal options and calls give equal results and events.
#ifndef AGENTKV_KV_KV_CACHE_MANAGER_H_
#define AGENTKV_KV_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_index.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/committed_retention_handle.h"
#include "agentkv/kv/event_log.h"
#include "agentkv/kv/expiry_queue.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/priority_lru_queue.h"
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

// Per-request inputs of AddRequest.
struct RequestOptions {
  // Prompt length in tokens; blocks starting at or after it are decode blocks for retention.
  int64_t prompt_tokens = 0;
  // Retention priorities of this request's blocks; unset leaves reused blocks' priorities
  // alone and gives new blocks the cache default.
  std::optional<RetentionConfig> retention;
  // SGLang's top-level session_id: when the request ends, every block it used is referenced
  // by this session until the session closes. The first request of a session opens it; a
  // request of a closed session references nothing. Unset: no session.
  std::optional<SessionId> session;
  // The conversation this request is a turn of (per_conversation retention, sub-agents).
  std::optional<ConversationId> conversation;
  // Sub-agent affinity hint: `conversation` is a child of this conversation. Honoured only
  // when `parent_hint_authenticated`; otherwise ignored and counted.
  std::optional<ConversationId> parent_conversation;
  bool parent_hint_authenticated = false;
};

class KvCacheManager {
 public:
  // Validates `options` (InvalidArgument naming the field) and builds an empty cache.
  static StatusOr<KvCacheManager> Create(const KvCacheOptions& options);

  KvCacheManager(KvCacheManager&&) = default;
  KvCacheManager& operator=(KvCacheManager&&) = default;
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  const KvCacheOptions& options() const { return options_; }
  const BlockKeyHasher& hasher() const { return hasher_; }
  int32_t tokens_per_block() const { return options_.tokens_per_block; }

  // How many leading blocks of `keys` (a chain from one root) are on the device, and how
  // many after those are on the host. No side effects: recency and stats are unchanged.
  PrefixMatch Match(std::span<const BlockKey> keys) const;

  // Starts `request` with the prompt's full-block keys `prompt_keys` (callers that must
  // recompute the last prompt token pass the keys of prompt[:-1]). Holds the device-resident
  // prefix and onboards the host-resident blocks after it, in order, while device blocks can
  // be freed for them; blocks that could not be onboarded count as uncached. Returns what the
  // request now holds: device_blocks = matched on the device, host_blocks = onboarded.
  // AlreadyExists if `request` is active; InvalidArgument for a bad retention config or a
  // negative prompt_tokens.
  StatusOr<PrefixMatch> AddRequest(RequestId request, std::span<const BlockKey> prompt_keys,
                                   const RequestOptions& options = {});

  // Makes `request` hold enough blocks for `total_tokens` tokens, allocating the missing ones
  // and evicting (lowest priority first, LRU within a priority) when the device is full.
  // ResourceExhausted, with nothing changed, when the device cannot free enough blocks;
  // NotFound for an unknown request. Holding more already is a no-op.
  Status Reserve(RequestId request, int64_t total_tokens);

  // Enters the request's next `next_keys.size()` full blocks into the prefix index, in order
  // after those already committed (the first call commits from block 0 on, after the matched
  // prefix, whose keys must not be repeated). A key already cached (another request computed
  // the same block) is shared: the request switches to the cached block and frees its own.
  // FailedPrecondition when the request holds fewer blocks; NotFound for an unknown request;
  // AlreadyExists when a key is cached under a different parent (a 64-bit key collision, or
  // keys not chained from this request's prefix): the keys before it stay committed, that
  // block and the ones after it stay uncommitted and are freed on Release.
  Status Commit(RequestId request, std::span<const BlockKey> next_keys);

  // Ends `request`: applies its retention config to its committed blocks, drops its holds
  // (deepest block first, so parents stay more recent than children) and frees its
  // uncommitted blocks. NotFound for an unknown request.
  Status Release(RequestId request);

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

  // Closes `session` on this engine. Release mode (KvCacheOptions::session_close_mode) first
  // frees every block only this session references, that no running request holds and that
  // no other cached block depends on: its unique chains, leaf up to the first block another
  // session, request or path shares. Both modes then drop the session's references, so its
  // remaining blocks return to the normal eviction order (first among the blocks no open
  // session references). Idempotent: an unknown or closed id is a no-op returning 0, and is
  // remembered (bounded) so that a late request of it references nothing. Returns the
  // tokens freed.
  int64_t CloseSession(SessionId session);
  bool SessionOpen(SessionId session) const { return sessions_.contains(session); }

  // Plans a retention change for the committed blocks `conversation` computed itself, from
  // its retained turn records: never the prefix it reused, never a block another path extends
  // (the plan stops at a fork), each block once, deepest first. Empty for an unknown
  // conversation or one without records (policy default keeps none).
  CommittedRetentionHandle PlanCommittedRetention(ConversationId conversation) const;
  // Gives `priority` to the planned blocks that are still cached and still not extended by
  // another path (re-checked now), re-queueing each. Blocks evicted since the plan are
  // skipped. Returns the number of blocks changed and, when `applied_keys` is given, appends
  // their keys to it. Precondition: priority in [0, 100].
  int64_t ApplyCommittedRetention(const CommittedRetentionHandle& handle, Priority priority,
                                  std::vector<BlockKey>* applied_keys = nullptr);

  // Advances the scheduler step by one and reverts expired retention priorities.
  void Step();
  // Advances by `n` steps at once, exactly as `n` calls to Step() would (for replays that
  // map idle time to steps). Precondition: n >= 0.
  void AdvanceSteps(int64_t n);
  agentkv::Step current_step() const { return step_; }

  // Removes every cached block from both tiers. FailedPrecondition while any request is
  // active (held blocks are never dropped).
  Status Reset();

  // Counters and current gauges.
  KvCacheStats stats() const;
  int64_t active_requests() const { return static_cast<int64_t>(requests_.size()); }

  // Events recorded since the last call, oldest first (empty when the log is disabled). The
  // log keeps the newest `event_log_capacity` events; `dropped_events()` counts the rest.
  std::vector<KvEvent> TakeEvents() { return events_.Take(); }
  int64_t dropped_events() const { return events_.overflowed(); }

  // Verifies every internal invariant and returns Internal naming the first broken one: each
  // block is in exactly one state; counts conserve per tier; the eviction queues hold exactly
  // the evictable blocks, each in the bucket of its priority; the prefix index maps exactly
  // the cached blocks; each cached block's parent is resident (device blocks: on the device);
  // a held block's parent is held at least as often.
  Status CheckInvariants() const;

  // Bytes of metadata the manager allocated for its blocks (arena, index, queues), for the
  // per-block memory target. Excludes per-request state.
  int64_t MetadataBytes() const;

 private:
  enum class State : uint8_t {
    kFree,         // In the free list; no key.
    kUncommitted,  // On the device, held by one request, not in the prefix index.
    kDevice,       // Committed, on the device (held, or in the device eviction queue).
    kHost,         // Committed, on the host (in the host eviction queue).
  };

  // One arena slot, 40 bytes. Links are BlockId values; -1 means none.
  struct Block {
    uint64_t key = 0;
    int32_t parent = -1;
    // Eviction-queue or free-list links (a block is in at most one list).
    int32_t prev = -1;
    int32_t next = -1;
    // Children in the prefix tree (committed blocks of either tier), newest first.
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t prev_sibling = -1;
    int32_t ref_count = 0;
    uint8_t priority = kDefaultPriority;
    State state = State::kFree;
    // Whether expiry_ holds a pending expiry for this block (spares the lookup otherwise).
    bool expires = false;
    // Whether an open session references this block's key (its eviction class).
    bool session_referenced = false;

    // Eviction class, then priority: unreferenced blocks go before session-referenced ones.
    int queue_bucket() const { return (session_referenced ? kNumPriorities : 0) + priority; }
  };

  static_assert(sizeof(Block) == 40, "keep per-block metadata small: 40 B + 12-24 B of index");

  struct RequestState {
    // Held blocks in sequence order: committed ones first, then uncommitted.
    std::vector<int32_t> blocks;
    int64_t num_committed = 0;
    // Blocks found cached at admission: the prefix this request reused.
    int64_t reused_blocks = 0;
    RequestOptions options;
  };

  struct SessionState {
    // Keys this session references, in the order it first referenced them (ancestors
    // before descendants), and the same set for membership.
    std::vector<BlockKey> keys;
    std::unordered_set<uint64_t> members;
  };

  // The blocks one finished turn used, in chain order; those from `first_owned` on are the
  // ones its conversation computed itself, in this turn or an earlier retained one.
  struct TurnRecord {
    std::vector<BlockKey> keys;
    size_t first_owned = 0;
  };

  struct ConversationState {
    std::optional<ConversationId> parent;
    // Registered sub-agents, in arrival order (rank-identical).
    std::vector<ConversationId> children;
    int64_t in_flight = 0;
    // The step at which its last request ended.
    agentkv::Step last_context_end;
    bool demoted = false;
    CommittedRetentionHandle demotion;
    // The last max_num_turns turns (per_conversation only), oldest first.
    std::deque<TurnRecord> records;
  };

  explicit KvCacheManager(const KvCacheOptions& options);

  int64_t BlocksForTokens(int64_t tokens) const;
  int32_t FindChild(int32_t parent, BlockKey key) const;

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
  // Releases the unheld, childless cached block `key` if there is one; returns whether.
  bool ReleaseIfUnused(BlockKey key);
  int32_t FindBlock(BlockKey key) const;

  // Sessions, conversations, sub-agents (kv_cache_agentic.cc).
  void AdmitToSessionAndConversation(const RequestOptions& options);
  void ReferenceFromSession(const RequestState& state);
  void RecordConversationTurn(const RequestState& state);
  void DemoteFinishedChildren(ConversationState& parent);
  void SetSessionReferenced(int32_t b, bool referenced, bool front);
  // Whether a cached child of `b` is not in `set`: another path extends `b`.
  bool HasChildOutside(int32_t b, const std::unordered_set<int32_t>& set) const;
  // The eviction queue `b` is in, or nullptr (held, uncommitted or free).
  PriorityLruQueue<Block>* QueueOf(int32_t b);
  void Tombstone(SessionId session);
  void MoveToHost(int32_t b);
  void Onboard(int32_t b);

  // Tree links.
  void LinkChild(int32_t parent, int32_t child);
  void UnlinkChild(int32_t child);

  // Holds and queues.
  void Hold(int32_t b);
  void Unhold(int32_t b);
  void Enqueue(int32_t b, bool front);
  void Dequeue(int32_t b);
  void Reprioritize(int32_t b, Priority p, std::optional<agentkv::Step> duration, bool front);

  void Record(KvEventKind kind, const Block& b, Tier tier);

  KvCacheOptions options_;
  BlockKeyHasher hasher_;
  agentkv::Step step_;

  std::vector<Block> blocks_;
  BlockIndex index_;
  PriorityLruQueue<Block> device_queue_;
  PriorityLruQueue<Block> host_queue_;
  ExpiryQueue expiry_;
  int32_t free_head_ = -1;
  int64_t free_count_ = 0;
  int64_t device_used_ = 0;  // kUncommitted + kDevice
  int64_t host_used_ = 0;    // kHost
  int64_t device_cached_ = 0;
  int64_t held_blocks_ = 0;  // device blocks with ref_count > 0

  std::unordered_map<RequestId, RequestState> requests_;

  // Maps below are looked up, never iterated where order matters: every ordered walk goes over
  // a vector or deque, so outcomes do not depend on hash order.
  std::unordered_map<SessionId, SessionState> sessions_;
  // Key -> number of open sessions referencing it.
  std::unordered_map<uint64_t, int32_t> session_refs_;
  std::deque<SessionId> tombstone_order_;
  std::unordered_set<SessionId> tombstones_;
  std::unordered_map<ConversationId, ConversationState> conversations_;
  // Key -> number of retained turn records (of any conversation) that used it.
  std::unordered_map<uint64_t, int32_t> record_uses_;
  // Buffers of expiries and cascades, kept to avoid an allocation per step or eviction.
  std::vector<int32_t> expired_;
  std::vector<int32_t> offload_;
  std::vector<int32_t> cascade_;

  EventLog events_;
  KvCacheStats counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_KV_CACHE_MANAGER_H_
