// KvCacheManager: the engine-side paged KV block cache of agentkv, as the rest of the code
// uses it (engine::StepScheduler, the simulator, the engine emulator, benchmarks).
//
// A facade over four units, each with its own contract: BlockCache (block_cache.h), the core
// (block pool, paged prefix index, device and host tiers, priority eviction, the request
// lifecycle), and the agentic layers over it: SessionTable (session_table.h, SGLang's session
// radix cache), ConversationRetention (conversation_retention.h, per-conversation retention
// records and CommittedRetentionHandles) and SubagentDemotion (subagent_demotion.h,
// finished-sub-agent demotion). The layers see the core only through its by-key content
// methods; this class routes each request's session and conversation to them at admission and
// release, in the order their contracts require. See block_cache.h for the cache's model
// (lifecycle, eviction unit, eviction classes).
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Move-only. Deterministic: equal options and calls give equal results and
// events.
#ifndef AGENTKV_KV_KV_CACHE_MANAGER_H_
#define AGENTKV_KV_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/committed_retention_handle.h"
#include "agentkv/kv/conversation_retention.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/next_use_ranking.h"
#include "agentkv/kv/pause_estimator.h"
#include "agentkv/kv/retention.h"
#include "agentkv/kv/session_table.h"
#include "agentkv/kv/subagent_demotion.h"

namespace agentkv::kv {

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
  // Gap-aware retention (KvCacheOptions::eviction_order = kGapAware): what the session does
  // after this request (the response calls a tool, starts sub-agents, ends the turn, or the
  // session ends), and the tool's name where known (empty otherwise). kUnknown: the request's
  // blocks rank by plain recency. Ignored under LRU. On an engine this is the request's one
  // pause hint: the engine's stall offload reads it too (engine::Engine::Submit).
  PauseKind next_pause = PauseKind::kUnknown;
  std::string next_tool;
  // When the request reached the engine; the pause before it is measured from its session's
  // previous finish to this. Unset: the cache clock at AddRequest. Used in the gap-aware
  // order only.
  std::optional<TimeNs> arrival;
};

class KvCacheManager {
 public:
  // Validates `options` (InvalidArgument naming the field) and builds an empty cache.
  static StatusOr<KvCacheManager> Create(const KvCacheOptions& options);

  KvCacheManager(KvCacheManager&&) = default;
  KvCacheManager& operator=(KvCacheManager&&) = default;
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  const KvCacheOptions& options() const { return cache_.options(); }
  const BlockKeyHasher& hasher() const { return cache_.hasher(); }
  int32_t tokens_per_block() const { return cache_.tokens_per_block(); }

  // How many leading blocks of `keys` (a chain from one root) are on the device, and how
  // many after those are on the host. No side effects: recency and stats are unchanged.
  PrefixMatch Match(std::span<const BlockKey> keys) const { return cache_.Match(keys); }
  // Match, appending the matched device blocks' payloads (BlockCache: "Payloads").
  PrefixMatch Match(std::span<const BlockKey> keys, std::vector<int64_t>& device_payloads) const {
    return cache_.Match(keys, device_payloads);
  }
  // Match, resumed where the last match of the same chain ended (BlockCache::Match).
  PrefixMatch Match(std::span<const BlockKey> keys, MatchResume& resume) const {
    return cache_.Match(keys, resume);
  }

  // Starts `request` with the prompt's full-block keys `prompt_keys` (callers that must
  // recompute the last prompt token pass the keys of prompt[:-1]). Holds the device-resident
  // prefix and onboards the host-resident blocks after it, in order, while device blocks can
  // be freed for them; blocks that could not be onboarded count as uncached. Returns what the
  // request now holds: device_blocks = matched on the device, host_blocks = onboarded.
  // A session is opened, and a conversation registered (parent hint) and restored or made to
  // demote its finished children, before the prompt is matched. AlreadyExists if `request`
  // is active; InvalidArgument for a bad retention config or a negative prompt_tokens; on
  // failure nothing changes.
  StatusOr<PrefixMatch> AddRequest(RequestId request, std::span<const BlockKey> prompt_keys,
                                   const RequestOptions& options = {});

