// KvCacheManager: routes each request's session and conversation to the agentic layers around
// the BlockCache calls, in the order their contracts need.
//
// Invariants (CheckInvariants verifies them, with each unit's own):
//  - agentic_requests_ holds exactly the running requests that carry a session or a
//    conversation (or, in the gap-aware order, a pause hint): each of its ids is active in the
//    cache.
//  - pause_owners_ is empty outside the gap-aware order.
#include "agentkv/kv/kv_cache_manager.h"

#include <algorithm>
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
  const bool hinted = gap_aware() && options.next_pause != PauseKind::kUnknown;
  if (options.session.has_value() || options.conversation.has_value() || hinted) {
    AGENTKV_RETURN_IF_ERROR(
        cache_.CheckNewRequest(request, options.prompt_tokens, options.retention));
    if (gap_aware()) {
      if (std::optional<PauseOwner> owner = OwnerOf(options.session, options.conversation)) {
        ObservePause(*owner, options.arrival.value_or(cache_.clock()));
      }
    }
    // Sessions open and sub-agents are demoted or restored before matching, so this request's
    // own allocations already see the new eviction order.
    if (options.session.has_value()) sessions_.Admit(*options.session);
    if (options.conversation.has_value()) {
      subagents_.Admit(*options.conversation, options.parent_conversation,
                       options.parent_hint_authenticated, cache_.current_step(), clock(), records_,
                       cache_);
    }
    agentic_requests_.emplace(request,
                              AgenticRequest{options.session, options.conversation,
                                             hinted ? options.next_pause : PauseKind::kUnknown,
                                             hinted ? options.next_tool : std::string()});
  }
  return cache_.AddRequest(request, prompt_keys, options.prompt_tokens, options.retention);
}

Status KvCacheManager::Release(RequestId request) { return ReleaseRequest(request, true); }

Status KvCacheManager::ReleaseUnfinished(RequestId request) {
  return ReleaseRequest(request, false);
}

Status KvCacheManager::ReleaseRequest(RequestId request, bool finished) {
  auto it = agentic_requests_.empty() ? agentic_requests_.end() : agentic_requests_.find(request);
  if (it == agentic_requests_.end()) return cache_.Release(request);
  AgenticRequest agentic = it->second;
  agentic_requests_.erase(it);
  // A request that did not finish (it runs again, or was aborted) is not followed by its pause.
  if (!finished) agentic.next_pause = PauseKind::kUnknown;

  const bool references = agentic.session.has_value() && sessions_.open(*agentic.session);
  const bool records = agentic.conversation.has_value() && records_.enabled();
  const bool branches = agentic.next_pause != PauseKind::kUnknown &&
                        agentic.next_pause != PauseKind::kSessionEnd &&
                        OwnerOf(agentic.session, agentic.conversation).has_value();
  CommittedChain chain;
  if (references || records || branches) {
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
  AGENTKV_RETURN_IF_ERROR(cache_.Release(request, RankRelease(agentic, chain)));
  if (agentic.next_pause == PauseKind::kSessionEnd) EndPauseOwner(agentic);
  // After the holds are dropped, so that a block counts as unused only if no other running
  // request holds it.
  if (agentic.conversation.has_value()) {
    subagents_.EndTurn(*agentic.conversation, cache_.current_step(), clock());
    records_.RecordTurn(*agentic.conversation, chain, cache_);
  }
  return Status::Ok();
}

void KvCacheManager::SetClock(TimeNs now) {
  AGENTKV_CHECK(now >= clock()) << "the cache's clock went back from " << clock() << " to " << now;
  cache_.AdvanceClock(now);
}

std::optional<KvCacheManager::PauseOwner> KvCacheManager::OwnerOf(
    const std::optional<SessionId>& session, const std::optional<ConversationId>& conversation) {
  if (session.has_value()) return PauseOwner{0, session->value()};
  if (conversation.has_value()) return PauseOwner{1, conversation->value()};
  return std::nullopt;
}

void KvCacheManager::ObservePause(const PauseOwner& owner, TimeNs arrival) {
  auto it = pause_owners_.find(owner);
  if (it == pause_owners_.end() || !it->second.pause.has_value()) return;
  const PendingPause& pause = *it->second.pause;
  pause_gaps_.Observe(pause.kind, pause.tool, arrival - pause.finish);
  it->second.pause.reset();
}

ReleaseRank KvCacheManager::RankRelease(const AgenticRequest& request,
                                        const CommittedChain& chain) {
  ReleaseRank rank;
  if (!gap_aware() || request.next_pause == PauseKind::kUnknown) return rank;
  if (request.next_pause == PauseKind::kSessionEnd) {
    rank.session_ended = true;
    return rank;
  }
  const TimeNs finish = cache_.clock();
  rank.last_use =
      finish - pause_gaps_.Estimate(request.next_pause, request.next_tool).value_or(TimeNs());
  const std::optional<PauseOwner> owner = OwnerOf(request.session, request.conversation);
  if (!owner.has_value()) return rank;
  auto it = pause_owners_.find(*owner);
  if (it == pause_owners_.end()) {
    if (pause_owners_.size() >= kMaxPauseOwners) return rank;
    it = pause_owners_.emplace(*owner, PauseOwnerState{}).first;
  }
  PauseOwnerState& state = it->second;
  state.pause = PendingPause{finish, request.next_pause, request.next_tool};
  if (!chain.keys.empty()) {
    // A tip this chain passes through is no longer a branch end.
    std::erase_if(state.tips, [&chain](BlockKey tip) {
      return std::find(chain.keys.begin(), chain.keys.end(), tip) != chain.keys.end();
    });
    if (state.tips.size() >= kMaxTipsPerOwner) state.tips.erase(state.tips.begin());
    state.tips.push_back(chain.keys.back());
  }
  return rank;
}

void KvCacheManager::EndPauseOwner(const AgenticRequest& request) {
  if (!gap_aware()) return;
  const std::optional<PauseOwner> owner = OwnerOf(request.session, request.conversation);
  if (!owner.has_value()) return;
  auto it = pause_owners_.find(*owner);
  if (it == pause_owners_.end()) return;
  // Newest first: a later branch often extends below an earlier one's fork.
  for (size_t i = it->second.tips.size(); i-- > 0;) cache_.RankUnneeded(it->second.tips[i]);
  pause_owners_.erase(it);
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
