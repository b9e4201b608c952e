#include "agentkv/kv/internal/expiry_queue.h"

namespace agentkv::kv::internal {

void ExpiryQueue::Schedule(int32_t block, Step at) {
  const uint64_t seq = next_seq_++;
  pending_[block] = seq;
  heap_.push(Entry{at.value(), seq, block});
}

void ExpiryQueue::PopExpired(Step now, std::vector<int32_t>& out) {
  while (!heap_.empty() && heap_.top().at <= now.value()) {
    const Entry e = heap_.top();
    heap_.pop();
    auto it = pending_.find(e.block);
    if (it != pending_.end() && it->second == e.seq) {
      pending_.erase(it);
      out.push_back(e.block);
    }
  }
  // Stale entries (replaced or cancelled) pile up only until they reach the top; bound them
  // by rebuilding when they outnumber live ones, so memory stays O(pending).
  if (heap_.size() > 2 * pending_.size() + 64) {
    std::vector<Entry> live;
    live.reserve(pending_.size());
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      auto it = pending_.find(e.block);
      if (it != pending_.end() && it->second == e.seq) live.push_back(e);
    }
    heap_ = decltype(heap_)(std::greater<Entry>(), std::move(live));
  }
}

void ExpiryQueue::Clear() {
  heap_ = {};
  pending_.clear();
}

}  // namespace agentkv::kv::internal
