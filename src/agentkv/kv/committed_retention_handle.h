// CommittedRetentionHandle: a planned retention change for the committed blocks one
// conversation computed itself (TensorRT-LLM PR #22182's handle, from
// KvCache.plan_committed_retention()).
//
// ConversationRetention::Plan (KvCacheManager::PlanCommittedRetention) builds it from a
// conversation's retention records: only blocks the conversation committed (never the prefix
// it reused), and never a block that another path extends (the plan stops at a fork). The handle
// names blocks by key, the identity of their content: applying it re-checks every block (still
// cached, still not extended by another path) and skips the rest, so a handle whose blocks were
// evicted since the plan applies and destroys safely. It holds no pointers into the cache. Value
// type; thread-compatible.
#ifndef AGENTKV_KV_COMMITTED_RETENTION_HANDLE_H_
#define AGENTKV_KV_COMMITTED_RETENTION_HANDLE_H_

#include <vector>

#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_key.h"

namespace agentkv::kv {

class CommittedRetentionHandle {
 public:
  CommittedRetentionHandle() = default;
  CommittedRetentionHandle(ConversationId conversation, std::vector<BlockKey> keys)
      : conversation_(conversation), keys_(std::move(keys)) {}

  ConversationId conversation() const { return conversation_; }
  // The planned blocks, deepest first, each once.
  const std::vector<BlockKey>& keys() const { return keys_; }
  bool empty() const { return keys_.empty(); }

 private:
  ConversationId conversation_;
  std::vector<BlockKey> keys_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_COMMITTED_RETENTION_HANDLE_H_
