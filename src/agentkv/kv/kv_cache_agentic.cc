// The agentic policies of KvCacheManager: sessions (SGLang's session radix cache),
// per-conversation retention records and finished-sub-agent demotion (TensorRT-LLM
// block_reuse_config). They sit on top of the block cache in kv_cache_manager.cc and refer to
// blocks by key, the identity of their content.
//
// Invariants (CheckInvariants verifies them):
//  - session_refs_[k] is the number of open sessions whose member set holds k, and a cached
//    block is session_referenced exactly when session_refs_ holds its key.
//  - record_uses_[k] is the number of retained turn records (any conversation) holding k.
//  - A session id is either open (in sessions_) or remembered closed (in tombstones_), never
//    both.
#include <algorithm>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::kv {
namespace {

constexpr int32_t kNone = -1;

}  // namespace

int32_t KvCacheManager::FindBlock(BlockKey key) const {
  return index_.Find(key.value(),
                     [this](uint32_t id) { return blocks_[static_cast<size_t>(id)].key; });
}

bool KvCacheManager::ReleaseIfUnused(BlockKey key) {
  const int32_t b = FindBlock(key);
  if (b == kNone) return false;
  const Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.ref_count > 0 || blk.first_child != kNone) return false;
  UnlinkChild(b);
  DropBlock(b, KvEventKind::kReleased, /*eviction=*/false);
  return true;
}

void KvCacheManager::SetSessionReferenced(int32_t b, bool referenced, bool front) {
  Block& blk = blocks_[static_cast<size_t>(b)];
  if (blk.session_referenced == referenced) return;
  PriorityLruQueue<Block>* queue = QueueOf(b);
  if (queue != nullptr) queue->Remove(blocks_, b);
  blk.session_referenced = referenced;
  if (queue != nullptr) queue->Push(blocks_, b, front);
}

// ---- Admission ----------------------------------------------------------------------------

void KvCacheManager::AdmitToSessionAndConversation(const RequestOptions& options) {
  if (options.session.has_value() && !tombstones_.contains(*options.session)) {
    sessions_.try_emplace(*options.session);  // The first request opens a session.
  }
  if (!options.conversation.has_value()) return;
  const ConversationId id = *options.conversation;
  ConversationState& conv = conversations_[id];
  ++conv.in_flight;
  if (options.parent_conversation.has_value()) {
    if (!options.parent_hint_authenticated) {
      ++counters_.unauthenticated_parent_hints;
    } else if (!conv.parent.has_value() && *options.parent_conversation != id) {
      conv.parent = *options.parent_conversation;
      conversations_[*options.parent_conversation].children.push_back(id);
    }
  }
  if (conv.demoted) {
    // A demoted child that comes back gets the default priority again on every block that
    // was demoted and is still cached, whatever has extended it since.
    for (const BlockKey key : conv.demotion.keys()) {
      const int32_t b = FindBlock(key);
      if (b != kNone) Reprioritize(b, options_.default_priority, std::nullopt, /*front=*/false);
    }
    conv.demoted = false;
    conv.demotion = CommittedRetentionHandle();
    ++counters_.restored_children;
  }
  if (options_.finished_subagent_priority.has_value() && !conv.children.empty()) {
    DemoteFinishedChildren(conv);
  }
}

void KvCacheManager::DemoteFinishedChildren(ConversationState& parent) {
  const agentkv::Step idle_bound(options_.finished_subagent_min_idle_iterations);
  for (const ConversationId child_id : parent.children) {
    ConversationState& child = conversations_.at(child_id);
    if (child.demoted || child.in_flight > 0) continue;
    if (step_ - child.last_context_end < idle_bound) continue;
    // The child keeps a handle of exactly the blocks demoted, to restore them if it returns.
    std::vector<BlockKey> demoted;
    counters_.demoted_blocks += ApplyCommittedRetention(
        PlanCommittedRetention(child_id), *options_.finished_subagent_priority, &demoted);
    child.demotion = CommittedRetentionHandle(child_id, std::move(demoted));
    child.demoted = true;
    ++counters_.demoted_children;
  }
}

// ---- Completion ---------------------------------------------------------------------------

void KvCacheManager::ReferenceFromSession(const RequestState& state) {
  if (!state.options.session.has_value()) return;
  auto it = sessions_.find(*state.options.session);
  if (it == sessions_.end()) {  // Closed while the request ran: it references nothing.
    ++counters_.late_session_requests;
    return;
  }
  SessionState& session = it->second;
  for (int64_t i = 0; i < state.num_committed; ++i) {
    const int32_t b = state.blocks[static_cast<size_t>(i)];
    const uint64_t key = blocks_[static_cast<size_t>(b)].key;
    if (!session.members.insert(key).second) continue;
    session.keys.push_back(BlockKey(key));
    if (++session_refs_[key] == 1) SetSessionReferenced(b, true, /*front=*/false);
  }
}

