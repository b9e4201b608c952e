// Tests of GatewayFlow: attempt rids, admission verdicts and leases, dispatch identity, the
// close protocol (cancel, abort, drain, close, answer), the drain timeout, client departures,
// idle sessions and the session cap, retained sessions, both key types, a randomized
// model-based run that checks every emitted action against a small reference of what the flow
// may do, and one that compares sessions, retention and the cap with a reference model.
#include "agentkv/control/gateway_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

// Renders an action as one short line so a scenario compares whole outboxes at once.
template <typename Key>
std::string Describe(const FlowAction<Key>& action) {
  const auto name = [](const Key& key) {
    if constexpr (std::is_same_v<Key, std::string>) {
      return key;
    } else {
      return std::to_string(key.value());
    }
  };
  if (const auto* a = std::get_if<CancelAttempt>(&action)) {
    return std::string(a->awaiting_admission ? "cancel-admission " : "cancel ") + a->rid;
  }
  if (const auto* a = std::get_if<AbortOnEveryEngine>(&action)) return "abort " + a->rid;
  if (const auto* a = std::get_if<CutUpstream>(&action)) return "cut " + a->rid;
  if (const auto* a = std::get_if<ReturnLease>(&action)) return "return " + a->lease_id;
  if (const auto* a = std::get_if<CloseOnEveryEngine<Key>>(&action))
    return "close " + name(a->session);
  const auto& answer = std::get<AnswerClose<Key>>(action);
  return "answer " + std::to_string(answer.request) + " " + name(answer.outcome.session) +
         (answer.outcome.closed ? " closed" : " failed") +
         " aborted=" + std::to_string(answer.outcome.aborted);
}

AdmissionDecision Admit(const std::string& rid) {
  AdmissionDecision d;
  d.action = AdmissionAction::kAdmit;
  d.reason = AdmissionReason::kCapacityAvailable;
  d.ticket = rid;
  d.lease_id = "lease-" + rid;
  return d;
}

AdmissionDecision BypassOf(const std::string& rid, AdmissionReason reason) {
  AdmissionDecision d;
  d.action = AdmissionAction::kBypass;
  d.reason = reason;
  d.ticket = rid;
  return d;
}

class GatewayFlowTest : public ::testing::Test {
 protected:
  void Make(bool lifecycle = true, int64_t max_sessions = 100'000) {
    GatewayFlowOptions options;
    options.lifecycle = lifecycle;
    options.idle_timeout = At(60);
    options.drain_timeout = At(5);
    options.max_sessions = max_sessions;
    flow_.emplace(options);
  }
  GatewayFlow<std::string>& flow() { return *flow_; }

  std::string Begin(const std::optional<std::string>& session, const std::string& request,
                    bool admission = false, bool streamed = false) {
    StatusOr<std::string> rid = flow().BeginAttempt(session, request, {admission, streamed}, now_);
    EXPECT_TRUE(rid.ok()) << rid.status();
    flow().CheckInvariants();
    return rid.ok() ? *rid : "";
  }
  void Dispatch(const std::string& rid) {
    StatusOr<DispatchIdentity<std::string>> identity = flow().Dispatch(rid);
    EXPECT_TRUE(identity.ok()) << identity.status();
    flow().CheckInvariants();
  }
  void Finish(const std::string& rid) {
    flow().Finish(rid, now_);
    flow().CheckInvariants();
  }
  void Close(const std::string& session, uint64_t request) {
    flow().Close(session, TerminalReason::kFinished, request, now_);
    flow().CheckInvariants();
  }
  std::vector<std::string> Actions() {
    std::vector<std::string> out;
    for (const auto& action : flow().TakeActions()) out.push_back(Describe<std::string>(action));
    return out;
  }

  std::optional<GatewayFlow<std::string>> flow_;
  TimeNs now_ = At(1000);
};

