// Counters and gauges of the KV cache manager, and its bounded event log.
#ifndef AGENTKV_KV_KV_CACHE_STATS_H_
#define AGENTKV_KV_KV_CACHE_STATS_H_

#include <cstdint>
#include <ostream>

#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"

namespace agentkv::kv {

enum class Tier : uint8_t { kDevice = 0, kHost = 1 };

// Block counts of one tier at one moment. free + held + evictable == capacity, where held
// counts blocks requests reference (committed or not) and evictable the blocks in the tier's
// eviction queue. Host blocks are never held.
struct TierGauges {
  int64_t capacity = 0;
  int64_t free = 0;
  int64_t held = 0;
  int64_t evictable = 0;
  // Committed blocks (in the prefix index) resident in this tier, held or not.
  int64_t cached = 0;

  friend bool operator==(const TierGauges&, const TierGauges&) = default;
};

// Cumulative counters since creation (Reset keeps them) plus the current gauges.
struct KvCacheStats {
  // Requests admitted (AddRequest calls that succeeded).
  int64_t lookups = 0;
  // Full prompt blocks offered for matching, over all lookups.
  int64_t lookup_blocks = 0;
  // Leading blocks found on the device, and the blocks after them found on the host and
  // onboarded, with their tokens.
  int64_t matched_device_blocks = 0;
  int64_t matched_host_blocks = 0;
  int64_t matched_device_tokens = 0;
  int64_t matched_host_tokens = 0;
  // Prompt tokens of admitted requests that no tier supplied (to be computed).
  int64_t uncached_tokens = 0;
  // Blocks newly entered into the prefix index.
  int64_t stored_blocks = 0;
  // Blocks that left the device tier to make room: offloaded plus dropped from the device.
  int64_t device_evictions = 0;
  // Device -> host moves.
  int64_t offloads = 0;
  // Blocks removed from the cache without a colder copy (below the offload threshold, no host
  // tier, the host tier's own evictions, or dependents of such a block).
  int64_t drops = 0;
  // Host -> device moves.
  int64_t onboards = 0;
  // Blocks whose retention duration ran out and whose priority returned to the default.
  int64_t expirations = 0;
  // Stall offload (OffloadChain, PrefetchChain): device -> host moves ahead of demand (not
  // evictions: nothing needed the room yet), and host -> device moves ahead of a predicted
  // return (not onboards: no request waited for them).
  int64_t stall_offloaded_blocks = 0;
  int64_t prefetched_blocks = 0;

  // Sessions: currently open (a gauge), closed by CloseSession, tokens whose blocks a close
  // freed (release mode), and requests of closed sessions that referenced nothing.
  int64_t open_sessions = 0;
  int64_t closed_sessions = 0;
  int64_t tokens_freed_by_close = 0;
  int64_t late_session_requests = 0;
  // Per-conversation retention: blocks dropped when the record of their turn fell out.
  int64_t retention_dropped_blocks = 0;
  // Sub-agent demotion: parent hints ignored because not authenticated, children demoted and
  // the blocks that got finished_subagent_priority, children that came back and were restored.
  int64_t unauthenticated_parent_hints = 0;
  int64_t demoted_children = 0;
  int64_t demoted_blocks = 0;
  int64_t restored_children = 0;

  TierGauges device;
  TierGauges host;

  friend bool operator==(const KvCacheStats&, const KvCacheStats&) = default;
};

std::ostream& operator<<(std::ostream& os, const KvCacheStats& s);

enum class KvEventKind : uint8_t {
  // A block entered the prefix index on the device.
  kStored,
  // A block moved from the device to the host to make room on the device.
  kOffloaded,
  // A block left the device to make room and was not offloaded, or was removed as a dependent
  // of such a block (`tier` says from where).
  kDropped,
  // A block left the host tier to make room there.
  kEvicted,
  // CloseSession (release mode) or a conversation's retention record falling out freed a
  // block no one else uses (`tier` says from where).
  kReleased,
  // A block moved from the host back to the device.
  kOnboarded,
  // Reset() removed every cached block.
  kCleared,
};

const char* KvEventKindName(KvEventKind kind);

struct KvEvent {
  KvEventKind kind = KvEventKind::kStored;
  BlockKey key;
  // The tier the block was in before the event (kStored: kDevice).
  Tier tier = Tier::kDevice;
  Step step;
  // The block's payload when the event happened (BlockCache::SetPayload; 0 when none was
  // given): an engine adapter's page index travels with the events that free it.
  int64_t payload = 0;

  friend bool operator==(const KvEvent&, const KvEvent&) = default;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_KV_CACHE_STATS_H_
