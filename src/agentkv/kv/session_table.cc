// SessionTable: sessions over BlockCache's key references.
//
// Invariants (CheckInvariants verifies them):
//  - The cache's key reference count of k is the number of open sessions whose member set
//    holds k, and no other key has references (sessions are the only referencing layer).
//  - An open session's keys and members hold the same keys, each once; its last chain's keys are
//    all members.
//  - A session id is either open (in sessions_) or remembered closed (in tombstones_), never
//    both; tombstone_order_ lists tombstones_ oldest first, at most tombstone_capacity_.
#include "agentkv/kv/session_table.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

namespace agentkv::kv {

SessionTable::SessionTable(const KvCacheOptions& options)
    : close_mode_(options.session_close_mode),
      tombstone_capacity_(options.closed_session_tombstones),
      tokens_per_block_(options.tokens_per_block) {}

void SessionTable::Admit(SessionId session) {
  if (!tombstones_.contains(session)) sessions_.try_emplace(session);
}

void SessionTable::ReferenceChain(SessionId session, std::span<const BlockKey> chain,
                                  BlockCache& cache) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {  // Closed while the request ran: it references nothing.
    ++counters_.late_session_requests;
    return;
  }
  internal::SessionState& state = it->second;
  // The keys this chain begins with that the last one began with too are members already: an
  // array comparison finds them, where a probe per key would (a turn extends the previous
  // turn's chain, so that is most of a long session's prompt).
  const size_t limit = std::min(chain.size(), state.last_chain.size());
  size_t known = 0;
  while (known < limit && chain[known] == state.last_chain[known]) ++known;
  for (const BlockKey key : chain.subspan(known)) {
    if (!state.members.insert(key)) continue;
    state.keys.push_back(key);
    cache.ReferenceKey(key);
  }
  state.last_chain.assign(chain.begin(), chain.end());
}

int64_t SessionTable::Close(SessionId session, BlockCache& cache) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {
    Tombstone(session);
    return 0;
  }
  internal::SessionState closed = std::move(it->second);
  sessions_.erase(it);
  Tombstone(session);
  ++counters_.closed_sessions;

  int64_t freed_blocks = 0;
  if (close_mode_ == SessionCloseMode::kRelease) {
    // Keys were first referenced ancestors before descendants, so walking them backwards
    // reaches every leaf before its parent: a unique chain is freed from its leaf up, and
    // the walk stops below the first block that is shared or still has children.
    for (size_t i = closed.keys.size(); i-- > 0;) {
      if (cache.KeyReferences(closed.keys[i]) != 1) continue;  // Another session's too.
      if (cache.ReleaseIfUnused(closed.keys[i])) ++freed_blocks;
    }
  }
  // Blocks no open session references any more move to the front of their bucket in the
  // first eviction class: a closed session's KV is the first candidate to go. Ancestors are
  // dereferenced first, so the deepest block ends up first in line.
  for (const BlockKey key : closed.keys) cache.DereferenceKey(key, /*evict_first=*/true);
  const int64_t freed_tokens = freed_blocks * tokens_per_block_;
  counters_.tokens_freed_by_close += freed_tokens;
  return freed_tokens;
}

void SessionTable::Tombstone(SessionId session) {
  if (!tombstones_.insert(session).second) return;
  tombstone_order_.push_back(session);
  if (static_cast<int64_t>(tombstone_order_.size()) > tombstone_capacity_) {
    tombstones_.erase(tombstone_order_.front());
    tombstone_order_.pop_front();
  }
}

Status SessionTable::CheckInvariants(const BlockCache& cache) const {
  const auto broken = [](const std::string& what) {
    return InternalError("invariant broken: " + what);
  };
  std::unordered_map<uint64_t, int32_t> refs;
  for (const auto& [id, session] : sessions_) {
    if (tombstones_.contains(id)) return broken("session open and closed at once");
    if (session.keys.size() != session.members.size()) return broken("session keys repeat");
    for (const BlockKey k : session.keys) {
      if (!session.members.contains(k)) return broken("session keys and members differ");
      ++refs[k.value()];
    }
    for (const BlockKey k : session.last_chain) {
      if (!session.members.contains(k)) return broken("a last-chain key is no member");
    }
  }
  for (const auto& [key, count] : refs) {
    if (cache.KeyReferences(BlockKey(key)) != count) {
      return broken("key references disagree with the open sessions");
    }
  }
  if (cache.referenced_keys() != static_cast<int64_t>(refs.size())) {
    return broken("the cache references keys no open session holds");
  }
  if (tombstones_.size() != tombstone_order_.size()) return broken("tombstone order disagrees");
  if (static_cast<int64_t>(tombstone_order_.size()) > tombstone_capacity_) {
    return broken("more tombstones than closed_session_tombstones");
  }
  return Status::Ok();
}

}  // namespace agentkv::kv
