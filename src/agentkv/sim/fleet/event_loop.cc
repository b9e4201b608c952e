#include "agentkv/sim/fleet/event_loop.h"

#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::sim {

EventId EventLoop::Schedule(TimeNs at, Callback callback) {
  AGENTKV_CHECK(at >= now_) << "event scheduled in the past: at " << at << ", now " << now_;
  AGENTKV_CHECK(static_cast<bool>(callback)) << "empty event callback";
  const int64_t seq = next_seq_++;
  heap_.push(Entry{at, seq});
  callbacks_.emplace(seq, std::move(callback));
  return EventId(seq);
}

EventId EventLoop::ScheduleAfter(TimeNs delay, Callback callback) {
  AGENTKV_CHECK(delay >= TimeNs(0)) << "negative event delay " << delay;
  return Schedule(SaturatingAdd(now_, delay), std::move(callback));
}

bool EventLoop::Cancel(EventId id) { return callbacks_.erase(id.value()) > 0; }

void EventLoop::SkipCancelled() {
  while (!heap_.empty() && !callbacks_.contains(heap_.top().seq)) heap_.pop();
}

TimeNs EventLoop::next_time() {
  SkipCancelled();
  return heap_.empty() ? now_ : heap_.top().at;
}

bool EventLoop::RunNext() {
  SkipCancelled();
  if (heap_.empty()) return false;
  const Entry entry = heap_.top();
  heap_.pop();
  AGENTKV_CHECK(entry.at >= now_) << "time went backwards: event at " << entry.at << ", now "
                                  << now_;
  auto it = callbacks_.find(entry.seq);
  Callback callback = std::move(it->second);
  callbacks_.erase(it);  // Before running: the callback may schedule (rehash) or cancel.
  now_ = entry.at;
  ++processed_;
  callback();
  return true;
}

int64_t EventLoop::RunUntil(TimeNs until) {
  AGENTKV_CHECK(until >= now_) << "RunUntil(" << until << ") before now " << now_;
  int64_t ran = 0;
  while (true) {
    SkipCancelled();
    if (heap_.empty() || heap_.top().at > until) break;
    RunNext();
    ++ran;
  }
  now_ = until;
  return ran;
}

int64_t EventLoop::RunUntilIdle() {
  int64_t ran = 0;
  while (RunNext()) ++ran;
  return ran;
}

}  // namespace agentkv::sim
