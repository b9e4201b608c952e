// ConversationRetention: per-conversation turn records over BlockCache.
//
// Invariants (CheckInvariants verifies them):
//  - A conversation keeps at most max_num_turns records, and none unless enabled.
//  - record_uses_[k] is the number of retained turn records (any conversation) holding k, and
//    holds only positive counts.
//  - A record's first_owned is at most its length.
#include "agentkv/kv/conversation_retention.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::kv {

ConversationRetention::ConversationRetention(const KvCacheOptions& options)
    : enabled_(options.block_reuse_policy == BlockReusePolicy::kPerConversation),
      max_num_turns_(options.max_num_turns) {}

void ConversationRetention::RecordTurn(ConversationId conversation, const CommittedChain& chain,
                                       BlockCache& cache) {
  if (!enabled_) return;
  std::deque<internal::TurnRecord>& records = conversations_[conversation];

  internal::TurnRecord record;
  record.keys = chain.keys;
  for (const BlockKey key : record.keys) record_uses_.Increment(key.value());
  record.first_owned =
      static_cast<size_t>(std::min(chain.reused_blocks, static_cast<int64_t>(chain.keys.size())));
  // Blocks the conversation computed in an earlier turn stay its own when this turn reuses
  // them. Keys are chained, so a retained record holding this turn's last reused key at the
  // same position shares the whole reused prefix, and owns it from its own first_owned on.
  if (record.first_owned > 0) {
    const size_t last = record.first_owned - 1;
    for (const internal::TurnRecord& earlier : records) {
      if (last < earlier.keys.size() && earlier.keys[last] == record.keys[last]) {
        record.first_owned = std::min(record.first_owned, earlier.first_owned);
      }
    }
  }
  records.push_back(std::move(record));

  while (static_cast<int64_t>(records.size()) > max_num_turns_) {
    const internal::TurnRecord fallen = std::move(records.front());
    records.pop_front();
    for (const BlockKey key : fallen.keys) record_uses_.Decrement(key.value());
    // Deepest first, so that a parent is childless by the time it is examined.
    for (size_t i = fallen.keys.size(); i-- > fallen.first_owned;) {
      if (record_uses_.contains(fallen.keys[i].value())) continue;
      if (cache.ReleaseIfUnused(fallen.keys[i])) ++counters_.retention_dropped_blocks;
    }
  }
}

CommittedRetentionHandle ConversationRetention::Plan(ConversationId conversation,
                                                     const BlockCache& cache) const {
  auto it = conversations_.find(conversation);
  if (it == conversations_.end()) return CommittedRetentionHandle(conversation, {});
  // The cached blocks the conversation computed itself, in chain order, each once.
  std::vector<BlockId> owned;
  std::unordered_set<BlockId> seen;
  for (const internal::TurnRecord& record : it->second) {
    for (size_t i = record.first_owned; i < record.keys.size(); ++i) {
      const std::optional<BlockId> b = cache.Find(record.keys[i]);
      if (b.has_value() && seen.insert(*b).second) owned.push_back(*b);
    }
  }
  // Deepest first: a block is planned only when every cached child of it is planned, so the
  // plan stops at the first block another path extends (and at every block above it).
  std::unordered_set<BlockId> planned;
  std::vector<BlockKey> keys;
  for (size_t i = owned.size(); i-- > 0;) {
    const BlockId b = owned[i];
    if (cache.ExtendedOutside(b, planned)) continue;
    planned.insert(b);
    keys.push_back(cache.KeyOf(b));
  }
  return CommittedRetentionHandle(conversation, std::move(keys));
}

int64_t ConversationRetention::Apply(const CommittedRetentionHandle& handle, Priority priority,
                                     BlockCache& cache, std::vector<BlockKey>* applied_keys) {
  AGENTKV_CHECK(priority >= kMinPriority && priority <= kMaxPriority);
  // Re-check the fork rule now: another path may have extended a planned block since.
  int64_t applied = 0;
  std::unordered_set<BlockId> kept;
  for (const BlockKey key : handle.keys()) {  // Deepest first, as planned.
    const std::optional<BlockId> b = cache.Find(key);
    if (!b.has_value() || cache.ExtendedOutside(*b, kept)) continue;
    kept.insert(*b);
    cache.SetBlockPriority(*b, priority);
    if (applied_keys != nullptr) applied_keys->push_back(key);
    ++applied;
  }
  return applied;
}

Status ConversationRetention::CheckInvariants() const {
  const auto broken = [](const std::string& what) {
    return InternalError("invariant broken: " + what);
  };
  if (!enabled_ && !conversations_.empty()) return broken("records kept without per_conversation");
  std::unordered_map<uint64_t, int32_t> uses;
  for (const auto& [id, records] : conversations_) {
    if (static_cast<int64_t>(records.size()) > max_num_turns_) {
      return broken("a conversation keeps more than max_num_turns records");
    }
    for (const internal::TurnRecord& r : records) {
      if (r.first_owned > r.keys.size()) return broken("a record owns past its end");
      for (const BlockKey k : r.keys) ++uses[k.value()];
    }
  }
  if (uses.size() != record_uses_.size()) return broken("record_uses_ disagrees with the records");
  for (const auto& [key, count] : uses) {
    if (record_uses_.count(key) != count) return broken("record_uses_ disagrees with the records");
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