  // Makes `request` hold enough blocks for `total_tokens` tokens, allocating the missing ones
  // and evicting (lowest priority first, LRU within a priority) when the device is full.
  // ResourceExhausted, with nothing changed, when the device cannot free enough blocks;
  // NotFound for an unknown request. Holding more already is a no-op.
  Status Reserve(RequestId request, int64_t total_tokens) {
    return cache_.Reserve(request, total_tokens);
  }

  // Enters the request's next `next_keys.size()` full blocks into the prefix index, in order
  // after those already committed (the first call commits from block 0 on, after the matched
  // prefix, whose keys must not be repeated). A key already cached (another request computed
  // the same block) is shared: the request switches to the cached block and frees its own.
  // FailedPrecondition when the request holds fewer blocks; NotFound for an unknown request;
  // AlreadyExists when a key is cached under a different parent (a 64-bit key collision, or
  // keys not chained from this request's prefix): the keys before it stay committed, that
  // block and the ones after it stay uncommitted and are freed on Release.
  Status Commit(RequestId request, std::span<const BlockKey> next_keys) {
    return cache_.Commit(request, next_keys);
  }
  // Commit, giving each block a payload (BlockCache::Commit).
  Status Commit(RequestId request, std::span<const BlockKey> next_keys,
                std::span<const int64_t> payloads) {
    return cache_.Commit(request, next_keys, payloads);
  }
  Status SetPayload(BlockKey key, int64_t payload) { return cache_.SetPayload(key, payload); }
  // BlockCache::EvictDevice.
  int64_t EvictDevice(int64_t blocks) { return cache_.EvictDevice(blocks); }
  StatusOr<int64_t> Payload(BlockKey key) const { return cache_.Payload(key); }
  std::vector<std::pair<BlockKey, int64_t>> CachedPayloads(Tier tier) const {
    return cache_.CachedPayloads(tier);
  }

  // Ends `request`: applies its retention config to its committed blocks, drops its holds
  // (deepest block first, so parents stay more recent than children) and frees its
  // uncommitted blocks. Its session, if still open, references every block it committed
  // (late_session_requests counts one that closed meanwhile); under per_conversation its
  // conversation records the turn, which may release the blocks of a turn that falls out.
  // In the gap-aware order its blocks count as used at the clock less the gap estimated for
  // its next_pause (BlockCache::ReleaseRank), or, when its session ended, its own blocks go
  // first; the pause is remembered for its session (else conversation), whose next
  // AddRequest measures it. NotFound for an unknown request.
  Status Release(RequestId request);
  // Release for a request that did not finish and will run again or never (a retraction, an
  // admission undone for lack of room, an abort): the same, except that in the gap-aware order
  // its next_pause is ignored (its blocks rank by plain recency, no pause is recorded and a
  // session_end hint ends nothing). NotFound for an unknown request.
  Status ReleaseUnfinished(RequestId request);

  // Sets the retention priority of the cached block `key` and re-queues it (to the front of
  // its new bucket when `evict_first`, else to the back). A duration reverts it to the
  // default after that many steps. NotFound when not cached; InvalidArgument for a priority
  // outside [0, 100] or a non-positive duration.
  Status SetPriority(BlockKey key, Priority priority, std::optional<Step> duration = std::nullopt,
                     bool evict_first = false) {
    return cache_.SetPriority(key, priority, duration, evict_first);
  }

  // The priority of the cached block `key`, or NotFound.
  StatusOr<Priority> GetPriority(BlockKey key) const { return cache_.GetPriority(key); }
  // The tier the cached block `key` is in, or nullopt.
  std::optional<Tier> FindTier(BlockKey key) const { return cache_.FindTier(key); }

  // Closes `session` on this engine. Release mode (KvCacheOptions::session_close_mode) first
  // frees every block only this session references, that no running request holds and that
  // no other cached block depends on: its unique chains, leaf up to the first block another
  // session, request or path shares. Both modes then drop the session's references, so its
  // remaining blocks return to the normal eviction order (first among the blocks no open
  // session references). Idempotent: an unknown or closed id is a no-op returning 0, and is
  // remembered (bounded) so that a late request of it references nothing. Returns the
  // tokens freed.
  int64_t CloseSession(SessionId session) {
    pause_owners_.erase(PauseOwner{0, session.value()});
    return sessions_.Close(session, cache_);
  }
  bool SessionOpen(SessionId session) const { return sessions_.open(session); }

