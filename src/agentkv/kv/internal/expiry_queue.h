// ExpiryQueue: when retention durations run out, in scheduler steps.
//
// Holds at most one pending expiry per block. Scheduling again replaces the pending one and
// Cancel forgets it; stale heap entries are skipped when popped, so both are O(log n). Ties
// break by scheduling order, never by block id or address, so every rank pops the same
// sequence. Only blocks with a duration cost memory. Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_EXPIRY_QUEUE_H_
#define AGENTKV_KV_INTERNAL_EXPIRY_QUEUE_H_

#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

#include "agentkv/base/time.h"

namespace agentkv::kv::internal {

class ExpiryQueue {
 public:
  // Block `block` expires at step `at` (replacing any pending expiry of it).
  void Schedule(int32_t block, Step at);
  // Forgets the pending expiry of `block`, if any.
  void Cancel(int32_t block) { pending_.erase(block); }
  bool Pending(int32_t block) const { return pending_.contains(block); }

  // Removes and appends to `out` every block whose expiry is at or before `now`, in
  // (step, scheduling order).
  void PopExpired(Step now, std::vector<int32_t>& out);

  int64_t size() const { return static_cast<int64_t>(pending_.size()); }
  void Clear();

 private:
  struct Entry {
    int64_t at;
    uint64_t seq;
    int32_t block;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  // block -> seq of its live entry; looked up only, never iterated.
  std::unordered_map<int32_t, uint64_t> pending_;
  uint64_t next_seq_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_EXPIRY_QUEUE_H_
