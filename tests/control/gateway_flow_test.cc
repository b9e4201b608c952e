// Tests of GatewayFlow: attempt rids, admission verdicts and leases, dispatch identity, the
// close protocol (cancel, abort, drain, close, answer), the drain timeout, client departures,
// idle sessions and the session cap, retained sessions, both key types and the history admission
// v2 reads. Parent returns: gateway_flow_parent_return_test.cc; the randomized model-based
// runs: gateway_flow_model_test.cc.
#include "agentkv/control/gateway_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gateway_flow_test_support.h"

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_support::Admit;
using testing_support::At;
using testing_support::BypassOf;
using testing_support::Describe;
using testing_support::GatewayFlowTest;
using testing_support::Retain;
using testing_support::Spec;

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

TEST_F(GatewayFlowTest, HistoryHoldsTheLastDispatchedPromptOfTheIncarnation) {
  Make();
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  StatusOr<std::string> first = flow().BeginAttempt("s", "r1", Spec{.prompt_tokens = 1000}, now_);
  ASSERT_TRUE(first.ok());
  // Begun, not dispatched: the session holds nothing yet.
  EXPECT_EQ(flow().History("s"), SessionHistory{});
  Dispatch(*first);
  EXPECT_EQ(flow().History("s"), (SessionHistory{true, 1000}));
  Finish(*first);
  StatusOr<std::string> second = flow().BeginAttempt("s", "r2", Spec{.prompt_tokens = 1500}, now_);
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
