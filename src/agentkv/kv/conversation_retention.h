// ConversationRetention: TensorRT-LLM's block_reuse_config.policy = per_conversation over
// BlockCache. It keeps a record of each of a conversation's last max_num_turns finished turns
// (the blocks the turn used, and which of them the conversation computed itself); when a
// record falls out, the blocks that turn computed and that nothing else uses are released. It
// also plans and applies CommittedRetentionHandles from those records, which
// SubagentDemotion uses to demote a finished sub-agent. KvCacheManager owns one; it keeps no
// pointer to the cache, which each call passes in, and uses only the cache's by-key content
// methods.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: every ordered walk is over a vector or deque.
#ifndef AGENTKV_KV_CONVERSATION_RETENTION_H_
#define AGENTKV_KV_CONVERSATION_RETENTION_H_

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/committed_retention_handle.h"
#include "agentkv/kv/internal/agentic_state.h"
#include "agentkv/kv/internal/key_count_map.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

class ConversationRetention {
 public:
  struct Counters {
    // Blocks released because the last turn record using them fell out.
    int64_t retention_dropped_blocks = 0;
  };

  // Reads block_reuse_policy and max_num_turns from `options` (validated by the caller).
  explicit ConversationRetention(const KvCacheOptions& options);

  // Whether turns are recorded at all (per_conversation policy).
  bool enabled() const { return enabled_; }

  // Records a finished turn of `conversation`: `chain` is its committed blocks, called after
  // the request's holds are dropped (so a block counts as unused only if no other running
  // request holds it). The oldest records beyond max_num_turns fall out, and each block the
  // fallen turn computed that no retained record of any conversation uses is released from
  // the cache if no request holds it and nothing extends it, deepest first. A no-op unless
  // enabled().
  void RecordTurn(ConversationId conversation, const CommittedChain& chain, BlockCache& cache);

  // Plans a retention change for the committed blocks `conversation` computed itself, from
  // its retained turn records: never the prefix it reused, never a block another path extends
  // (the plan stops at a fork), each block once, deepest first. Empty for an unknown
  // conversation or one without records.
  CommittedRetentionHandle Plan(ConversationId conversation, const BlockCache& cache) const;

  // Gives `priority` to the planned blocks that are still cached and still not extended by
  // another path (re-checked now), re-queueing each. Blocks evicted since the plan are
  // skipped. Returns the number of blocks changed and, when `applied_keys` is given, appends
  // their keys to it. Precondition: priority in [0, 100].
  static int64_t Apply(const CommittedRetentionHandle& handle, Priority priority, BlockCache& cache,
                       std::vector<BlockKey>* applied_keys = nullptr);

  const Counters& counters() const { return counters_; }

  // Internal naming the first broken invariant (top of conversation_retention.cc).
  Status CheckInvariants() const;

 private:
  bool enabled_;
  int64_t max_num_turns_;
  // Conversation -> its retained records, oldest first. Looked up, never iterated where
  // order matters.
  std::unordered_map<ConversationId, std::deque<internal::TurnRecord>> conversations_;
  // Key -> number of retained turn records (of any conversation) that used it.
  internal::KeyCountMap record_uses_;
  Counters counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_CONVERSATION_RETENTION_H_
