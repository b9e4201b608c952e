// EventLog: a bounded ring of KvEvents, newest kept.
//
// Disabled (capacity 0) it costs one branch per event. When full, the oldest event is
// overwritten and counted in overflowed(), so a consumer can tell it missed some.
// Thread-compatible.
#ifndef AGENTKV_KV_INTERNAL_EVENT_LOG_H_
#define AGENTKV_KV_INTERNAL_EVENT_LOG_H_

#include <cstdint>
#include <vector>

#include "agentkv/kv/kv_cache_stats.h"

namespace agentkv::kv::internal {

class EventLog {
 public:
  EventLog() = default;
  explicit EventLog(int64_t capacity) : capacity_(capacity) {}

  bool enabled() const { return capacity_ > 0; }

  void Add(const KvEvent& e) {
    if (capacity_ == 0) return;
    if (static_cast<int64_t>(ring_.size()) < capacity_) {
      ring_.push_back(e);
      return;
    }
    ring_[static_cast<size_t>(start_)] = e;
    start_ = (start_ + 1) % capacity_;
    ++overflowed_;
  }

  // Returns the held events oldest first and empties the log.
  std::vector<KvEvent> Take() {
    std::vector<KvEvent> out;
    out.reserve(ring_.size());
    for (size_t i = 0; i < ring_.size(); ++i) {
      out.push_back(ring_[(static_cast<size_t>(start_) + i) % ring_.size()]);
    }
    ring_.clear();
    start_ = 0;
    return out;
  }

  int64_t overflowed() const { return overflowed_; }

 private:
  int64_t capacity_ = 0;
  std::vector<KvEvent> ring_;
  int64_t start_ = 0;
  int64_t overflowed_ = 0;
};

}  // namespace agentkv::kv::internal

#endif  // AGENTKV_KV_INTERNAL_EVENT_LOG_H_
