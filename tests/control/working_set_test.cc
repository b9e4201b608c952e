// WorkingSetAdmission: program-level footprints, holds through predicted pauses, new programs
// first come first served with aging; a randomized run against conservation and starvation.
#include "agentkv/control/working_set.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace agentkv::control {
namespace {

constexpr TimeNs kSecond = TimeNs::Seconds(1);

TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

// A fleet of engines "e0".."e{n-1}" of `tokens` device KV each.
std::vector<EngineSnapshot> Fleet(int engines, int64_t tokens) {
  std::vector<EngineSnapshot> out;
  for (int e = 0; e < engines; ++e) {
    out.push_back(
        EngineSnapshot{.engine_id = "e" + std::to_string(e), .max_total_num_tokens = tokens});
  }
  return out;
}

class WorkingSetTest : public ::testing::Test {
 protected:
  explicit WorkingSetTest(WorkingSetOptions options = Options()) : ws_(options) {}

  static WorkingSetOptions Options() {
    WorkingSetOptions o;
    o.headroom = 1.0;
    o.default_hold = TimeNs::Seconds(30);
    o.max_hold = TimeNs::Seconds(300);
    o.max_wait = TimeNs::Seconds(100);
    return o;
  }

  WorkingSetDecision Acquire(const std::string& ticket, const std::string& program,
                             const std::string& agent, int64_t tokens, TimeNs now,
                             std::optional<std::string> engine = std::nullopt) {
    StatusOr<WorkingSetDecision> d = ws_.Acquire(ProgramRequest{.ticket = ticket,
                                                                .program = program,
                                                                .agent = agent,
                                                                .reservation_tokens = tokens,
                                                                .engine = std::move(engine)},
                                                 now);
    EXPECT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(ws_.CheckInvariants().ok()) << ws_.CheckInvariants();
    return d.ok() ? *d : WorkingSetDecision{};
  }

  void Finish(const std::string& ticket, int64_t context, PauseKind pause, TimeNs now) {
    ws_.Finish(ticket, RequestEnd{.context_tokens = context, .next_pause = pause}, now);
    EXPECT_TRUE(ws_.CheckInvariants().ok()) << ws_.CheckInvariants();
  }

  WorkingSetAdmission ws_;
};

TEST_F(WorkingSetTest, NothingWaitsBeforeAnyEngineReportsItsCapacity) {
  const WorkingSetDecision d = Acquire("t1", "p1", "p1", 1'000'000, At(0));
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.reason, WorkingSetReason::kNoCapacity);
  EXPECT_EQ(ws_.counters().no_capacity, 1);
}

TEST_F(WorkingSetTest, APausedProgramHoldsItsContextSoANewProgramWaitsUntilItEnds) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  EXPECT_EQ(Acquire("a1", "A", "A", 600, At(0)).reason, WorkingSetReason::kFits);
  Finish("a1", 700, PauseKind::kToolCall, At(1));  // A holds 700 through its tool call.
  EXPECT_EQ(ws_.Gauges().held_tokens, 700);
  EXPECT_EQ(ws_.Gauges().live_programs, 1);
  // B's first prompt does not fit beside A's held context: B waits.
  const WorkingSetDecision b = Acquire("b1", "B", "B", 400, At(2));
  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.reason, WorkingSetReason::kFull);
  // A returns from its tool: continuing, never blocked, whatever the queue.
  EXPECT_EQ(Acquire("a2", "A", "A", 800, At(5)).reason, WorkingSetReason::kContinuing);
  EXPECT_EQ(ws_.counters().holds_returned, 1);
  Finish("a2", 900, PauseKind::kSessionEnd, At(6));  // A's last request: nothing held.
  EXPECT_EQ(ws_.Gauges().held_tokens, 0);
  const std::vector<WorkingSetDecision> resolved = ws_.TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].ticket, "b1");
  EXPECT_TRUE(resolved[0].admitted);
  EXPECT_EQ(resolved[0].reason, WorkingSetReason::kFits);
  EXPECT_EQ(resolved[0].wait, At(4));
}

