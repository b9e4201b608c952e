// Tests of the simulator's discrete-event engine: ordering by (time, scheduling order),
// cancellation, RunUntil boundaries, scheduling from callbacks, and its programmer-error checks.
// A randomized test compares the loop with a sorted-vector reference.
#include "agentkv/sim/fleet/event_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/base/rng.h"

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;

TimeNs Ns(int64_t ns) { return TimeNs(ns); }

TEST(EventLoopTest, RunsByTimeThenSchedulingOrder) {
  EventLoop loop;
  std::vector<std::string> log;
  auto record = [&](std::string tag) {
    return [&log, &loop, tag] { log.push_back(tag + "@" + std::to_string(loop.now().ns())); };
  };
  loop.Schedule(Ns(30), record("c"));
  loop.Schedule(Ns(10), record("a1"));
  loop.Schedule(Ns(20), record("b"));
  loop.Schedule(Ns(10), record("a2"));
  loop.Schedule(Ns(10), record("a3"));
  EXPECT_EQ(loop.pending(), 5);
  EXPECT_EQ(loop.RunUntilIdle(), 5);
  EXPECT_THAT(log, ElementsAre("a1@10", "a2@10", "a3@10", "b@20", "c@30"));
  EXPECT_EQ(loop.now(), Ns(30));
  EXPECT_EQ(loop.processed(), 5);
  EXPECT_EQ(loop.pending(), 0);
}

// An event scheduled late under a reserved number runs where it would have run had it been
// scheduled at the reservation: before later-scheduled events at its time, even when it is
// scheduled from an event at that very time.
TEST(EventLoopTest, ReservedNumbersOrderAsIfScheduledAtTheReservation) {
  EventLoop loop;
  std::vector<std::string> log;
  auto record = [&](std::string tag) {
    return [&log, &loop, tag] { log.push_back(tag + "@" + std::to_string(loop.now().ns())); };
  };
  loop.Schedule(Ns(10), record("before"));
  const int64_t first = loop.ReserveSequences(3);
  loop.Schedule(Ns(10), record("after1"));
  loop.Schedule(Ns(20), record("after2"));
  // The first reserved event schedules the next two, one at its own time.
  EXPECT_EQ(loop.ScheduleReserved(Ns(10), first,
                                  [&] {
                                    record("r0")();
                                    loop.ScheduleReserved(Ns(20), first + 2, record("r2"));
                                    loop.ScheduleReserved(Ns(10), first + 1, record("r1"));
                                  }),
            EventId(first));
  EXPECT_EQ(loop.RunUntilIdle(), 6);
  EXPECT_THAT(log, ElementsAre("before@10", "r0@10", "r1@10", "after1@10", "r2@20", "after2@20"));
}

TEST(EventLoopDeathTest, ReservedNumbersAreChecked) {
  EventLoop loop;
  const EventId plain = loop.Schedule(Ns(1), [] {});
  EXPECT_DEATH(loop.ScheduleReserved(Ns(1), plain.value(), [] {}), "was not reserved");
  const int64_t first = loop.ReserveSequences(2);
  EXPECT_DEATH(loop.ScheduleReserved(Ns(1), first + 2, [] {}), "was not reserved");
  loop.ScheduleReserved(Ns(1), first + 1, [] {});
  EXPECT_DEATH(loop.ScheduleReserved(Ns(2), first + 1, [] {}), "is pending");
  EXPECT_EQ(loop.ReserveSequences(0), first + 2);
}

TEST(EventLoopTest, CancelledEventDoesNotRun) {
  EventLoop loop;
  std::vector<int> ran;
  loop.Schedule(Ns(1), [&] { ran.push_back(1); });
  const EventId two = loop.Schedule(Ns(2), [&] { ran.push_back(2); });
  loop.Schedule(Ns(3), [&] { ran.push_back(3); });
  EXPECT_TRUE(loop.Cancel(two));
  EXPECT_FALSE(loop.Cancel(two));
  EXPECT_EQ(loop.pending(), 2);
  EXPECT_EQ(loop.RunUntilIdle(), 2);
  EXPECT_THAT(ran, ElementsAre(1, 3));
  EXPECT_EQ(loop.processed(), 2);
  EXPECT_FALSE(loop.Cancel(EventId(0)));  // Already ran.
}

TEST(EventLoopTest, CallbackCancelsALaterEventAtTheSameTime) {
  EventLoop loop;
  std::vector<int> ran;
  EventId second;
  loop.Schedule(Ns(5), [&] {
    ran.push_back(1);
    EXPECT_TRUE(loop.Cancel(second));
  });
  second = loop.Schedule(Ns(5), [&] { ran.push_back(2); });
  loop.RunUntilIdle();
  EXPECT_THAT(ran, ElementsAre(1));
}

TEST(EventLoopTest, RunUntilIncludesTheBoundaryAndAdvancesTime) {
  EventLoop loop;
  std::vector<int64_t> ran;
  for (int64_t t : {99, 100, 101}) {
    loop.Schedule(Ns(t), [&ran, t] { ran.push_back(t); });
  }
  EXPECT_EQ(loop.RunUntil(Ns(100)), 2);
  EXPECT_THAT(ran, ElementsAre(99, 100));
  EXPECT_EQ(loop.now(), Ns(100));
  EXPECT_EQ(loop.next_time(), Ns(101));
  EXPECT_EQ(loop.RunUntil(Ns(100)), 0);
  EXPECT_EQ(loop.RunUntil(Ns(150)), 1);
  EXPECT_EQ(loop.now(), Ns(150));  // Advanced past the last event to the boundary.
  EXPECT_EQ(loop.next_time(), Ns(150));
  EXPECT_EQ(loop.RunUntil(Ns(200)), 0);
  EXPECT_EQ(loop.now(), Ns(200));
}