TEST_F(GatewayFlowTest, RidsAreUniquePerLiveAttemptAndNeverReusedWithinASession) {
  Make();
  EXPECT_EQ(Begin("s", "req"), "req:0");
  EXPECT_EQ(Begin("s", "req"), "req:1");  // The same client rid while the first is live.
  EXPECT_EQ(Begin(std::nullopt, "req"), "req:2");
  Dispatch("req:2");
  Finish("req:2");
  // A finished sessionless rid is free again; a session's rids are not.
  EXPECT_EQ(Begin(std::nullopt, "req"), "req:2");
  Dispatch("req:0");
  Finish("req:0");
  EXPECT_EQ(Begin("s", "req"), "req:3");
  EXPECT_EQ(flow().live_attempts(), 3);
  EXPECT_EQ(flow().BeginAttempt("s", "", {}, now_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(flow().Dispatch("nope").status().code(), StatusCode::kNotFound);
}

// Program-level FCFS on the served path: a session's incarnation is one program, numbered
// when it opens; a sessionless attempt is a program of its own; a closed session's next
// request is a new program.
TEST_F(GatewayFlowTest, ProgramsAreNumberedInTheOrderTheyArrive) {
  Make();
  const std::string a1 = Begin("a", "r1");
  const std::string b1 = Begin("b", "r2");
  const std::string solo = Begin(std::nullopt, "r3");
  const std::string a2 = Begin("a", "r4");
  EXPECT_EQ(flow().ProgramArrival("a"), 0u);
  EXPECT_EQ(flow().ProgramArrival("b"), 1u);
  EXPECT_EQ(flow().ProgramArrival("nope"), std::nullopt);
  EXPECT_EQ(flow().AttemptProgramArrival(a1), 0u);
  EXPECT_EQ(flow().AttemptProgramArrival(b1), 1u);
  EXPECT_EQ(flow().AttemptProgramArrival(solo), 2u);
  EXPECT_EQ(flow().AttemptProgramArrival(a2), 0u);  // a continues: its program's arrival.
  EXPECT_EQ(flow().AttemptProgramArrival("nope"), std::nullopt);
  for (const std::string& rid : {a1, a2}) {
    Dispatch(rid);
    Finish(rid);
  }
  Close("a", 1);
  ASSERT_TRUE(flow().OnCloseOutcome("a", true).ok());
  EXPECT_EQ(flow().ProgramArrival("a"), std::nullopt);  // Ended: forgotten.
  const std::string a3 = Begin("a", "r5");
  EXPECT_EQ(flow().AttemptProgramArrival(a3), 3u);  // A new program, after b's.
  EXPECT_EQ(flow().ProgramArrival("a"), 3u);
}

TEST_F(GatewayFlowTest, DispatchCarriesTheSessionOnlyWithTheLifecycle) {
  for (bool lifecycle : {true, false}) {
    Make(lifecycle);
    const std::string rid = Begin("s", "r");
    StatusOr<DispatchIdentity<std::string>> identity = flow().Dispatch(rid);
    ASSERT_TRUE(identity.ok());
    EXPECT_EQ(identity->rid, "r:0");
    EXPECT_EQ(identity->session, lifecycle ? std::optional<std::string>("s") : std::nullopt);
    // Dispatched once only.
    EXPECT_EQ(flow().Dispatch(rid).status().code(), StatusCode::kFailedPrecondition);
  }
}

TEST_F(GatewayFlowTest, AdmissionVerdictsAndTheLeaseReturnedAtFinish) {
  Make();
  const std::string admitted = Begin("s", "a", /*admission=*/true);
  EXPECT_EQ(flow().Dispatch(admitted).status().code(), StatusCode::kFailedPrecondition)
      << "an attempt waiting for admission must not be dispatched";
  EXPECT_EQ(*flow().attempt_phase(admitted), AttemptPhase::kAdmitting);
  EXPECT_EQ(*flow().OnAdmission(admitted, Admit(admitted)), AdmissionVerdict::kDispatch);
  EXPECT_EQ(flow().lease_of(admitted), "lease-a:0");
  EXPECT_EQ(flow().OnAdmission(admitted, Admit(admitted)).status().code(),
            StatusCode::kFailedPrecondition);
  Dispatch(admitted);
  Finish(admitted);
  EXPECT_THAT(Actions(), ElementsAre("return lease-a:0"));

  const std::string refused = Begin("s", "b", true);
  AdmissionDecision refuse = BypassOf(refused, AdmissionReason::kOversized);
  refuse.action = AdmissionAction::kRefuse;
  EXPECT_EQ(*flow().OnAdmission(refused, refuse), AdmissionVerdict::kRefused);
  const std::string cancelled = Begin("s", "c", true);
  EXPECT_EQ(*flow().OnAdmission(cancelled, BypassOf(cancelled, AdmissionReason::kCancelled)),
            AdmissionVerdict::kCancelled);
  const std::string aged = Begin("s", "d", true);
  EXPECT_EQ(*flow().OnAdmission(aged, BypassOf(aged, AdmissionReason::kAged)),
            AdmissionVerdict::kDispatch);
  for (const std::string& rid : {refused, cancelled, aged}) Finish(rid);
  EXPECT_THAT(Actions(), IsEmpty()) << "bypassed attempts hold no lease";
  EXPECT_EQ(flow().OnAdmission("x:0", Admit("x:0")).status().code(), StatusCode::kNotFound);
}

TEST_F(GatewayFlowTest, CloseOfAnIdleSessionClosesOnceAndAnswersEveryRequest) {
  Make();
  Dispatch(Begin("s", "r"));
  Finish("r:0");
  Close("s", 1);
  EXPECT_THAT(Actions(), ElementsAre("close s"));
  EXPECT_EQ(*flow().phase("s"), SessionPhase::kClosing);
  Close("s", 2);  // While closing: waits too, no second fan-out.
  EXPECT_THAT(Actions(), IsEmpty());
  EXPECT_EQ(flow().BeginAttempt("s", "r", {}, now_).status().code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(flow().OnCloseOutcome("s", true).ok());
  EXPECT_THAT(Actions(), ElementsAre("answer 1 s closed aborted=0", "answer 2 s closed aborted=0"));
  Close("s", 3);  // Ended: the remembered outcome at once.
  EXPECT_THAT(Actions(), ElementsAre("answer 3 s closed aborted=0"));
  EXPECT_EQ(flow().counters().close, 1);
  EXPECT_EQ(flow().OnCloseOutcome("s", true).code(), StatusCode::kFailedPrecondition);
  // A new request starts a new incarnation.
  EXPECT_EQ(Begin("s", "r"), "r:0");
  EXPECT_EQ(*flow().phase("s"), SessionPhase::kActive);
}

TEST_F(GatewayFlowTest, CloseCancelsQueuedAttemptsAbortsDispatchedOnesAndClosesAfterTheDrain) {
  Make();
  const std::string waiting = Begin("s", "w", /*admission=*/true);
  const std::string ready = Begin("s", "q");
  const std::string a = Begin("s", "a", true);
  ASSERT_EQ(*flow().OnAdmission(a, Admit(a)), AdmissionVerdict::kDispatch);
  Dispatch(a);
  const std::string b = Begin("s", "b");
  Dispatch(b);
  Close("s", 7);
  EXPECT_THAT(Actions(),
              ElementsAre("cancel-admission w:0", "cancel q:0", "abort a:0", "abort b:0"));
  EXPECT_EQ(*flow().phase("s"), SessionPhase::kDraining);
  EXPECT_EQ(flow().NextDrainDeadline(), now_ + At(5));
  // The cancelled attempts may not be dispatched, even one admitted just before its cancel
  // reached the coordinator; their ends do not move the drain.
  EXPECT_EQ(*flow().OnAdmission(waiting, Admit(waiting)), AdmissionVerdict::kCancelled);
  EXPECT_EQ(flow().Dispatch(ready).status().code(), StatusCode::kFailedPrecondition);
  Finish(waiting);
  Finish(ready);
  Finish(a);
  EXPECT_THAT(Actions(), ElementsAre("return lease-w:0", "return lease-a:0"));
  Finish(b);  // The last dispatched attempt: now the close.
  EXPECT_THAT(Actions(), ElementsAre("close s"));
  ASSERT_TRUE(flow().OnCloseOutcome("s", true).ok());
  EXPECT_THAT(Actions(), ElementsAre("answer 7 s closed aborted=2"));
  EXPECT_EQ(flow().live_attempts(), 0);
}

TEST_F(GatewayFlowTest, ADrainPastItsTimeoutClosesAnywayAndLateFinishesAreHarmless) {
  Make();
  const std::string rid = Begin("s", "r");
  Dispatch(rid);
  Close("s", 1);
  EXPECT_THAT(Actions(), ElementsAre("abort r:0"));
  EXPECT_EQ(flow().Sweep(now_ + At(4.9)), 0);
  EXPECT_EQ(flow().Sweep(now_ + At(5)), 1);
  flow().CheckInvariants();
  EXPECT_THAT(Actions(), ElementsAre("close s"));
  EXPECT_EQ(flow().NextDrainDeadline(), std::nullopt);
  ASSERT_TRUE(flow().OnCloseOutcome("s", false).ok());
  EXPECT_THAT(Actions(), ElementsAre("answer 1 s failed aborted=1"));
  EXPECT_EQ(flow().counters().close_failure, 1);
  Finish(rid);  // The aborted attempt's late answer.
  EXPECT_THAT(Actions(), IsEmpty());
  EXPECT_EQ(*flow().phase("s"), SessionPhase::kTerminal);
}

// Drains are indexed by deadline: the next deadline is the earliest one, a sweep closes every
// overdue drain and no other, in session order, whatever order the drains began in.
TEST_F(GatewayFlowTest, OverdueDrainsCloseInSessionOrderAndTheNextDeadlineIsTheEarliest) {
  Make();
  const TimeNs start = now_;
  for (const char* session : {"c", "a", "d", "b"}) {
    Dispatch(Begin(session, "r"));
    Close(session, 1);
    now_ += At(1);
  }
  Actions();
  EXPECT_EQ(flow().NextDrainDeadline(), start + At(5));  // c's.
  // At start + 7 the drains of c (5), a (6) and d (7) are overdue, b's (8) is not.
  EXPECT_EQ(flow().Sweep(start + At(7)), 3);
  flow().CheckInvariants();
  EXPECT_THAT(Actions(), ElementsAre("close a", "close c", "close d"));
  EXPECT_EQ(flow().NextDrainDeadline(), start + At(8));
  EXPECT_EQ(flow().Sweep(start + At(8)), 1);
  EXPECT_THAT(Actions(), ElementsAre("close b"));
  EXPECT_EQ(flow().NextDrainDeadline(), std::nullopt);
  flow().CheckInvariants();
}

TEST_F(GatewayFlowTest, AClientThatLeavesCancelsItsWaitOrCutsItsUpstream) {
  Make();
  const std::string waiting = Begin("s", "w", /*admission=*/true);
  flow().OnClientGone(waiting);
  flow().OnClientGone(waiting);  // Idempotent.
  EXPECT_THAT(Actions(), ElementsAre("cancel-admission w:0"));
  EXPECT_EQ(*flow().OnAdmission(waiting, Admit(waiting)), AdmissionVerdict::kClientGone);
  Finish(waiting);
  EXPECT_THAT(Actions(), ElementsAre("return lease-w:0"));

  const std::string plain = Begin("s", "p");
  const std::string stream = Begin("s", "t", false, /*streamed=*/true);
  const std::string ready = Begin("s", "r");
  Dispatch(plain);
  Dispatch(stream);
  flow().OnClientGone(plain);
  flow().OnClientGone(stream);
  flow().OnClientGone(ready);
  EXPECT_THAT(Actions(), ElementsAre("abort p:0", "cut p:0", "cut t:0"));
  EXPECT_EQ(flow().Dispatch(ready).status().code(), StatusCode::kFailedPrecondition);
  flow().OnClientGone("unknown:0");
  EXPECT_THAT(Actions(), IsEmpty());
}

TEST_F(GatewayFlowTest, WithTheLifecycleOffASessionEndsWithoutAClose) {
  Make(/*lifecycle=*/false);
  const std::string rid = Begin("s", "r");
  Dispatch(rid);
  Close("s", 1);
  EXPECT_THAT(Actions(), ElementsAre("abort r:0"));
  Finish(rid);
  EXPECT_THAT(Actions(), ElementsAre("answer 1 s closed aborted=1"));
  EXPECT_EQ(flow().counters().close, 0);
  EXPECT_EQ(flow().counters().terminated, 1);
}

TEST_F(GatewayFlowTest, IdleSessionsEndAndTheCapEvictsTheLongestIdle) {
  Make(true, /*max_sessions=*/2);
  Finish(Begin("a", "ra"));
  now_ = now_ + At(1);
  Finish(Begin("b", "rb"));
  now_ = now_ + At(1);
  const std::string c = Begin("c", "rc");  // At the cap: "a", idle the longest, is ended.
  EXPECT_THAT(Actions(), ElementsAre("close a"));
  EXPECT_EQ(flow().evicted(), 1);
  const std::string b = Begin("b", "rb");  // "b" is busy now; so is "c": "d" is refused.
  EXPECT_EQ(flow().BeginAttempt("d", "rd", {}, now_).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(flow().refused(), 1);
  EXPECT_EQ(flow().active_sessions(), 2);
  Finish(b);
  Finish(c);
  EXPECT_EQ(flow().Sweep(now_ + At(59)), 0);
  EXPECT_EQ(flow().Sweep(now_ + At(60)), 2);
  EXPECT_THAT(Actions(), ElementsAre("close b", "close c"));
  flow().CheckInvariants();
}

AttemptSpec Retain(std::optional<bool> retain) { return AttemptSpec{.retain = retain}; }

// A retained session (a partial rollout kept across steps) outlives the idle timeout and is
// never the session the cap ends; a plain one beside it is ended by both.
TEST_F(GatewayFlowTest, ARetainedSessionOutlivesTheIdleTimeoutAndIsNeverEvicted) {
  GatewayFlowOptions options;
  options.lifecycle = true;
  options.idle_timeout = At(60);
  options.max_sessions = 3;
  options.max_retained_sessions = 2;
  flow_.emplace(options);
  StatusOr<std::string> kept = flow().BeginAttempt("kept", "r", Retain(true), now_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(flow().retained("kept"));
  EXPECT_EQ(flow().retained_sessions(), 1);
  Finish(*kept);
  Finish(Begin("plain", "r"));
  EXPECT_EQ(flow().NextIdleDeadline(), now_ + At(60)) << "only the plain session can idle out";
  EXPECT_EQ(flow().Sweep(now_ + At(600)), 1);
  EXPECT_THAT(Actions(), ElementsAre("close plain"));
  ASSERT_TRUE(flow().OnCloseOutcome("plain", true).ok());
  EXPECT_EQ(*flow().phase("kept"), SessionPhase::kActive);
  EXPECT_EQ(flow().NextIdleDeadline(), std::nullopt);

  // At the cap the idle plain session makes room, never the retained one, idle for longer.
  now_ = now_ + At(600);
  const std::string busy = Begin("busy", "r");
  now_ = now_ + At(1);
  Finish(Begin("idle", "r"));
  now_ = now_ + At(1);
  const std::string fresh = Begin("fresh", "r");
  EXPECT_THAT(Actions(), ElementsAre("close idle"));
  EXPECT_EQ(flow().evicted(), 1);
  // Now every session is busy or retained: a newcomer is refused (503), retry later.
  const StatusOr<std::string> refused = flow().BeginAttempt("late", "r", {}, now_);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("1 retained"));
  EXPECT_EQ(flow().refused(), 1);
  EXPECT_EQ(*flow().phase("kept"), SessionPhase::kActive);
  Finish(busy);
  Finish(fresh);
  // Only an explicit close ends it, closing it on every engine like any other session.
  Close("kept", 9);
  EXPECT_THAT(Actions(), ElementsAre("close kept"));
  EXPECT_EQ(flow().retained_sessions(), 0);
  EXPECT_FALSE(flow().retained("kept"));
  ASSERT_TRUE(flow().OnCloseOutcome("kept", true).ok());
  EXPECT_THAT(Actions(), ElementsAre("answer 9 kept closed aborted=0"));
  // The next incarnation starts unretained.
  Finish(Begin("kept", "again"));
  EXPECT_FALSE(flow().retained("kept"));
  flow().CheckInvariants();
}

// Retention belongs to the incarnation: any later request may set or clear it, a request
// without the mark leaves it; once cleared, the idle timeout applies again.
TEST_F(GatewayFlowTest, AnyRequestOfTheSessionSetsOrClearsItsRetention) {
  Make();
  StatusOr<std::string> rid = flow().BeginAttempt("s", "a", Retain(true), now_);
  ASSERT_TRUE(rid.ok());
  Finish(*rid);
  Finish(Begin("s", "b"));  // No mark: still retained.
  EXPECT_TRUE(flow().retained("s"));
  EXPECT_EQ(flow().Sweep(now_ + At(3600)), 0);
  rid = flow().BeginAttempt("s", "c", Retain(false), now_);
  ASSERT_TRUE(rid.ok());
  EXPECT_FALSE(flow().retained("s"));
  EXPECT_EQ(flow().retained_sessions(), 0);
  EXPECT_EQ(flow().Sweep(now_ + At(3600)), 0) << "busy: not idle";
  Finish(*rid);
  EXPECT_EQ(flow().NextIdleDeadline(), now_ + At(60));
  EXPECT_EQ(flow().Sweep(now_ + At(60)), 1);
  EXPECT_THAT(Actions(), ElementsAre("close s"));
}

// The bound on retained sessions: a mark past it is refused and changes nothing (the session is
// not even opened); marks already held, clearing, and unmarked requests always pass.
TEST_F(GatewayFlowTest, RetentionPastItsBoundIsRefusedAndChangesNothing) {
  GatewayFlowOptions options;
  options.max_sessions = 10;
  options.max_retained_sessions = 1;
  flow_.emplace(options);
  ASSERT_TRUE(flow().BeginAttempt("a", "r", Retain(true), now_).ok());
  const StatusOr<std::string> refused = flow().BeginAttempt("b", "r", Retain(true), now_);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("--max-retained-sessions 1"));
  EXPECT_FALSE(flow().Knows("b"));
  EXPECT_EQ(flow().retain_refused(), 1);
  EXPECT_EQ(flow().live_attempts(), 1);
  EXPECT_TRUE(flow().BeginAttempt("a", "again", Retain(true), now_).ok()) << "already retained";
  EXPECT_TRUE(flow().BeginAttempt("b", "r", {}, now_).ok());
  EXPECT_TRUE(flow().BeginAttempt("a", "clear", Retain(false), now_).ok());
  EXPECT_TRUE(flow().BeginAttempt("b", "mark", Retain(true), now_).ok());
  EXPECT_TRUE(flow().retained("b"));
  EXPECT_EQ(flow().BeginAttempt(std::nullopt, "r", Retain(true), now_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(flow().BeginAttempt(std::nullopt, "r", Retain(false), now_).ok());
  flow().CheckInvariants();

  options.max_retained_sessions = 0;
  flow_.emplace(options);
  EXPECT_EQ(flow().BeginAttempt("a", "r", Retain(true), now_).status().code(),
            StatusCode::kResourceExhausted);
  options.max_retained_sessions = std::nullopt;
  EXPECT_EQ(options.RetainedSessionBound(), 5);
  options.max_retained_sessions = 11;
  EXPECT_EQ(
      options.Validate(),
      InvalidArgumentError("max_retained_sessions must be in [0, max_sessions = 10], got 11"));
  options.max_retained_sessions = -1;
  EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);
}

// Random begins (with and without a retention mark), finishes, closes and sweeps, compared
// after every event with a small reference model of the sessions: which are active, draining
// or ended, which are retained, which one the cap evicts (the longest-idle unretained one,
// ties by key), which newcomers and marks are refused, and when the next idle sweep is due.
TEST(GatewayFlowRetentionModelTest, SessionsRetentionAndTheCapFollowTheReference) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    GatewayFlowOptions options;
    options.lifecycle = false;  // Ended sessions end at once: the reference stays small.
    options.idle_timeout = At(20);
    options.drain_timeout = At(1e6);
    options.max_sessions = 1 + static_cast<int64_t>(seed % 4);
    options.max_retained_sessions = std::min<int64_t>(seed % 3, options.max_sessions);
    options.max_closed_sessions = 3;
    GatewayFlow<std::string> flow(options);

    struct Ref {
      bool draining = false;
      bool retained = false;
      std::set<std::string> live;
      TimeNs last_activity;
    };
    std::map<std::string, Ref> ref;  // Sessions not ended.
    std::map<std::string, std::string> session_of;
    int64_t evicted = 0;
    int64_t refused = 0;
    int64_t retain_refused = 0;
    TimeNs now = At(0);
    const std::vector<std::string> keys = {"s0", "s1", "s2", "s3", "s4", "s5"};
    const auto active = [&] {
      return std::count_if(ref.begin(), ref.end(),
                           [](const auto& e) { return !e.second.draining; });
    };
    const auto retained = [&] {
      return std::count_if(ref.begin(), ref.end(), [](const auto& e) { return e.second.retained; });
    };
    // The idle unretained active session with the oldest last activity (ties by key).
    const auto oldest_idle = [&]() -> std::optional<std::string> {
      std::optional<std::string> oldest;
      for (const auto& [key, s] : ref) {
        if (s.draining || s.retained || !s.live.empty()) continue;
        if (!oldest.has_value() || s.last_activity < ref.at(*oldest).last_activity) oldest = key;
      }
      return oldest;
    };
    // Ends a session that is not retained (the caller cleared the mark).
    const auto terminate = [&](const std::string& key) {
      Ref& s = ref.at(key);
      s.retained = false;
      s.draining = true;
      if (s.live.empty()) ref.erase(key);
    };

    for (int step = 0; step < 500; ++step) {
      now = now + TimeNs::Millis(std::uniform_int_distribution<int>(0, 3000)(rng));
      const std::string key = keys[rng() % keys.size()];
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      if (op <= 4) {
        std::optional<bool> retain;
        if (const auto r = rng() % 3; r < 2) retain = r == 0;
        StatusOr<std::string> rid =
            flow.BeginAttempt(key, "q" + std::to_string(step), Retain(retain), now);
        const bool opens = !ref.contains(key);
        if (!opens && ref.at(key).draining) {
          ASSERT_EQ(rid.status().code(), StatusCode::kFailedPrecondition);
        } else if (retain.value_or(false) && (opens || !ref.at(key).retained) &&
                   retained() >= options.RetainedSessionBound()) {
          ASSERT_EQ(rid.status().code(), StatusCode::kResourceExhausted) << rid.status();
          ++retain_refused;
        } else if (opens && active() >= options.max_sessions && !oldest_idle().has_value()) {
          ASSERT_EQ(rid.status().code(), StatusCode::kUnavailable) << rid.status();
          ++refused;
        } else {
          ASSERT_TRUE(rid.ok()) << rid.status();
          if (opens && active() >= options.max_sessions) {
            terminate(*oldest_idle());
            ++evicted;
          }
          Ref& s = ref[key];
          s.live.insert(*rid);
          s.last_activity = now;
          if (retain.has_value()) s.retained = *retain;
          session_of[*rid] = key;
          ASSERT_TRUE(flow.Dispatch(*rid).ok());
        }
      } else if (op <= 6) {
        if (session_of.empty()) continue;
        auto it = session_of.begin();
        std::advance(it, static_cast<long>(rng() % session_of.size()));
        const auto [rid, owner] = *it;
        session_of.erase(it);
        flow.Finish(rid, now);
        Ref& s = ref.at(owner);
        s.live.erase(rid);
        s.last_activity = now;
        if (s.draining && s.live.empty()) ref.erase(owner);
      } else if (op == 7) {
        flow.Close(key, TerminalReason::kFinished, static_cast<uint64_t>(step) + 1, now);
        if (ref.contains(key) && !ref.at(key).draining) terminate(key);
      } else {
        flow.Sweep(now);
        std::vector<std::string> idle;
        for (const auto& [k, s] : ref) {
          if (!s.draining && !s.retained && s.live.empty() && now - s.last_activity >= At(20)) {
            idle.push_back(k);
          }
        }
        for (const std::string& k : idle) terminate(k);
      }
      (void)flow.TakeActions();
      flow.CheckInvariants();
      for (const std::string& k : keys) {
        SCOPED_TRACE("step " + std::to_string(step) + " session " + k);
        const StatusOr<SessionPhase> phase = flow.phase(k);
        if (!ref.contains(k)) {
          EXPECT_TRUE(!phase.ok() || *phase == SessionPhase::kTerminal);
        } else {
          ASSERT_TRUE(phase.ok());
          EXPECT_EQ(*phase, ref.at(k).draining ? SessionPhase::kDraining : SessionPhase::kActive);
        }
        EXPECT_EQ(flow.retained(k), ref.contains(k) && ref.at(k).retained);
      }
      ASSERT_EQ(flow.active_sessions(), active());
      ASSERT_EQ(flow.retained_sessions(), retained());
      ASSERT_LE(flow.retained_sessions(), options.RetainedSessionBound());
      ASSERT_EQ(flow.live_attempts(), static_cast<int64_t>(session_of.size()));
      ASSERT_EQ(flow.evicted(), evicted);
      ASSERT_EQ(flow.refused(), refused);
      ASSERT_EQ(flow.retain_refused(), retain_refused);
      const std::optional<std::string> next = oldest_idle();
      ASSERT_EQ(flow.NextIdleDeadline(),
                next.has_value() ? std::optional<TimeNs>(ref.at(*next).last_activity + At(20))
                                 : std::nullopt);
    }
  }
}

// A session that lives for many requests keeps bounded memory: ended rids beyond the bound are
// forgotten oldest first, live ones never are, and a close still aborts every dispatched
// attempt.
TEST_F(GatewayFlowTest, AnActiveSessionRemembersBoundedEndedAttempts) {
  Make();
  const std::string held = Begin("s", "held");
  Dispatch(held);
  for (int64_t i = 0; i < 3 * kMaxEndedAttemptsPerSession; ++i) {
    const std::string rid = Begin("s", "r");
    Dispatch(rid);
    flow().Finish(rid, now_);
  }
  flow().CheckInvariants();
  EXPECT_EQ(flow().live_attempts(), 1);
  // The rids keep counting up: an ended rid is never handed out again in the session.
  const std::string next = "r:" + std::to_string(3 * kMaxEndedAttemptsPerSession);
  EXPECT_EQ(Begin("s", "r"), next);
  Close("s", 1);
  EXPECT_THAT(Actions(), ElementsAre("cancel " + next, "abort held:0"));
}

TEST(GatewayFlowSessionIdTest, TheSimulatorsTypedSessionIdsRunTheSameFlow) {
  GatewayFlowOptions options;
  options.lifecycle = true;
  GatewayFlow<SessionId> flow(options);
  StatusOr<std::string> rid = flow.BeginAttempt(SessionId(7), "42", {}, At(0));
  ASSERT_TRUE(rid.ok());
  EXPECT_EQ(*rid, "42:0");
  StatusOr<DispatchIdentity<SessionId>> identity = flow.Dispatch(*rid);
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(identity->session, SessionId(7));
  flow.Close(SessionId(7), TerminalReason::kFinished, 1, At(1));
  flow.Finish(*rid, At(2));
  std::vector<std::string> actions;
  for (const auto& action : flow.TakeActions()) actions.push_back(Describe<SessionId>(action));
  EXPECT_THAT(actions, ElementsAre("abort 42:0", "close 7"));
  ASSERT_TRUE(flow.OnCloseOutcome(SessionId(7), true).ok());
  flow.CheckInvariants();
}

// Drives the flow with random events and checks each outbox against a reference of what the
// protocol allows: cancels only for undispatched attempts, aborts only for dispatched ones,
// each lease returned exactly once at its attempt's finish, one close per ended incarnation
// and only once nothing it waits for is in flight (or its drain deadline passed), and every
// close request answered exactly once.
TEST(GatewayFlowModelTest, RandomEventsKeepTheProtocol) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    GatewayFlowOptions options;
    options.lifecycle = seed % 3 != 0;
    options.idle_timeout = At(seed % 2 == 0 ? 0 : 20);
    options.drain_timeout = At(3);
    options.max_sessions = 1 + static_cast<int64_t>(seed % 4);
    options.max_closed_sessions = 2;
    GatewayFlow<std::string> flow(options);

    // Reference state.
    struct RefAttempt {
      std::optional<std::string> session;
      bool dispatched = false;
      bool admitting = false;
      std::optional<std::string> lease;
    };
    std::map<std::string, RefAttempt> live;
    std::set<std::string> leases_out;
    std::set<uint64_t> unanswered;
    std::set<std::string> closing;
    TimeNs now = At(0);
    uint64_t next_request = 1;
    const std::vector<std::string> sessions = {"s0", "s1", "s2", "s3"};

    const auto check_actions = [&] {
      for (const auto& action : flow.TakeActions()) {
        if (const auto* cancel = std::get_if<CancelAttempt>(&action)) {
          ASSERT_TRUE(live.contains(cancel->rid)) << "cancel of a finished attempt";
          EXPECT_FALSE(live[cancel->rid].dispatched) << "cancel of a dispatched attempt";
          if (!cancel->awaiting_admission) continue;
          EXPECT_TRUE(live[cancel->rid].admitting);
        } else if (const auto* abort = std::get_if<AbortOnEveryEngine>(&action)) {
          ASSERT_TRUE(live.contains(abort->rid));
          EXPECT_TRUE(live[abort->rid].dispatched) << "abort of an undispatched attempt";
        } else if (const auto* cut = std::get_if<CutUpstream>(&action)) {
          ASSERT_TRUE(live.contains(cut->rid));
          EXPECT_TRUE(live[cut->rid].dispatched);
        } else if (const auto* lease = std::get_if<ReturnLease>(&action)) {
          EXPECT_EQ(leases_out.erase(lease->lease_id), 1u) << "lease returned twice or never lent";
        } else if (const auto* close = std::get_if<CloseOnEveryEngine<std::string>>(&action)) {
          EXPECT_TRUE(options.lifecycle);
          EXPECT_TRUE(closing.insert(close->session).second) << "second close of one incarnation";
        } else {
          const auto& answer = std::get<AnswerClose<std::string>>(action);
          EXPECT_EQ(unanswered.erase(answer.request), 1u) << "close answered twice";
        }
      }
    };

    for (int step = 0; step < 400; ++step) {
      now = now + TimeNs::Millis(std::uniform_int_distribution<int>(0, 1500)(rng));
      const int op = std::uniform_int_distribution<int>(0, 9)(rng);
      std::vector<std::string> rids;
      for (const auto& [rid, a] : live) rids.push_back(rid);
      const auto pick = [&]() -> std::string {
        return rids[std::uniform_int_distribution<size_t>(0, rids.size() - 1)(rng)];
      };
      if (op <= 2 || rids.empty()) {
        std::optional<std::string> session;
        if (op != 0) session = sessions[rng() % sessions.size()];
        const bool admission = rng() % 2 == 0;
        AttemptSpec spec{.awaits_admission = admission, .streamed = rng() % 2 == 0};
        // Retained sessions end only by a close: the drain and close rules hold for them too.
        if (session.has_value() && rng() % 4 == 0) spec.retain = rng() % 2 == 0;
        StatusOr<std::string> rid =
            flow.BeginAttempt(session, "r" + std::to_string(rng() % 5), spec, now);
        if (rid.ok()) live[*rid] = RefAttempt{session, false, admission, std::nullopt};
      } else if (op == 3) {
        const std::string rid = pick();
        if (live[rid].admitting) {
          AdmissionDecision d = rng() % 2 == 0 ? Admit(rid) : BypassOf(rid, AdmissionReason::kAged);
          ASSERT_TRUE(flow.OnAdmission(rid, d).ok());
          live[rid].admitting = false;
          if (d.lease_id.has_value()) leases_out.insert(*d.lease_id);
        }
      } else if (op == 4) {
        const std::string rid = pick();
        if (flow.Dispatch(rid).ok()) {
          EXPECT_FALSE(live[rid].admitting);
          live[rid].dispatched = true;
        }
      } else if (op == 5) {
        const std::string rid = pick();
        flow.OnClientGone(rid);
      } else if (op == 6 || op == 7) {
        const std::string rid = pick();
        check_actions();
        flow.Finish(rid, now);
        live.erase(rid);
      } else if (op == 8) {
        check_actions();
        const uint64_t request = next_request++;
        unanswered.insert(request);
        flow.Close(sessions[rng() % sessions.size()], TerminalReason::kFinished, request, now);
      } else {
        flow.Sweep(now);
      }
      check_actions();
      // Outstanding closes answer at random.
      for (auto it = closing.begin(); it != closing.end();) {
        if (rng() % 2 == 0) {
          ASSERT_TRUE(flow.OnCloseOutcome(*it, rng() % 4 != 0).ok());
          it = closing.erase(it);
        } else {
          ++it;
        }
      }
      check_actions();
      flow.CheckInvariants();
      // Every attempt still counted in a drain is dispatched and live.
      EXPECT_EQ(flow.live_attempts(), static_cast<int64_t>(live.size()));
    }
    // Wind down: every attempt answers, every drain and close completes.
    for (const auto& [rid, a] : live) {
      if (a.admitting) {
        ASSERT_TRUE(flow.OnAdmission(rid, BypassOf(rid, AdmissionReason::kCancelled)).ok());
      }
    }
    check_actions();
    std::vector<std::string> rids;
    for (const auto& [rid, a] : live) rids.push_back(rid);
    for (const std::string& rid : rids) {
      check_actions();
      flow.Finish(rid, now);
      live.erase(rid);
    }
    check_actions();
    for (const std::string& s : closing) ASSERT_TRUE(flow.OnCloseOutcome(s, true).ok());
    closing.clear();
    check_actions();
    flow.CheckInvariants();
    EXPECT_TRUE(leases_out.empty()) << leases_out.size() << " leases never returned";
    EXPECT_TRUE(unanswered.empty()) << unanswered.size() << " close requests never answered";
    EXPECT_EQ(flow.terminating_sessions(), 0);
    EXPECT_EQ(flow.live_attempts(), 0);
  }
}

TEST_F(GatewayFlowTest, HistoryHoldsTheLastDispatchedPromptOfTheIncarnation) {
  Make();
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  StatusOr<std::string> first =
      flow().BeginAttempt("s", "r1", AttemptSpec{.prompt_tokens = 1000}, now_);
  ASSERT_TRUE(first.ok());
  // Begun, not dispatched: the session holds nothing yet.
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  Dispatch(*first);
  EXPECT_EQ(flow().History("s"), (SessionHistory{true, 1000}));
  Finish(*first);
  StatusOr<std::string> second =
      flow().BeginAttempt("s", "r2", AttemptSpec{.prompt_tokens = 1500}, now_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(flow().History("s"), (SessionHistory{true, 1000}));
  Dispatch(*second);
  Finish(*second);
  EXPECT_EQ(flow().History("s"), (SessionHistory{true, 1500}));
  // A closed session holds nothing, and its next incarnation starts afresh.
  Close("s", 1);
  ASSERT_TRUE(flow().OnCloseOutcome("s", true).ok());
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  const std::string again = Begin("s", "r3");
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  Dispatch(again);
  EXPECT_EQ(flow().History("s"), (SessionHistory{true, 0}));
}

}  // namespace
}  // namespace agentkv::control