  // Plans a retention change for the committed blocks `conversation` computed itself, from
  // its retained turn records: never the prefix it reused, never a block another path extends
  // (the plan stops at a fork), each block once, deepest first. Empty for an unknown
  // conversation or one without records (policy default keeps none).
  CommittedRetentionHandle PlanCommittedRetention(ConversationId conversation) const {
    return records_.Plan(conversation, cache_);
  }
  // Gives `priority` to the planned blocks that are still cached and still not extended by
  // another path (re-checked now), re-queueing each. Blocks evicted since the plan are
  // skipped. Returns the number of blocks changed and, when `applied_keys` is given, appends
  // their keys to it. Precondition: priority in [0, 100].
  int64_t ApplyCommittedRetention(const CommittedRetentionHandle& handle, Priority priority,
                                  std::vector<BlockKey>* applied_keys = nullptr) {
    return ConversationRetention::Apply(handle, priority, cache_, applied_keys);
  }

  // Stall offload (engine/stall_offload_policy.h): moves the unheld, unshared device blocks of
  // the chain `keys` to the host tier ahead of demand, deepest first (BlockCache::OffloadChain),
  // and loads a chain's host blocks back ahead of its next request (BlockCache::PrefetchChain).
  // Both return the blocks moved and count them in stall_offloaded_blocks / prefetched_blocks.
  int64_t OffloadChain(std::span<const BlockKey> keys) { return cache_.OffloadChain(keys); }
  int64_t PrefetchChain(std::span<const BlockKey> keys, int64_t max_blocks) {
    return cache_.PrefetchChain(keys, max_blocks);
  }

  // Offline-optimal eviction (BlockCache::SetNextUseRanking): device evictions follow
  // `ranking`, the caller's knowledge of when each block is next needed, instead of priority
  // and LRU. Not owned; must outlive its use. FailedPrecondition unless the cache is empty;
  // InvalidArgument with a host tier.
  Status SetNextUseRanking(const NextUseRanking* ranking) {
    return cache_.SetNextUseRanking(ranking);
  }
  // Re-reads the ranking of the cached block `key` (BlockCache::RefreshNextUse).
  void RefreshNextUse(BlockKey key) { cache_.RefreshNextUse(key); }

  // The parent conversation `parent` sent its next request through another engine (a fleet
  // delivers the parent's return to every engine that may hold one of its children): demotes
  // the finished children this cache registered for it, exactly as a request of `parent`
  // admitted here would (the idle bound, arrival order, the blocks each child computed
  // itself), and admits nothing. A parent with no child here, or demotion off, is a no-op.
  // Returns the children demoted by this call (KvCacheStats::demoted_children counts them
  // too).
  int64_t DemoteFinishedSubagents(ConversationId parent) {
    return subagents_.DeliverParentReturn(parent, cache_.current_step(), clock(), records_, cache_);
  }

  // The caller's clock (simulated or wall time), read only by time bounds
  // (finished_subagent_min_idle_s). A caller that sets such a bound calls this before each
  // scheduler step and before DemoteFinishedSubagents; equal calls on every rank keep ranks
  // identical. Starts at 0. Precondition: `now` is not before the clock (AdvanceClock's
  // checked form: one clock for both).
  void SetClock(TimeNs now);
  // Sets the caller's wall clock (BlockCache::AdvanceClock): the finish time of the requests
  // released after it, and the arrival of those admitted without one, in the gap-aware order.
  // Never goes back: an earlier `now` is ignored.
  void AdvanceClock(TimeNs now) { cache_.AdvanceClock(now); }
  TimeNs clock() const { return cache_.clock(); }
  // The pause gaps learned so far (gap-aware order; empty under LRU).
  const PauseEstimator& pause_gaps() const { return pause_gaps_; }

  // Advances the scheduler step by one and reverts expired retention priorities.
  void Step() { cache_.Step(); }
  // Advances by `n` steps at once, exactly as `n` calls to Step() would (for replays that
  // map idle time to steps). Precondition: n >= 0.
  void AdvanceSteps(int64_t n) { cache_.AdvanceSteps(n); }
  agentkv::Step current_step() const { return cache_.current_step(); }