TEST_F(WorkingSetTest, AHoldOutlivingItsPredictionIsReleasedAndTheProgramIsNewOnReturn) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  Acquire("a1", "A", "A", 500, At(0));
  Finish("a1", 600, PauseKind::kToolCall, At(1));  // default hold: 30 s.
  EXPECT_EQ(ws_.NextDeadline(), At(31));
  Acquire("b1", "B", "B", 500, At(2));  // Waits behind A's hold.
  ws_.Tick(At(30));
  EXPECT_TRUE(ws_.TakeResolved().empty());
  ws_.Tick(At(31));
  EXPECT_EQ(ws_.counters().holds_expired, 1);
  ASSERT_EQ(ws_.TakeResolved().size(), 1u);  // B runs in A's released space.
  // A returns late: its program has no footprint, so it is new and waits behind B.
  const WorkingSetDecision late = Acquire("a2", "A", "A", 600, At(40));
  EXPECT_EQ(late.reason, WorkingSetReason::kFull);
}

TEST_F(WorkingSetTest, AReturningProgramGoesBeforeProgramsThatNeverStarted) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  Acquire("a1", "A", "A", 500, At(0));
  Finish("a1", 600, PauseKind::kToolCall, At(1));  // A holds 600 until 31.
  EXPECT_EQ(ws_.HoldUntil("A"), At(31));
  Acquire("x1", "X", "X", 900, At(2));  // Started at once? No: 600 + 900 > 1000, X waits.
  ws_.Tick(At(31));                     // A's hold expires: X fits and runs.
  ASSERT_EQ(ws_.TakeResolved().size(), 1u);
  EXPECT_FALSE(ws_.HoldUntil("A").has_value());
  EXPECT_FALSE(Acquire("b1", "B", "B", 200, At(40)).admitted);  // A new program waits first.
  EXPECT_FALSE(Acquire("a2", "A", "A", 700, At(41)).admitted);  // A returns late: waits too.
  Finish("x1", 0, PauseKind::kSessionEnd, At(42));              // Room for A or B, not both.
  const std::vector<WorkingSetDecision> resolved = ws_.TakeResolved();
  ASSERT_GE(resolved.size(), 1u);
  // A arrived as a program before B did: it goes first although it asked later.
  EXPECT_EQ(resolved[0].ticket, "a2");
  EXPECT_EQ(resolved[0].reason, WorkingSetReason::kFits);
}

TEST(WorkingSetPeakTest, ANewProgramMustFitTheFootprintEndedProgramsReached) {
  WorkingSetOptions options;
  options.headroom = 1.0;
  options.reserve_expected_peak = true;
  WorkingSetAdmission ws(options);
  ws.Reconcile(Fleet(1, 1000), TimeNs(0));
  // Four programs each grow to a peak of 700 tokens, then end.
  for (int i = 0; i < 4; ++i) {
    const std::string p = "p" + std::to_string(i);
    ASSERT_TRUE(
        ws.Acquire({.ticket = p + "a", .program = p, .agent = p, .reservation_tokens = 100}, At(i))
            .value()
            .admitted);
    ws.Finish(p + "a", RequestEnd{.context_tokens = 10}, At(i));
    ASSERT_TRUE(
        ws.Acquire({.ticket = p + "b", .program = p, .agent = p, .reservation_tokens = 700}, At(i))
            .value()
            .admitted);
    ws.Finish(p + "b", RequestEnd{.next_pause = PauseKind::kSessionEnd}, At(i));
    ws.EndAgent(p, At(i));
  }
  // A running program of 400: a newcomer asking 100 would fit, but programs grow to 700.
  ASSERT_TRUE(
      ws.Acquire({.ticket = "r", .program = "R", .agent = "R", .reservation_tokens = 400}, At(10))
          .value()
          .admitted);
  EXPECT_FALSE(
      ws.Acquire({.ticket = "n", .program = "N", .agent = "N", .reservation_tokens = 100}, At(11))
          .value()
          .admitted);
  EXPECT_TRUE(ws.CheckInvariants().ok());
}

TEST_F(WorkingSetTest, SubagentsJoinTheirProgramAndAreNeverBlocked) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  Acquire("m1", "M", "M", 900, At(0));
  // The fleet is full, but a sub-agent of a live program continues it.
  const WorkingSetDecision sub = Acquire("s1", "M", "M/sub", 900, At(1));
  EXPECT_EQ(sub.reason, WorkingSetReason::kContinuing);
  EXPECT_EQ(ws_.FootprintOn(""), 1800);
  Finish("m1", 950, PauseKind::kSubagentWait, At(2));
  Finish("s1", 950, PauseKind::kSessionEnd, At(3));
  ws_.EndAgent("M/sub", At(3));
  EXPECT_EQ(ws_.FootprintOn(""), 950);
  EXPECT_EQ(ws_.agents(), 1);
  ws_.EndAgent("M", At(4));
  EXPECT_EQ(ws_.FootprintOn(""), 0);
  EXPECT_EQ(ws_.agents(), 0);
  EXPECT_EQ(ws_.counters().holds_ended, 1);
}

