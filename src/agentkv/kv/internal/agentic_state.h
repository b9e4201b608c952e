// The representation of the agentic layers over BlockCache: what SessionTable,
// ConversationRetention and SubagentDemotion keep per session and per conversation. Internal to
// the kv module: only kv sources and tests include it.
#ifndef AGENTKV_KV_INTERNAL_AGENTIC_STATE_H_
#define AGENTKV_KV_INTERNAL_AGENTIC_STATE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/block_key_set.h"
#include "agentkv/kv/committed_retention_handle.h"

namespace agentkv::kv::internal {

// One open session (SessionTable).
struct SessionState {
  // Keys this session references, in the order it first referenced them (ancestors before
  // descendants), and the same set for membership.
  std::vector<BlockKey> keys;
  BlockKeySet members;
  // The chain it last referenced, every key of which is in `members`: a turn's chain usually
  // extends its previous turn's, and the keys the two begin with need no probe of the set.
  std::vector<BlockKey> last_chain;
};

// The blocks one finished turn used, in chain order; those from `first_owned` on are the ones
// its conversation computed itself, in this turn or an earlier retained one
// (ConversationRetention).
struct TurnRecord {
  std::vector<BlockKey> keys;
  size_t first_owned = 0;
};

// One conversation as a parent or child of sub-agents (SubagentDemotion).
struct SubagentState {
  std::optional<ConversationId> parent;
  // Registered sub-agents, in arrival order (rank-identical).
  std::vector<ConversationId> children;
  int64_t in_flight = 0;
  // The step, and the caller's clock (KvCacheManager::SetClock), at which its last request
  // ended.
  Step last_context_end;
  TimeNs last_context_end_time;
  bool demoted = false;
  // Exactly the blocks demoted, to restore them if it returns.
  CommittedRetentionHandle demotion;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_AGENTIC_STATE_H_
