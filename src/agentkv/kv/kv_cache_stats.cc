#include "agentkv/kv/kv_cache_stats.h"

namespace agentkv::kv {

const char* KvEventKindName(KvEventKind kind) {
  switch (kind) {
    case KvEventKind::kStored:
      return "stored";
    case KvEventKind::kOffloaded:
      return "offloaded";
    case KvEventKind::kDropped:
      return "dropped";
    case KvEventKind::kEvicted:
      return "evicted";
    case KvEventKind::kReleased:
      return "released";
    case KvEventKind::kOnboarded:
      return "onboarded";
    case KvEventKind::kCleared:
      return "cleared";
  }
  return "unknown";
}

namespace {

std::ostream& operator<<(std::ostream& os, const TierGauges& g) {
  return os << "{capacity=" << g.capacity << " free=" << g.free << " held=" << g.held
            << " evictable=" << g.evictable << " cached=" << g.cached << "}";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const KvCacheStats& s) {
  return os << "lookups=" << s.lookups << " lookup_blocks=" << s.lookup_blocks
            << " matched_device_blocks=" << s.matched_device_blocks
            << " matched_host_blocks=" << s.matched_host_blocks
            << " uncached_tokens=" << s.uncached_tokens << " stored_blocks=" << s.stored_blocks
            << " device_evictions=" << s.device_evictions << " offloads=" << s.offloads
            << " drops=" << s.drops << " onboards=" << s.onboards
            << " expirations=" << s.expirations
            << " stall_offloaded_blocks=" << s.stall_offloaded_blocks
            << " prefetched_blocks=" << s.prefetched_blocks << " open_sessions=" << s.open_sessions
            << " closed_sessions=" << s.closed_sessions
            << " tokens_freed_by_close=" << s.tokens_freed_by_close
            << " late_session_requests=" << s.late_session_requests
            << " retention_dropped_blocks=" << s.retention_dropped_blocks
            << " unauthenticated_parent_hints=" << s.unauthenticated_parent_hints
            << " demoted_children=" << s.demoted_children << " demoted_blocks=" << s.demoted_blocks
            << " restored_children=" << s.restored_children << " device=" << s.device
            << " host=" << s.host;
}

}  // namespace agentkv::kv
