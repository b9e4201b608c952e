#include "agentkv/sim/fleet/event_loop.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::sim {

EventId EventLoop::Schedule(TimeNs at, Callback callback) {
  AGENTKV_CHECK(at >= now_) << "event scheduled in the past: at " << at << ", now " << now_;
  AGENTKV_CHECK(static_cast<bool>(callback)) << "empty event callback";
  const int64_t seq = next_seq_++;
  heap_.push(Entry{at, seq});
  callbacks_.FindOrInsert(KeyOf(seq)).first->callback = std::move(callback);
  return EventId(seq);
}

EventId EventLoop::ScheduleAfter(TimeNs delay, Callback callback) {
  AGENTKV_CHECK(delay >= TimeNs(0)) << "negative event delay " << delay;
  return Schedule(SaturatingAdd(now_, delay), std::move(callback));
}

int64_t EventLoop::ReserveSequences(int64_t count) {
  AGENTKV_CHECK_GE(count, 0);
  const int64_t first = next_seq_;
  next_seq_ += count;
  if (count > 0) reserved_.emplace_back(first, next_seq_);
  return first;
}

bool EventLoop::IsReserved(int64_t seq) const {
  // The last range starting at or before `seq`.
  auto it = std::upper_bound(
      reserved_.begin(), reserved_.end(), seq,
      [](int64_t s, const std::pair<int64_t, int64_t>& range) { return s < range.first; });
  return it != reserved_.begin() && seq < std::prev(it)->second;
}

EventId EventLoop::ScheduleReserved(TimeNs at, int64_t seq, Callback callback) {
  AGENTKV_CHECK(at >= now_) << "event scheduled in the past: at " << at << ", now " << now_;
  AGENTKV_CHECK(static_cast<bool>(callback)) << "empty event callback";
  AGENTKV_CHECK(IsReserved(seq)) << "sequence number " << seq << " was not reserved";
  AGENTKV_CHECK(callbacks_.Find(KeyOf(seq)) == nullptr)
      << "sequence number " << seq << " is pending";
  heap_.push(Entry{at, seq});
  callbacks_.FindOrInsert(KeyOf(seq)).first->callback = std::move(callback);
  return EventId(seq);
}

bool EventLoop::Cancel(EventId id) {
  if (id.value() < 0) return false;
  Pending* pending = callbacks_.Find(KeyOf(id.value()));
  if (pending == nullptr) return false;
  callbacks_.Erase(pending);
  return true;
}

void EventLoop::SkipCancelled() {
  while (!heap_.empty() && callbacks_.Find(KeyOf(heap_.top().seq)) == nullptr) heap_.pop();
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
  Pending* pending = callbacks_.Find(KeyOf(entry.seq));
  Callback callback = std::move(pending->callback);
  callbacks_.Erase(pending);  // Before running: the callback may schedule (grow) or cancel.
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