  // Removes every cached block from both tiers. FailedPrecondition while any request is
  // active (held blocks are never dropped).
  Status Reset() { return cache_.Reset(); }

  // Counters and current gauges.
  KvCacheStats stats() const;
  // stats().device_evictions and stats().onboards alone.
  int64_t device_evictions() const { return cache_.device_evictions(); }
  int64_t onboards() const { return cache_.onboards(); }
  // stats().device alone (cheap: no counters copied).
  TierGauges device_gauges() const { return cache_.device_gauges(); }
  int64_t active_requests() const { return cache_.active_requests(); }

  // Events recorded since the last call, oldest first (empty when the log is disabled). The
  // log keeps the newest `event_log_capacity` events; `dropped_events()` counts the rest.
  std::vector<KvEvent> TakeEvents() { return cache_.TakeEvents(); }
  int64_t dropped_events() const { return cache_.dropped_events(); }

  // Verifies every internal invariant and returns Internal naming the first broken one: each
  // block is in exactly one state; counts conserve per tier; the eviction queues hold exactly
  // the evictable blocks, each in the bucket of its priority; the prefix index maps exactly
  // the cached blocks; each cached block's parent is resident (device blocks: on the device);
  // a held block's parent is held at least as often; key references are exactly the open
  // sessions' keys; retention records and sub-agent links are consistent (see each unit).
  Status CheckInvariants() const;

  // Bytes of metadata the manager allocated for its blocks (arena, index, queues), for the
  // per-block memory target. Excludes per-request state.
  int64_t MetadataBytes() const { return cache_.MetadataBytes(); }

 private:
  // The session and conversation of a running request that has either, for Release.
  struct AgenticRequest {
    std::optional<SessionId> session;
    std::optional<ConversationId> conversation;
    PauseKind next_pause = PauseKind::kUnknown;
    std::string next_tool;
  };
  // Whose pauses a request measures: its session, else its conversation (kind 0 / 1, id).
  using PauseOwner = std::pair<int, int64_t>;
  // A finished request's pause, until its owner's next request arrives.
  struct PendingPause {
    TimeNs finish;
    PauseKind kind = PauseKind::kUnknown;
    std::string tool;
  };
  // What the gap-aware order keeps about a session (or conversation) between its requests.
  struct PauseOwnerState {
    std::optional<PendingPause> pause;
    // The deepest committed block of each branch its requests left (a request whose chain
    // extends an earlier tip replaces it), newest last: where RankUnneeded starts when it ends.
    std::vector<BlockKey> tips;
  };
  // Owners tracked at most (owners that never return nor end are not tracked beyond it), and
  // branch tips kept per owner (the oldest is forgotten first).
  static constexpr size_t kMaxPauseOwners = size_t{1} << 20;
  static constexpr size_t kMaxTipsPerOwner = 8;

  Status ReleaseRequest(RequestId request, bool finished);
  bool gap_aware() const { return options().eviction_order == EvictionOrder::kGapAware; }
  static std::optional<PauseOwner> OwnerOf(const std::optional<SessionId>& session,
                                           const std::optional<ConversationId>& conversation);
  // Gap-aware order: measures the pause that ended with a request of `owner` arriving now.
  void ObservePause(const PauseOwner& owner, TimeNs arrival);
  // Gap-aware order: the rank of a finished request's blocks (`chain`: its committed blocks),
  // remembering its pause and branch.
  ReleaseRank RankRelease(const AgenticRequest& request, const CommittedChain& chain);
  // Gap-aware order: after the release of a session's last request, the blocks of its earlier
  // branches that nothing else needs go first too.
  void EndPauseOwner(const AgenticRequest& request);

  KvCacheManager(BlockCache cache, const KvCacheOptions& options);

  BlockCache cache_;
  SessionTable sessions_;
  ConversationRetention records_;
  SubagentDemotion subagents_;
  // Running requests that carry a session or a conversation (plain requests pay nothing
  // here); looked up, never iterated where order matters.
  std::unordered_map<RequestId, AgenticRequest> agentic_requests_;
  // Gap-aware order only: the learned pauses, and the pauses still open, by owner (looked up,
  // never iterated).
  PauseEstimator pause_gaps_;
  std::map<PauseOwner, PauseOwnerState> pause_owners_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_KV_CACHE_MANAGER_H_
