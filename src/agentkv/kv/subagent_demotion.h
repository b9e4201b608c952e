// SubagentDemotion: finished-sub-agent demotion (TensorRT-LLM's block_reuse_config
// finished_subagent_priority) over ConversationRetention and BlockCache. A request whose
// authenticated parent hint names another conversation registers its conversation as that
// parent's child; when the parent admits its next request, every child that is idle long
// enough gets finished_subagent_priority on the blocks it computed itself (a
// CommittedRetentionHandle planned from its retained records). A demoted child that comes
// back is restored to the default priority. The parent's return can also be delivered to an
// engine the parent's request does not land on (DeliverParentReturn: the children the fleet
// routed elsewhere). The idle bound is either scheduler steps or seconds of the caller's clock;
// with finished_subagent_offloadable and a host tier, demoted blocks stay at or above the
// offload threshold. KvCacheManager owns one; it keeps no pointer to the cache or the
// records, which each call passes in.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: children are walked in arrival order, and the step counter
// (or the clock the caller passes, for the seconds bound), arrival order and options are the
// only inputs, so ranks with equal calls decide alike.
#ifndef AGENTKV_KV_SUBAGENT_DEMOTION_H_
#define AGENTKV_KV_SUBAGENT_DEMOTION_H_

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/conversation_retention.h"
#include "agentkv/kv/internal/agentic_state.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

class SubagentDemotion {
 public:
  struct Counters {
    int64_t unauthenticated_parent_hints = 0;
    int64_t demoted_children = 0;
    int64_t demoted_blocks = 0;
    int64_t restored_children = 0;
  };

  // Reads default_priority, finished_subagent_priority (unset: demotion off), the idle bound
  // (finished_subagent_min_idle_iterations, or finished_subagent_min_idle_s when set) and
  // finished_subagent_offloadable with host_blocks and offload_threshold from `options`
  // (validated by the caller).
  explicit SubagentDemotion(const KvCacheOptions& options);

  // A request of `conversation` is being admitted at step `now` and clock `now_time`, before
  // its prompt is matched. Registers it as a child of `parent` when the hint is authenticated
  // (once; never its own parent); an unauthenticated hint is ignored and counted. A demoted
  // conversation gets the default priority back on every demoted block still cached and is no
  // longer demoted. If it has children, each one with no request in flight that has been idle
  // at least the bound (its last request ended that many steps, or seconds, before now) and
  // that is not demoted yet is demoted.
  void Admit(ConversationId conversation, std::optional<ConversationId> parent,
             bool parent_authenticated, agentkv::Step now, TimeNs now_time,
             const ConversationRetention& records, BlockCache& cache);

  // A request of `conversation` (admitted through Admit) ended at step `now`, clock `now_time`.
  void EndTurn(ConversationId conversation, agentkv::Step now, TimeNs now_time);

  // `parent` sent its next request to another engine: demotes its finished children here
  // exactly as Admit of a request of `parent` would (same idle bound, same order), without
  // admitting anything or registering `parent`. A parent this cache knows no child of, or
  // demotion off, is a no-op. Returns the children demoted by this call.
  int64_t DeliverParentReturn(ConversationId parent, agentkv::Step now, TimeNs now_time,
                              const ConversationRetention& records, BlockCache& cache);

  // The priority demoted blocks get (finished_subagent_priority, raised to the offload
  // threshold when finished_subagent_offloadable applies); unset while demotion is off.
  std::optional<Priority> demotion_priority() const { return finished_priority_; }

  const Counters& counters() const { return counters_; }

  // Internal naming the first broken invariant (top of subagent_demotion.cc).
  Status CheckInvariants() const;

 private:
  // Demotes every eligible child of `parent`; returns how many.
  int64_t DemoteFinishedChildren(const internal::SubagentState& parent, agentkv::Step now,
                                 TimeNs now_time, const ConversationRetention& records,
                                 BlockCache& cache);
  // Whether `child`, not in flight, has been idle for the bound at (now, now_time).
  bool IdleLongEnough(const internal::SubagentState& child, agentkv::Step now,
                      TimeNs now_time) const;

  Priority default_priority_;
  std::optional<Priority> finished_priority_;
  agentkv::Step min_idle_;
  // The seconds form of the idle bound; when set, min_idle_ is not read.
  std::optional<TimeNs> min_idle_time_;
  // Looked up, never iterated where order matters (children lists are vectors).
  std::unordered_map<ConversationId, internal::SubagentState> conversations_;
  Counters counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_SUBAGENT_DEMOTION_H_
