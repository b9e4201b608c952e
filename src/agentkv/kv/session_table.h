// SessionTable: SGLang's session radix cache over BlockCache. A request may carry a session id;
// the first request of a session opens it, and when a request ends every block it committed is
// referenced by its session (BlockCache::ReferenceKey: such blocks are evicted after all
// others) until CloseSession. KvCacheManager owns one and calls it on admission, on release
// and on close; it keeps no pointer to the cache, which each call passes in, and uses only the
// cache's by-key content methods.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Deterministic: every ordered walk is over a vector, never a hash map.
#ifndef AGENTKV_KV_SESSION_TABLE_H_
#define AGENTKV_KV_SESSION_TABLE_H_

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/internal/agentic_state.h"
#include "agentkv/kv/kv_cache_options.h"

namespace agentkv::kv {

class SessionTable {
 public:
  struct Counters {
    int64_t closed_sessions = 0;
    int64_t tokens_freed_by_close = 0;
    // Requests that ended after their session had closed (they reference nothing).
    int64_t late_session_requests = 0;
  };

  // Reads session_close_mode, closed_session_tombstones and tokens_per_block from `options`
  // (validated by the caller).
  explicit SessionTable(const KvCacheOptions& options);

  // Opens `session` for a request being admitted, unless it is open already or remembered
  // closed (a late request of a closed session opens nothing).
  void Admit(SessionId session);

  // Makes the open `session` reference every key of `chain` (a finished request's committed
  // blocks, in chain order) that it does not reference yet. A closed or unknown session is
  // counted as a late request and references nothing. Call while the request still holds
  // the blocks, so that only their eviction class changes.
  void ReferenceChain(SessionId session, std::span<const BlockKey> chain, BlockCache& cache);

  // Closes `session`. Release mode (KvCacheOptions::session_close_mode) first frees every
  // block only this session references, that no running request holds and that no other
  // cached block depends on: its unique chains, leaf up to the first block another session,
  // request or path shares. Both modes then drop the session's references, so its remaining
  // blocks return to the normal eviction order (first among the blocks no open session
  // references). Idempotent: an unknown or closed id is a no-op returning 0, and is
  // remembered (bounded) so that a late request of it references nothing. Returns the
  // tokens freed.
  int64_t Close(SessionId session, BlockCache& cache);

  bool open(SessionId session) const { return sessions_.contains(session); }
  int64_t open_sessions() const { return static_cast<int64_t>(sessions_.size()); }
  const Counters& counters() const { return counters_; }

  // Internal naming the first broken invariant (top of session_table.cc): the cache's key
  // references are exactly the open sessions' keys, counted per session.
  Status CheckInvariants(const BlockCache& cache) const;

 private:
  void Tombstone(SessionId session);

  SessionCloseMode close_mode_;
  int64_t tombstone_capacity_;
  int32_t tokens_per_block_;
  // Looked up, never iterated where order matters.
  std::unordered_map<SessionId, internal::SessionState> sessions_;
  std::deque<SessionId> tombstone_order_;
  std::unordered_set<SessionId> tombstones_;
  Counters counters_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_SESSION_TABLE_H_
