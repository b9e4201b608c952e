// KvCacheManager: routes each request's session and conversation to the agentic layers around
// the BlockCache calls, in the order their contracts need.
//
// Invariants (CheckInvariants verifies them, with each unit's own):
//  - agentic_requests_ holds exactly the running requests that carry a session or a
//    conversation: each of its ids is active in the cache.
#include "agentkv/kv/kv_cache_manager.h"

#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::kv {

StatusOr<KvCacheManager> KvCacheManager::Create(const KvCacheOptions& options) {
  AGENTKV_ASSIGN_OR_RETURN(BlockCache cache, BlockCache::Create(options));
  return KvCacheManager(std::move(cache), options);
}

KvCacheManager::KvCacheManager(BlockCache cache, const KvCacheOptions& options)
    : cache_(std::move(cache)), sessions_(options), records_(options), subagents_(options) {}

StatusOr<PrefixMatch> KvCacheManager::AddRequest(RequestId request,
                                                 std::span<const BlockKey> prompt_keys,
                                                 const RequestOptions& options) {
  if (options.session.has_value() || options.conversation.has_value()) {
    AGENTKV_RETURN_IF_ERROR(
        cache_.CheckNewRequest(request, options.prompt_tokens, options.retention));
    // Sessions open and sub-agents are demoted or restored before matching, so this request's
    // own allocations already see the new eviction order.
    if (options.session.has_value()) sessions_.Admit(*options.session);
    if (options.conversation.has_value()) {
      subagents_.Admit(*options.conversation, options.parent_conversation,
                       options.parent_hint_authenticated, cache_.current_step(), clock_, records_,
                       cache_);
    }
    agentic_requests_.emplace(request, AgenticRequest{options.session, options.conversation});
  }
  return cache_.AddRequest(request, prompt_keys, options.prompt_tokens, options.retention);
}

Status KvCacheManager::Release(RequestId request) {
  auto it = agentic_requests_.empty() ? agentic_requests_.end() : agentic_requests_.find(request);
  if (it == agentic_requests_.end()) return cache_.Release(request);
  const AgenticRequest agentic = it->second;
  agentic_requests_.erase(it);

  const bool references = agentic.session.has_value() && sessions_.open(*agentic.session);
  const bool records = agentic.conversation.has_value() && records_.enabled();
  CommittedChain chain;
  if (references || records) {
    StatusOr<CommittedChain> committed = cache_.CommittedChainOf(request);
    AGENTKV_CHECK(committed.ok()) << "an agentic request is not active in the cache";
    chain = std::move(committed).value();
  }
  // While the blocks are still held, so that a newly referenced block only changes class and
  // the cache's Release queues the chain deepest first (a root queued before its descendants
  // would be the first victim and take the whole chain with it). The retention config the
  // cache applies on Release touches only priorities of held blocks, so the order of the two
  // does not matter.
  if (agentic.session.has_value()) sessions_.ReferenceChain(*agentic.session, chain.keys, cache_);
  AGENTKV_RETURN_IF_ERROR(cache_.Release(request));
  // After the holds are dropped, so that a block counts as unused only if no other running
  // request holds it.
  if (agentic.conversation.has_value()) {
    subagents_.EndTurn(*agentic.conversation, cache_.current_step(), clock_);
    records_.RecordTurn(*agentic.conversation, chain, cache_);
  }
  return Status::Ok();
}

void KvCacheManager::SetClock(TimeNs now) {
  AGENTKV_CHECK(now >= clock_) << "the cache's clock went back from " << clock_ << " to " << now;
  clock_ = now;
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats s = cache_.stats();
  s.open_sessions = sessions_.open_sessions();
  s.closed_sessions = sessions_.counters().closed_sessions;
  s.tokens_freed_by_close = sessions_.counters().tokens_freed_by_close;
  s.late_session_requests = sessions_.counters().late_session_requests;
  s.retention_dropped_blocks = records_.counters().retention_dropped_blocks;
  s.unauthenticated_parent_hints = subagents_.counters().unauthenticated_parent_hints;
  s.demoted_children = subagents_.counters().demoted_children;
  s.demoted_blocks = subagents_.counters().demoted_blocks;
  s.restored_children = subagents_.counters().restored_children;
  return s;
}

Status KvCacheManager::CheckInvariants() const {
  AGENTKV_RETURN_IF_ERROR(cache_.CheckInvariants());
  AGENTKV_RETURN_IF_ERROR(sessions_.CheckInvariants(cache_));
  AGENTKV_RETURN_IF_ERROR(records_.CheckInvariants());
  AGENTKV_RETURN_IF_ERROR(subagents_.CheckInvariants());
  for (const auto& [request, agentic] : agentic_requests_) {
    if (!cache_.RequestActive(request)) {
      return InternalError("invariant broken: an agentic request is not active in the cache");
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
