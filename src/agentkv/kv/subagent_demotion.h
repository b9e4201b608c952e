// SubagentDemotion: finished-sub-agent demotion (TensorRT-LLM's block_reuse_config
// finished_subagent_priority) over ConversationRetention and BlockCache. A request whose
// authenticated parent hint names another conversation registers its conversation as that
// parent's child; when the parent admits its next request, every child that is idle long
// enough gets finished_subagent_priority on the blocks it computed itself (a
// CommittedRetentionHandle planned from its retained records). A demoted child that comes
// back is restored to the default priority. KvCacheManager owns one; it keeps no pointer to
// the cache or the records, which each call passes in.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: children are walked in arrival order, and the step counter,
// arrival order and options are the only inputs, so ranks with equal calls decide alike.
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

  // Reads default_priority, finished_subagent_priority (unset: demotion off) and
  // finished_subagent_min_idle_iterations from `options` (validated by the caller).
  explicit SubagentDemotion(const KvCacheOptions& options);

  // A request of `conversation` is being admitted at step `now`, before its prompt is
  // matched. Registers it as a child of `parent` when the hint is authenticated (once; never
  // its own parent); an unauthenticated hint is ignored and counted. A demoted conversation
  // gets the default priority back on every demoted block still cached and is no longer
  // demoted. If it has children, each one with no request in flight whose last request ended
  // at least the idle bound before `now` and that is not demoted yet is demoted.
  void Admit(ConversationId conversation, std::optional<ConversationId> parent,
             bool parent_authenticated, agentkv::Step now, const ConversationRetention& records,
             BlockCache& cache);

  // A request of `conversation` (admitted through Admit) ended at step `now`.
  void EndTurn(ConversationId conversation, agentkv::Step now);

  const Counters& counters() const { return counters_; }

  // Internal naming the first broken invariant (top of subagent_demotion.cc).
  Status CheckInvariants() const;

 private:
  void DemoteFinishedChildren(const internal::SubagentState& parent, agentkv::Step now,
                              const ConversationRetention& records, BlockCache& cache);

  Priority default_priority_;
  std::optional<Priority> finished_priority_;
  agentkv::Step min_idle_;
  // Looked up, never iterated where order matters (children lists are vectors).
  std::unordered_map<ConversationId, internal::SubagentState> conversations_;
  Counters counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_SUBAGENT_DEMOTION_H_