TEST(EventLoopTest, EventsScheduledFromCallbacksRunInOrder) {
  EventLoop loop;
  std::vector<std::string> log;
  loop.Schedule(Ns(10), [&] {
    log.push_back("first@" + std::to_string(loop.now().ns()));
    // Same time: after every event already pending at 10.
    loop.ScheduleAfter(Ns(0), [&] { log.push_back("same@" + std::to_string(loop.now().ns())); });
    loop.ScheduleAfter(Ns(5), [&] {
      log.push_back("later@" + std::to_string(loop.now().ns()));
      loop.ScheduleAfter(Ns(100), [&] { log.push_back("beyond"); });
    });
  });
  loop.Schedule(Ns(10), [&] { log.push_back("second@10"); });
  EXPECT_EQ(loop.RunUntil(Ns(20)), 4);
  EXPECT_THAT(log, ElementsAre("first@10", "second@10", "same@10", "later@15"));
  EXPECT_EQ(loop.pending(), 1);
  EXPECT_EQ(loop.next_time(), Ns(115));
  EXPECT_EQ(loop.RunUntilIdle(), 1);
  EXPECT_EQ(loop.now(), Ns(115));
}

TEST(EventLoopTest, RunNextRunsOneEvent) {
  EventLoop loop(Ns(1000));
  int count = 0;
  loop.ScheduleAfter(Ns(7), [&] { ++count; });
  loop.ScheduleAfter(Ns(7), [&] { ++count; });
  EXPECT_TRUE(loop.RunNext());
  EXPECT_EQ(count, 1);
  EXPECT_EQ(loop.now(), Ns(1007));
  EXPECT_TRUE(loop.RunNext());
  EXPECT_FALSE(loop.RunNext());
  EXPECT_EQ(count, 2);
}

// A delay past the end of time lands at the largest TimeNs, after every earlier event, instead
// of wrapping into the past (which would abort on the check below).
TEST(EventLoopTest, DelaysSaturateAtTheEndOfTime) {
  constexpr TimeNs kEnd(std::numeric_limits<int64_t>::max());
  EventLoop loop(Ns(std::numeric_limits<int64_t>::max() - 5));
  std::vector<int> order;
  loop.ScheduleAfter(Ns(10), [&] {
    order.push_back(1);
    loop.ScheduleAfter(Ns(kMaxTimeNs), [&] { order.push_back(3); });
  });
  loop.ScheduleAfter(Ns(4), [&] { order.push_back(0); });
  loop.ScheduleAfter(kEnd, [&] { order.push_back(2); });
  EXPECT_EQ(loop.RunUntilIdle(), 4);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(loop.now(), kEnd);
}

TEST(EventLoopDeathTest, SchedulingInThePastIsAProgrammerError) {
  EventLoop loop;
  loop.Schedule(Ns(50), [] {});
  loop.RunUntilIdle();
  EXPECT_DEATH(loop.Schedule(Ns(49), [] {}), "event scheduled in the past");
  EXPECT_DEATH(loop.ScheduleAfter(Ns(-1), [] {}), "negative event delay");
  EXPECT_DEATH(loop.RunUntil(Ns(10)), "before now");
}

// The loop against a reference: all events of a random schedule (with random cancels and
// events spawned by callbacks) must run in (time, scheduling order), exactly once.
TEST(EventLoopTest, MatchesSortedReferenceOnRandomSchedules) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    EventLoop loop;
    // (time, seq) of every event that must run; seq is the EventId.
    std::vector<std::tuple<int64_t, int64_t>> expected;
    std::vector<std::tuple<int64_t, int64_t>> actual;
    std::vector<EventId> ids;
    int64_t next_seq = 0;  // EventIds are scheduling sequence numbers 0, 1, 2, ...
    std::function<void(int64_t)> schedule = [&](int64_t at) {
      const int64_t seq = next_seq++;
      const bool spawns = rng.Bernoulli(0.2);
      const int64_t child_delay = rng.Uniform(0, 20);
      const EventId id = loop.Schedule(Ns(at), [&, at, seq, spawns, child_delay] {
        actual.emplace_back(at, seq);
        EXPECT_EQ(loop.now(), Ns(at));
        if (spawns) schedule(at + child_delay);
      });
      EXPECT_EQ(id.value(), seq);
      expected.emplace_back(at, seq);
      ids.push_back(id);
    };
    for (int i = 0; i < 200; ++i) schedule(rng.Uniform(0, 100));
    for (int i = 0; i < 30; ++i) {
      const EventId victim = ids[static_cast<size_t>(rng.Uniform(0, 199))];
      if (loop.Cancel(victim)) {
        std::erase_if(expected, [&](const auto& e) { return std::get<1>(e) == victim.value(); });
      }
    }
    loop.RunUntilIdle();
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(actual, expected);
    EXPECT_EQ(loop.processed(), static_cast<int64_t>(expected.size()));
  }
}

}  // namespace
}  // namespace agentkv::sim
