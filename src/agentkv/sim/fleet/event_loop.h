// EventLoop: the simulator's discrete-event engine.
//
// Events are callbacks scheduled at integer nanoseconds (TimeNs). The loop pops the earliest
// pending event, advances `now()` to its time and runs it. Ties between events at the same
// time break by a sequence number assigned when the event is scheduled, so events at equal
// times run in scheduling order (FIFO). Nothing depends on pointers or hash-table iteration
// order, so a run is a pure function of the scheduling calls: same calls, same order.
//
// Contracts:
//  - Scheduling at a time before `now()` is a programmer error (AGENTKV_CHECK). Scheduling at
//    exactly `now()` is allowed, including from inside a callback; such an event runs after
//    every event already pending at `now()`.
//  - Times come from workloads, so the loop never computes one that wraps: now() + delay
//    saturates at the largest TimeNs (events there run in scheduling order), and callers that
//    add times from input use SaturatingAdd (agentkv/base/bounds.h), so that no input can make
//    an event land in the past.
//  - Time never goes backwards: each popped event's time is checked against `now()`.
//  - A callback may schedule and cancel events (cancelling itself while running is a no-op).
//
// Single-threaded and thread-compatible; owns its callbacks; not copyable.
#ifndef AGENTKV_SIM_FLEET_EVENT_LOOP_H_
#define AGENTKV_SIM_FLEET_EVENT_LOOP_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/flat_key_table.h"

namespace agentkv::sim {

struct EventIdTag {};
// Identifies one scheduled event; equal to its scheduling sequence number (0, 1, 2, ...).
using EventId = StrongId<EventIdTag, int64_t>;

class EventLoop {
 public:
  using Callback = std::function<void()>;

  // Starts at `start` (default: time 0) with no pending events.
  explicit EventLoop(TimeNs start = TimeNs(0)) : now_(start) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // The time of the event being run, or the time the loop was last advanced to.
  TimeNs now() const { return now_; }

  // Schedules `callback` to run at `at`. Precondition: at >= now(); `callback` non-empty.
  EventId Schedule(TimeNs at, Callback callback);
  // Schedules `callback` to run at now() + delay, or at the largest TimeNs when that sum does
  // not fit. Precondition: delay >= 0.
  EventId ScheduleAfter(TimeNs delay, Callback callback);
  // Reserves `count` consecutive sequence numbers and returns the first. An event scheduled
  // later under one of them (ScheduleReserved) breaks ties as if it had been scheduled at the
  // reservation: a caller that schedules lazily (a streamed workload's session starts, made
  // when the session is read) keeps the order it would have had scheduling everything up front.
  // Precondition: count >= 0.
  int64_t ReserveSequences(int64_t count);
  // Schedules `callback` at `at` under the reserved sequence number `seq` (its EventId).
  // Unlike Schedule, an event at exactly now() runs before the pending events at now() whose
  // sequence numbers are larger. Preconditions: at >= now(); `seq` was reserved by
  // ReserveSequences and is used at most once (it is checked not to be pending).
  EventId ScheduleReserved(TimeNs at, int64_t seq, Callback callback);

  // Cancels a pending event: it will not run. Returns false (and does nothing) when `id` has
  // already run, was already cancelled, or is running now.
  bool Cancel(EventId id);

  // Runs every event whose time is <= `until` (including events scheduled meanwhile at such
  // times), then advances now() to `until`. Returns the number of events run.
  // Precondition: until >= now().
  int64_t RunUntil(TimeNs until);
  // Runs events until none is pending; now() ends at the last event's time. Returns the
  // number of events run.
  int64_t RunUntilIdle();
  // Runs the single earliest pending event. Returns false when none is pending.
  bool RunNext();

  // Events scheduled and neither run nor cancelled.
  int64_t pending() const { return static_cast<int64_t>(callbacks_.size()); }
  // Events run since construction (cancelled events are not counted).
  int64_t processed() const { return processed_; }
  // The time of the earliest pending event; now() when none is pending. Non-const: drops
  // cancelled entries from the heap.
  TimeNs next_time();

 private:
  struct Entry {
    TimeNs at;
    int64_t seq;
    // std::priority_queue is a max-heap; inverting the order makes it a min-heap on (at, seq).
    friend bool operator<(const Entry& a, const Entry& b) {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  // A pending callback under its sequence number + 1 (the table's key 0 marks an empty slot).
  struct Pending {
    uint64_t key = 0;
    Callback callback;
  };
  static uint64_t KeyOf(int64_t seq) { return static_cast<uint64_t>(seq) + 1; }

  // Drops cancelled entries from the top of the heap.
  void SkipCancelled();
  // Whether `seq` lies in a range ReserveSequences returned.
  bool IsReserved(int64_t seq) const;

  TimeNs now_;
  int64_t next_seq_ = 0;
  int64_t processed_ = 0;
  std::priority_queue<Entry> heap_;
  // Reserved ranges [first, end), in increasing order (they are taken from next_seq_).
  std::vector<std::pair<int64_t, int64_t>> reserved_;
  // Pending callbacks by sequence number, in a flat table (no allocation per event beyond the
  // callback's own); looked up only, never iterated.
  kv::FlatKeyTable<Pending> callbacks_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_EVENT_LOOP_H_