void KvCacheManager::RecordConversationTurn(const RequestState& state) {
  if (!state.options.conversation.has_value()) return;
  ConversationState& conv = conversations_.at(*state.options.conversation);
  --conv.in_flight;
  conv.last_context_end = step_;
  if (options_.block_reuse_policy != BlockReusePolicy::kPerConversation) return;

  TurnRecord record;
  record.keys.reserve(static_cast<size_t>(state.num_committed));
  for (int64_t i = 0; i < state.num_committed; ++i) {
    const uint64_t key = blocks_[static_cast<size_t>(state.blocks[static_cast<size_t>(i)])].key;
    record.keys.push_back(BlockKey(key));
    ++record_uses_[key];
  }
  record.first_owned = static_cast<size_t>(std::min(state.reused_blocks, state.num_committed));
  // Blocks the conversation computed in an earlier turn stay its own when this turn reuses
  // them. Keys are chained, so a retained record holding this turn's last reused key at the
  // same position shares the whole reused prefix, and owns it from its own first_owned on.
  if (record.first_owned > 0) {
    const size_t last = record.first_owned - 1;
    for (const TurnRecord& earlier : conv.records) {
      if (last < earlier.keys.size() && earlier.keys[last] == record.keys[last]) {
        record.first_owned = std::min(record.first_owned, earlier.first_owned);
      }
    }
  }
  conv.records.push_back(std::move(record));

  while (static_cast<int64_t>(conv.records.size()) > options_.max_num_turns) {
    const TurnRecord fallen = std::move(conv.records.front());
    conv.records.pop_front();
    for (const BlockKey key : fallen.keys) {
      auto use = record_uses_.find(key.value());
      if (--use->second == 0) record_uses_.erase(use);
    }
    // Deepest first, so that a parent is childless by the time it is examined.
    for (size_t i = fallen.keys.size(); i-- > fallen.first_owned;) {
      if (record_uses_.contains(fallen.keys[i].value())) continue;
      if (ReleaseIfUnused(fallen.keys[i])) ++counters_.retention_dropped_blocks;
    }
  }
}

// ---- Close and retention handles ----------------------------------------------------------

int64_t KvCacheManager::CloseSession(SessionId session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {
    Tombstone(session);
    return 0;
  }
  SessionState closed = std::move(it->second);
  sessions_.erase(it);
  Tombstone(session);
  ++counters_.closed_sessions;

  int64_t freed_blocks = 0;
  if (options_.session_close_mode == SessionCloseMode::kRelease) {
    // Keys were first referenced ancestors before descendants, so walking them backwards
    // reaches every leaf before its parent: a unique chain is freed from its leaf up, and
    // the walk stops below the first block that is shared or still has children.
    for (size_t i = closed.keys.size(); i-- > 0;) {
      auto ref = session_refs_.find(closed.keys[i].value());
      if (ref->second != 1) continue;  // Another open session references it.
      if (ReleaseIfUnused(closed.keys[i])) ++freed_blocks;
    }
  }
  // Blocks no open session references any more move to the front of their bucket in the
  // first eviction class: a closed session's KV is the first candidate to go. Ancestors are
  // pushed first, so the deepest block ends up first in line.
  for (const BlockKey key : closed.keys) {
    auto ref = session_refs_.find(key.value());
    if (--ref->second > 0) continue;
    session_refs_.erase(ref);
    const int32_t b = FindBlock(key);
    if (b != kNone) SetSessionReferenced(b, false, /*front=*/true);
  }
  const int64_t freed_tokens = freed_blocks * options_.tokens_per_block;
  counters_.tokens_freed_by_close += freed_tokens;
  return freed_tokens;
}

void KvCacheManager::Tombstone(SessionId session) {
  if (!tombstones_.insert(session).second) return;
  tombstone_order_.push_back(session);
  if (static_cast<int64_t>(tombstone_order_.size()) > options_.closed_session_tombstones) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

bool KvCacheManager::HasChildOutside(int32_t b, const std::unordered_set<int32_t>& set) const {
  for (int32_t c = blocks_[static_cast<size_t>(b)].first_child; c != kNone;
       c = blocks_[static_cast<size_t>(c)].next_sibling) {
    if (!set.contains(c)) return true;
  }
  return false;
}

CommittedRetentionHandle KvCacheManager::PlanCommittedRetention(ConversationId conversation) const {
  auto it = conversations_.find(conversation);
  if (it == conversations_.end()) return CommittedRetentionHandle(conversation, {});
  // The cached blocks the conversation computed itself, in chain order, each once.
  std::vector<int32_t> owned;
  std::unordered_set<int32_t> seen;
  for (const TurnRecord& record : it->second.records) {
    for (size_t i = record.first_owned; i < record.keys.size(); ++i) {
      const int32_t b = FindBlock(record.keys[i]);
      if (b != kNone && seen.insert(b).second) owned.push_back(b);
    }
  }
  // Deepest first: a block is planned only when every cached child of it is planned, so the
  // plan stops at the first block another path extends (and at every block above it).
  std::unordered_set<int32_t> planned;
  std::vector<BlockKey> keys;
  for (size_t i = owned.size(); i-- > 0;) {
    const int32_t b = owned[i];
    if (HasChildOutside(b, planned)) continue;
    planned.insert(b);
    keys.push_back(BlockKey(blocks_[static_cast<size_t>(b)].key));
  }
  return CommittedRetentionHandle(conversation, std::move(keys));
}

int64_t KvCacheManager::ApplyCommittedRetention(const CommittedRetentionHandle& handle,
                                                Priority priority,
                                                std::vector<BlockKey>* applied_keys) {
  AGENTKV_CHECK(priority >= kMinPriority && priority <= kMaxPriority);
  // Re-check the fork rule now: another path may have extended a planned block since.
  int64_t applied = 0;
  std::unordered_set<int32_t> kept;
  for (const BlockKey key : handle.keys()) {  // Deepest first, as planned.
    const int32_t b = FindBlock(key);
    if (b == kNone || HasChildOutside(b, kept)) continue;
    kept.insert(b);
    Reprioritize(b, priority, std::nullopt, /*front=*/false);
    if (applied_keys != nullptr) applied_keys->push_back(key);
    ++applied;
  }
  return applied;
}

}  // namespace agentkv::kv