TEST_F(WorkingSetTest, NewProgramsAreAdmittedFirstComeFirstServedAndAgeAfterMaxWait) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  Acquire("a1", "A", "A", 800, At(0));
  EXPECT_FALSE(Acquire("b1", "B", "B", 500, At(1)).admitted);
  // C would fit beside A, but B came first: C waits behind it (no overtaking).
  EXPECT_FALSE(Acquire("c1", "C", "C", 100, At(2)).admitted);
  EXPECT_EQ(ws_.NextDeadline(), At(101));
  ws_.Tick(At(101));  // B has waited max_wait: admitted aged; C then fits? 800+500+100 > 1000.
  std::vector<WorkingSetDecision> resolved = ws_.TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].ticket, "b1");
  EXPECT_EQ(resolved[0].reason, WorkingSetReason::kAged);
  ws_.Tick(At(102));
  resolved = ws_.TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].reason, WorkingSetReason::kAged);
  EXPECT_EQ(ws_.counters().aged, 2);
  EXPECT_TRUE(ws_.CheckInvariants().ok());
}

TEST_F(WorkingSetTest, EachEngineIsBoundedOnItsOwnAndAnUnknownPlacementAgainstTheFleet) {
  ws_.Reconcile(Fleet(2, 1000), At(0));
  Acquire("a1", "A", "A", 900, At(0), "e0");
  // e0 is full, e1 is empty: a program bound for e1 is not delayed by e0's queue.
  EXPECT_FALSE(Acquire("b1", "B", "B", 500, At(1), "e0").admitted);
  EXPECT_EQ(Acquire("c1", "C", "C", 900, At(1), "e1").reason, WorkingSetReason::kFits);
  // The fleet holds 1800 of 2000: a program of unknown placement needing 300 waits.
  EXPECT_FALSE(Acquire("d1", "D", "D", 300, At(2)).admitted);
  EXPECT_EQ(ws_.Gauges().waiting_programs, 2);
  Finish("c1", 0, PauseKind::kSessionEnd, At(3));
  const std::vector<WorkingSetDecision> resolved = ws_.TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].ticket, "d1");
}

TEST_F(WorkingSetTest, AProgramAloneRunsWhateverItsSize) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  EXPECT_EQ(Acquire("a1", "A", "A", 5000, At(0)).reason, WorkingSetReason::kFits);
}

TEST_F(WorkingSetTest, TheHostTierAndHeadroomShapeTheCapacity) {
  WorkingSetAdmission ws(WorkingSetOptions{.headroom = 0.5, .host_tier_ratio = 2.0});
  ws.Reconcile(Fleet(2, 1000), At(0));
  EXPECT_EQ(ws.Gauges().capacity_tokens, 2 * (500 + 2000));
  // An unhealthy or empty report is ignored; the engine keeps its last capacity.
  std::vector<EngineSnapshot> bad = Fleet(1, 0);
  ws.Reconcile(bad, At(1));
  EXPECT_EQ(ws.Gauges().capacity_tokens, 5000);
}

TEST_F(WorkingSetTest, HoldsFollowTheLearnedPauseOfTheirKindCappedByMaxHold) {
  ws_.Reconcile(Fleet(1, 1'000'000), At(0));
  EXPECT_EQ(ws_.PredictedHold(PauseKind::kToolCall, ""), TimeNs::Seconds(30));
  EXPECT_EQ(ws_.PredictedHold(PauseKind::kSessionEnd, ""), TimeNs(0));
  double t = 0;
  for (int i = 0; i < 20; ++i) {
    Acquire("a" + std::to_string(i), "A", "A", 10, At(t));
    Finish("a" + std::to_string(i), 10, PauseKind::kToolCall, At(t + 1));
    t += 1 + 4;  // Every tool call lasts 4 s.
  }
  const TimeNs learned = ws_.PredictedHold(PauseKind::kToolCall, "");
  EXPECT_GT(learned, TimeNs::Seconds(3));
  EXPECT_LT(learned, TimeNs::Seconds(5));
  for (int i = 0; i < 20; ++i) {
    Acquire("h" + std::to_string(i), "H", "H", 10, At(t));
    Finish("h" + std::to_string(i), 10, PauseKind::kHumanTurn, At(t + 1));
    t += 1 + 3600;  // Humans come back after an hour.
  }
  EXPECT_EQ(ws_.PredictedHold(PauseKind::kHumanTurn, ""), TimeNs::Seconds(300));
}

TEST_F(WorkingSetTest, EndingAnAgentCancelsItsWaitAndCancelIsIdempotent) {
  ws_.Reconcile(Fleet(1, 1000), At(0));
  Acquire("a1", "A", "A", 900, At(0));
  EXPECT_FALSE(Acquire("b1", "B", "B", 500, At(1)).admitted);
  EXPECT_FALSE(Acquire("c1", "C", "C", 500, At(1)).admitted);
  ws_.EndAgent("B", At(2));
  ws_.Cancel("c1", At(2));
  ws_.Cancel("c1", At(2));
  ws_.Cancel("a1", At(2));  // Admitted: a no-op.
  const std::vector<WorkingSetDecision> resolved = ws_.TakeResolved();
  ASSERT_EQ(resolved.size(), 2u);
  EXPECT_FALSE(resolved[0].admitted);
  EXPECT_EQ(resolved[0].reason, WorkingSetReason::kCancelled);
  EXPECT_EQ(ws_.counters().cancelled, 2);
  EXPECT_EQ(ws_.agents(), 2);  // A runs; C is known until it ends.
  EXPECT_TRUE(ws_.CheckInvariants().ok());
}

TEST_F(WorkingSetTest, BadRequestsAreRefusedWithNothingChanged) {
  auto acquire = [&](ProgramRequest r) { return ws_.Acquire(r, At(0)).status().code(); };
  EXPECT_EQ(acquire({.ticket = "", .program = "p", .agent = "a"}), StatusCode::kInvalidArgument);
  EXPECT_EQ(acquire({.ticket = "t", .program = "", .agent = "a"}), StatusCode::kInvalidArgument);
  EXPECT_EQ(acquire({.ticket = "t", .program = "p", .agent = std::string(1025, 'x')}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(acquire({.ticket = "t", .program = "p", .agent = "a", .reservation_tokens = -1}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(acquire({.ticket = "t", .program = "p", .agent = "a"}), StatusCode::kOk);
  EXPECT_EQ(acquire({.ticket = "t", .program = "p", .agent = "a"}), StatusCode::kAlreadyExists);
  EXPECT_EQ(acquire({.ticket = "u", .program = "q", .agent = "a"}), StatusCode::kInvalidArgument);
  EXPECT_EQ(ws_.agents(), 1);
  EXPECT_TRUE(ws_.CheckInvariants().ok());
}

TEST(WorkingSetOptionsTest, ValidateNamesTheFieldAndValue) {
  EXPECT_TRUE(WorkingSetOptions{}.Validate().ok());
  EXPECT_NE(WorkingSetOptions{.headroom = 0}.Validate().message().find("headroom"),
            std::string::npos);
  EXPECT_FALSE(WorkingSetOptions{.host_tier_ratio = -1}.Validate().ok());
  EXPECT_FALSE(WorkingSetOptions{.hold_quantile = 1.0}.Validate().ok());
  EXPECT_FALSE(WorkingSetOptions{.default_hold = TimeNs::Seconds(400)}.Validate().ok());
  EXPECT_FALSE(WorkingSetOptions{.max_wait = TimeNs::Seconds(-1)}.Validate().ok());
  EXPECT_EQ(WorkingSetReasonName(WorkingSetReason::kNoCapacity), "no_capacity");
}

// Randomized: programs with sub-agents arrive, run, pause and end in random order against a
// small fleet. After every step the invariants hold; every waiter is resolved within max_wait
// of its arrival (plus the tick granularity); no continuing request ever waits; at the end
// nothing is held, reserved or waiting.
// Long: one randomized model test: the operations, the model and the checks after each step
// read best as one loop.
TEST(WorkingSetRandomizedTest, ConservesFootprintsAndNeverStarvesAProgram) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    WorkingSetOptions options;
    options.max_wait = TimeNs::Seconds(20);
    options.default_hold = TimeNs::Seconds(5);
    WorkingSetAdmission ws(options);
    ws.Reconcile(Fleet(2, 1000), TimeNs(0));
    struct Live {
      std::string program;
      std::optional<std::string> engine;
      std::optional<std::string> ticket = {};  // Running or waiting.
      bool waiting = false;
      TimeNs since = {};
    };
    std::map<std::string, Live> agents;
    std::set<std::string> started_programs;
    int next = 0;
    TimeNs now;
    auto take = [&] {
      for (const WorkingSetDecision& d : ws.TakeResolved()) {
        for (auto& [name, a] : agents) {
          if (a.ticket == d.ticket) {
            ASSERT_TRUE(a.waiting);
            ASSERT_LE(d.wait, options.max_wait + TimeNs::Seconds(1)) << "seed " << seed;
            a.waiting = false;
            if (!d.admitted) a.ticket.reset();
          }
        }
      }
    };
    for (int step = 0; step < 400; ++step) {
      now = now + TimeNs::Seconds(std::uniform_real_distribution<double>(0, 1)(rng));
      const int action = std::uniform_int_distribution<int>(0, 9)(rng);
      if (action <= 2 || agents.empty()) {
        // A new program, or a sub-agent of a live one.
        std::string program = "p" + std::to_string(next);
        if (action == 1 && !started_programs.empty()) {
          auto pick = started_programs.begin();
          std::advance(pick, static_cast<long>(rng() % started_programs.size()));
          program = *pick;
        }
        const std::string name = program + "/" + std::to_string(next++);
        std::optional<std::string> engine;
        if (rng() % 2 == 0) engine = "e" + std::to_string(rng() % 2);
        agents[name] = Live{.program = program, .engine = engine};
        started_programs.insert(program);
      }
      // Pick an agent and move it on.
      auto it = agents.begin();
      std::advance(it, static_cast<long>(rng() % agents.size()));
      const std::string name = it->first;
      Live& a = it->second;
      if (!a.ticket.has_value()) {
        if (action == 9) {
          ws.EndAgent(name, now);
          agents.erase(name);
          take();
        } else {
          const std::string ticket = name + "#" + std::to_string(step);
          bool running = false;  // Another agent of its program runs: it continues.
          for (const auto& [other, o] : agents) {
            running |= o.program == a.program && o.ticket.has_value() && !o.waiting;
          }
          StatusOr<WorkingSetDecision> d = ws.Acquire(
              ProgramRequest{.ticket = ticket,
                             .program = a.program,
                             .agent = name,
                             .reservation_tokens = 50 + static_cast<int64_t>(rng() % 500),
                             .engine = a.engine},
              now);
          ASSERT_TRUE(d.ok()) << d.status();
          a.ticket = ticket;
          a.waiting = !d->admitted;
          a.since = now;
          if (running) {
            ASSERT_TRUE(d->admitted) << "seed " << seed << ": a continuing program waited";
            ASSERT_EQ(d->reason, WorkingSetReason::kContinuing);
          }
        }
      } else if (!a.waiting) {
        const PauseKind pause =
            action == 8 ? PauseKind::kSessionEnd
                        : (action % 2 == 0 ? PauseKind::kToolCall : PauseKind::kHumanTurn);
        ws.Finish(*a.ticket,
                  RequestEnd{.context_tokens = 100 + static_cast<int64_t>(rng() % 600),
                             .next_pause = pause},
                  now);
        a.ticket.reset();
        take();
      }
      ws.Tick(now);
      take();
      ASSERT_TRUE(ws.CheckInvariants().ok()) << "seed " << seed << ": " << ws.CheckInvariants();
    }
    // Drain: run every waiter to its end, then end every agent.
    for (int round = 0; round < 100 && !agents.empty(); ++round) {
      now = now + TimeNs::Seconds(1);
      ws.Tick(now);
      take();
      for (auto it = agents.begin(); it != agents.end();) {
        Live& a = it->second;
        if (a.ticket.has_value() && !a.waiting) {
          ws.Finish(*a.ticket, RequestEnd{.context_tokens = 10}, now);
          a.ticket.reset();
        }
        if (!a.ticket.has_value()) {
          ws.EndAgent(it->first, now);
          it = agents.erase(it);
        } else {
          ++it;
        }
        take();
      }
    }
    ASSERT_TRUE(agents.empty()) << "seed " << seed;
    const WorkingSetGauges g = ws.Gauges();
    EXPECT_EQ(g.active_tokens + g.held_tokens, 0) << "seed " << seed;
    EXPECT_EQ(g.waiting_programs, 0);
    EXPECT_EQ(g.live_programs, 0);
    EXPECT_EQ(ws.agents(), 0);
    EXPECT_FALSE(ws.NextDeadline().has_value());
    ASSERT_TRUE(ws.CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace agentkv::control
