#include "agentkv/control/session_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Renders an action as "cancel <rid>", "abort <rid>" or "close <session>" so scenarios can
// compare whole outboxes at once.
std::string Describe(const LifecycleAction& action) {
  if (const auto* cancel = std::get_if<CancelAttemptAction>(&action)) {
    return "cancel " + cancel->rid;
  }
  if (const auto* abort = std::get_if<AbortRequestAction>(&action)) return "abort " + abort->rid;
  return "close " + std::get<CloseSessionAction>(action).session_id;
}

std::vector<std::string> Describe(const std::vector<LifecycleAction>& actions) {
  std::vector<std::string> out;
  for (const LifecycleAction& action : actions) out.push_back(Describe(action));
  return out;
}

// The caller's side of a close: posts to every engine base URL, as the gateway does (the
// router does not proxy /close_session). Engines listed in `failing` answer with an error.
struct FakeFleet {
  std::vector<std::string> engine_urls;
  std::vector<std::string> failing;
  // (url, body) of every post, in order.
  std::vector<std::pair<std::string, std::string>> posts;

  std::vector<Status> CloseOnEveryEngine(const CloseSessionAction& close) {
    std::vector<Status> results;
    for (const std::string& url : engine_urls) {
      posts.emplace_back(url + "/close_session", "{\"session_id\": \"" + close.session_id + "\"}");
      const bool fails = std::find(failing.begin(), failing.end(), url) != failing.end();
      results.push_back(fails ? UnavailableError(url + " refused") : Status::Ok());
    }
    return results;
  }
};

class SessionLifecycleTest : public ::testing::Test {
 protected:
  explicit SessionLifecycleTest(bool lifecycle = true)
      : planner_(SessionLifecycleOptions{.agentic_session_lifecycle = lifecycle}) {}

  void Open(const std::string& session) {
    ASSERT_TRUE(planner_.OpenSession(session).ok());
    planner_.CheckInvariants();
  }
  std::string Begin(const std::string& session, const std::string& request, int64_t attempt) {
    StatusOr<std::string> rid = planner_.BeginAttempt(session, request, attempt);
    EXPECT_TRUE(rid.ok()) << rid.status();
    planner_.CheckInvariants();
    return rid.ok() ? *rid : std::string();
  }
  void Dispatch(const std::string& rid) {
    StatusOr<GenerateIdentity> identity = planner_.MarkDispatched(rid);
    EXPECT_TRUE(identity.ok()) << identity.status();
    planner_.CheckInvariants();
  }
  void Finish(const std::string& rid) {
    EXPECT_TRUE(planner_.MarkFinished(rid).ok());
    planner_.CheckInvariants();
  }
  void Terminate(const std::string& session, TerminalReason reason = TerminalReason::kFinished) {
    EXPECT_TRUE(planner_.Terminate(session, reason).ok());
    planner_.CheckInvariants();
  }
  void CloseOutcome(const std::string& session, bool ok) {
    EXPECT_TRUE(planner_.OnCloseOutcome(session, ok).ok());
    planner_.CheckInvariants();
  }
  SessionPhase Phase(const std::string& session) const {
    StatusOr<SessionPhase> phase = planner_.phase(session);
    EXPECT_TRUE(phase.ok()) << phase.status();
    return phase.ok() ? *phase : SessionPhase::kActive;
  }
  AttemptState State(const std::string& rid) const {
    StatusOr<AttemptState> state = planner_.attempt_state(rid);
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *state : AttemptState::kQueued;
  }
  std::vector<std::string> Take() { return Describe(planner_.TakeActions()); }

  SessionLifecyclePlanner planner_;
};

class SessionLifecycleOffTest : public SessionLifecycleTest {
 protected:
  SessionLifecycleOffTest() : SessionLifecycleTest(/*lifecycle=*/false) {}
};

TEST(SessionLifecycleRidTest, FormatsRequestAndAttempt) {
  EXPECT_EQ(FormatAttemptRid("request-1", 0), "request-1:0");
  EXPECT_EQ(FormatAttemptRid("request-1", 2), "request-1:2");
  EXPECT_EQ(FormatAttemptRid("a:b", 10), "a:b:10");
}

TEST(SessionLifecycleNamesTest, NamesAreLowercase) {
  EXPECT_EQ(AttemptStateName(AttemptState::kDispatched), "dispatched");
  EXPECT_EQ(AttemptStateName(AttemptState::kCancelled), "cancelled");
  EXPECT_EQ(SessionPhaseName(SessionPhase::kDraining), "draining");
  EXPECT_EQ(SessionPhaseName(SessionPhase::kTerminal), "terminal");
  EXPECT_EQ(TerminalReasonName(TerminalReason::kDropped), "dropped");
  EXPECT_EQ(TerminalReasonName(TerminalReason::kDiscarded), "discarded");
}

TEST(SessionLifecycleOutcomeTest, CloseSucceedsOnlyIfEveryEngineSucceeded) {
  const std::vector<Status> all_ok = {Status::Ok(), Status::Ok()};
  const std::vector<Status> one_failed = {Status::Ok(), UnavailableError("engine-1")};
  const std::vector<Status> timed_out = {DeadlineExceededError("2 s close timeout")};
  EXPECT_TRUE(CloseSucceededOnEveryEngine(all_ok));
  EXPECT_FALSE(CloseSucceededOnEveryEngine(one_failed));
  EXPECT_FALSE(CloseSucceededOnEveryEngine(timed_out));
  // No engine discovered: nothing was released.
  EXPECT_FALSE(CloseSucceededOnEveryEngine({}));
}

// Upstream: test_generate_sends_session_id_only_when_lifecycle_enabled.
TEST_F(SessionLifecycleTest, GenerateSendsSessionIdOnlyWhenLifecycleEnabled) {
  EXPECT_TRUE(planner_.generate_carries_session_id());
  Open("session-9");
  const std::string rid = Begin("session-9", "request-1", 0);
  StatusOr<GenerateIdentity> identity = planner_.MarkDispatched(rid);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->rid, "request-1:0");
  EXPECT_EQ(identity->session_id, std::optional<std::string>("session-9"));
  StatusOr<GenerateIdentity> again = planner_.GenerateIdentityFor(rid);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *identity);
}

TEST_F(SessionLifecycleOffTest, GeneratePayloadHasNoSessionIdWhenLifecycleOff) {
  EXPECT_FALSE(planner_.generate_carries_session_id());
  Open("session-9");
  const std::string rid = Begin("session-9", "request-1", 0);
  StatusOr<GenerateIdentity> identity = planner_.MarkDispatched(rid);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->rid, "request-1:0");
  EXPECT_EQ(identity->session_id, std::nullopt);
}

// Upstream: test_close_session_fans_out_and_is_fail_open (lifecycle on).
TEST_F(SessionLifecycleTest, CloseFansOutToEveryEngineAndIsFailOpen) {
  FakeFleet fleet;
  fleet.engine_urls = {"http://engine-0", "http://engine-1"};
  fleet.failing = {"http://engine-1"};
  Open("session-1");
  Terminate("session-1");
  std::vector<LifecycleAction> actions = planner_.TakeActions();
  ASSERT_EQ(actions.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<CloseSessionAction>(actions[0]));
  const std::vector<Status> results =
      fleet.CloseOnEveryEngine(std::get<CloseSessionAction>(actions[0]));
  const bool ok = CloseSucceededOnEveryEngine(results);
  EXPECT_FALSE(ok);
  EXPECT_THAT(fleet.posts,
              ElementsAre(std::pair<std::string, std::string>("http://engine-0/close_session",
                                                              "{\"session_id\": \"session-1\"}"),
                          std::pair<std::string, std::string>("http://engine-1/close_session",
                                                              "{\"session_id\": \"session-1\"}")));
  EXPECT_EQ(Phase("session-1"), SessionPhase::kClosing);
  CloseOutcome("session-1", ok);
  // The failure is counted and never blocks the terminal state.
  EXPECT_EQ(Phase("session-1"), SessionPhase::kTerminal);
  EXPECT_EQ(planner_.counters(),
            (SessionLifecycleCounters{.close = 1, .close_failure = 1, .terminated = 1}));
}

// Upstream: test_close_session_fans_out_and_is_fail_open (lifecycle off).
TEST_F(SessionLifecycleOffTest, NoCloseIsEmittedAndSessionStillEnds) {
  FakeFleet fleet;
  fleet.engine_urls = {"http://engine-0", "http://engine-1"};
  Open("session-1");
  const std::string rid = Begin("session-1", "request-1", 0);
  Dispatch(rid);
  Terminate("session-1");
  EXPECT_THAT(Take(), ElementsAre("abort request-1:0"));
  EXPECT_EQ(Phase("session-1"), SessionPhase::kDraining);
  Finish(rid);
  // Nothing to post: the session ends without a close.
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(fleet.posts, IsEmpty());
  EXPECT_EQ(Phase("session-1"), SessionPhase::kTerminal);
  EXPECT_EQ(planner_.counters(),
            (SessionLifecycleCounters{.close = 0, .close_failure = 0, .terminated = 1}));
  const Status outcome = planner_.OnCloseOutcome("session-1", true);
  EXPECT_EQ(outcome.code(), StatusCode::kFailedPrecondition) << outcome;
}

// Upstream: test_terminal_session_closes_lifecycle_once.
TEST_F(SessionLifecycleTest, TerminalSessionClosesOnce) {
  Open("session-1");
  Terminate("session-1");
  Terminate("session-1");
  EXPECT_THAT(Take(), ElementsAre("close session-1"));
  CloseOutcome("session-1", true);
  Terminate("session-1", TerminalReason::kDiscarded);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_EQ(planner_.counters(),
            (SessionLifecycleCounters{.close = 1, .close_failure = 0, .terminated = 1}));
  // The first reason sticks.
  StatusOr<std::optional<TerminalReason>> reason = planner_.terminal_reason("session-1");
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(*reason, std::optional<TerminalReason>(TerminalReason::kFinished));
}

TEST_F(SessionLifecycleTest, UndispatchedAttemptsAreCancelledWithoutAbort) {
  Open("s");
  const std::string queued_a = Begin("s", "req-a", 0);
  const std::string queued_b = Begin("s", "req-b", 3);
  Terminate("s", TerminalReason::kFailed);
  EXPECT_THAT(Take(), ElementsAre("cancel req-a:0", "cancel req-b:3", "close s"));
  EXPECT_EQ(State(queued_a), AttemptState::kCancelled);
  EXPECT_EQ(State(queued_b), AttemptState::kCancelled);
  // The re-check before posting refuses a cancelled attempt.
  StatusOr<GenerateIdentity> late = planner_.MarkDispatched(queued_a);
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  // A runner reporting its end after cancellation changes nothing.
  Finish(queued_a);
  EXPECT_EQ(State(queued_a), AttemptState::kCancelled);
}

TEST_F(SessionLifecycleTest, CloseWaitsForEveryDispatchedAttempt) {
  Open("s");
  const std::string done = Begin("s", "req-0", 0);
  Dispatch(done);
  Finish(done);
  const std::string first = Begin("s", "req-1", 0);
  const std::string second = Begin("s", "req-2", 0);
  const std::string queued = Begin("s", "req-3", 0);
  Dispatch(first);
  Dispatch(second);
  Terminate("s");
  EXPECT_THAT(Take(), ElementsAre("cancel req-3:0", "abort req-1:0", "abort req-2:0"));
  EXPECT_EQ(State(done), AttemptState::kFinished);
  EXPECT_EQ(State(queued), AttemptState::kCancelled);
  Finish(second);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_EQ(Phase("s"), SessionPhase::kDraining);
  Finish(first);
  EXPECT_THAT(Take(), ElementsAre("close s"));
  EXPECT_EQ(Phase("s"), SessionPhase::kClosing);
  CloseOutcome("s", true);
  EXPECT_EQ(Phase("s"), SessionPhase::kTerminal);
  EXPECT_EQ(planner_.counters().close, 1);
  EXPECT_EQ(planner_.counters().close_failure, 0);
}

TEST_F(SessionLifecycleTest, AbortsJoinedAtOnceReleasesTheClose) {
  Open("s");
  const std::string a = Begin("s", "req", 0);
  const std::string b = Begin("s", "req", 1);
  Dispatch(a);
  Dispatch(b);
  Terminate("s", TerminalReason::kDiscarded);
  EXPECT_THAT(Take(), ElementsAre("abort req:0", "abort req:1"));
  ASSERT_TRUE(planner_.OnAbortsJoined("s").ok());
  planner_.CheckInvariants();
  EXPECT_EQ(State(a), AttemptState::kFinished);
  EXPECT_EQ(State(b), AttemptState::kFinished);
  EXPECT_THAT(Take(), ElementsAre("close s"));
  const Status twice = planner_.OnAbortsJoined("s");
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition) << twice;
}

TEST_F(SessionLifecycleTest, PartialRolloutRetriesShareTheSessionWithFreshRids) {
  Open("session-1");
  const std::string first = Begin("session-1", "request-1", 0);
  Dispatch(first);
  Finish(first);  // The engine answered finish_reason "abort"; the request is re-queued.
  const std::string retry = Begin("session-1", "request-1", 1);
  EXPECT_EQ(retry, "request-1:1");
  StatusOr<GenerateIdentity> identity = planner_.MarkDispatched(retry);
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(identity->session_id, std::optional<std::string>("session-1"));
  StatusOr<std::string> reused = planner_.BeginAttempt("session-1", "request-1", 1);
  EXPECT_EQ(reused.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(reused.status().message(), HasSubstr("request-1:1"));
}

TEST_F(SessionLifecycleTest, KeepAliveSessionsAreNotClosedAtStepEnd) {
  Open("kept");
  Open("dropped");
  Open("finished");
  ASSERT_TRUE(planner_.SetKeepAlive("kept", true).ok());
  const std::string kept_rid = Begin("kept", "req-k", 0);
  Dispatch(kept_rid);
  const std::string dropped_rid = Begin("dropped", "req-d", 0);
  Dispatch(dropped_rid);
  Terminate("finished");
  EXPECT_THAT(Take(), ElementsAre("close finished"));
  EXPECT_THAT(planner_.PlanStepEnd(), ElementsAre("dropped"));
  EXPECT_EQ(planner_.EndStep(), 1);
  planner_.CheckInvariants();
  EXPECT_THAT(Take(), ElementsAre("abort req-d:0"));
  EXPECT_EQ(Phase("kept"), SessionPhase::kActive);
  EXPECT_EQ(State(kept_rid), AttemptState::kDispatched);
  EXPECT_EQ(Phase("dropped"), SessionPhase::kDraining);
  StatusOr<std::optional<TerminalReason>> reason = planner_.terminal_reason("dropped");
  ASSERT_TRUE(reason.ok());
  EXPECT_EQ(*reason, std::optional<TerminalReason>(TerminalReason::kDropped));
  // A kept-alive session that later finishes is closed like any other.
  Terminate("kept");
  EXPECT_THAT(Take(), ElementsAre("abort req-k:0"));
  Finish(kept_rid);
  EXPECT_THAT(Take(), ElementsAre("close kept"));
}

TEST_F(SessionLifecycleTest, UnknownSessionsAndRidsAreNotFound) {
  EXPECT_EQ(planner_.Terminate("ghost", TerminalReason::kFinished).code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.BeginAttempt("ghost", "r", 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.SetKeepAlive("ghost", true).code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.OnCloseOutcome("ghost", true).code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.OnAbortsJoined("ghost").code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.ForgetSession("ghost").code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.phase("ghost").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.MarkDispatched("ghost:0").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.MarkFinished("ghost:0").code(), StatusCode::kNotFound);
  EXPECT_EQ(planner_.GenerateIdentityFor("ghost:0").status().code(), StatusCode::kNotFound);
  const Status status = planner_.Terminate("ghost", TerminalReason::kFinished);
  EXPECT_THAT(status.message(), HasSubstr("ghost"));
  EXPECT_THAT(Take(), IsEmpty());
  planner_.CheckInvariants();
}

TEST_F(SessionLifecycleTest, InvalidArgumentsAndWrongPhasesAreErrors) {
  EXPECT_EQ(planner_.OpenSession("").code(), StatusCode::kInvalidArgument);
  Open("s");
  EXPECT_EQ(planner_.OpenSession("s").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(planner_.BeginAttempt("s", "", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(planner_.BeginAttempt("s", "r", -1).status().code(), StatusCode::kInvalidArgument);
  const std::string rid = Begin("s", "r", 0);
  Dispatch(rid);
  EXPECT_EQ(planner_.MarkDispatched(rid).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(planner_.OnCloseOutcome("s", true).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(planner_.ForgetSession("s").code(), StatusCode::kFailedPrecondition);
  Terminate("s");
  EXPECT_EQ(planner_.BeginAttempt("s", "r", 1).status().code(), StatusCode::kFailedPrecondition);
  Finish(rid);
  CloseOutcome("s", true);
  ASSERT_TRUE(planner_.ForgetSession("s").ok());
  planner_.CheckInvariants();
  EXPECT_EQ(planner_.session_count(), 0);
  EXPECT_EQ(planner_.attempt_state(rid).status().code(), StatusCode::kNotFound);
  // A forgotten id may be reused by a new session.
  Open("s");
  EXPECT_EQ(Phase("s"), SessionPhase::kActive);
}

TEST_F(SessionLifecycleTest, PlanIsSideEffectFreeAndStalePlansAreRefused) {
  Open("s");
  const std::string queued = Begin("s", "q", 0);
  const std::string running = Begin("s", "d", 0);
  Dispatch(running);
  StatusOr<TerminationPlan> plan = planner_.PlanTermination("s", TerminalReason::kFinished);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->already_terminating);
  EXPECT_THAT(plan->cancel_rids, ElementsAre("q:0"));
  EXPECT_THAT(plan->abort_rids, ElementsAre("d:0"));
  EXPECT_FALSE(plan->close_immediately);
  EXPECT_EQ(Phase("s"), SessionPhase::kActive);
  EXPECT_EQ(planner_.pending_action_count(), 0);
  // The session changes before the plan is applied.
  Dispatch(queued);
  const Status stale = planner_.ApplyTermination(*plan);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition) << stale;
  EXPECT_EQ(Phase("s"), SessionPhase::kActive);
  StatusOr<TerminationPlan> fresh = planner_.PlanTermination("s", TerminalReason::kFinished);
  ASSERT_TRUE(fresh.ok());
  EXPECT_THAT(fresh->cancel_rids, IsEmpty());
  EXPECT_THAT(fresh->abort_rids, ElementsAre("q:0", "d:0"));
  ASSERT_TRUE(planner_.ApplyTermination(*fresh).ok());
  planner_.CheckInvariants();
  EXPECT_THAT(Take(), ElementsAre("abort q:0", "abort d:0"));
}

// One step table through the whole life of two sessions: each row performs one operation and
// states the status code, the emitted actions and the phase of the row's session afterwards.
enum class Op { kOpen, kBegin, kDispatch, kFinish, kTerminate, kJoin, kClose, kCloseFail, kEnd };

struct Row {
  Op op;
  std::string session;
  std::string arg;  // request id for kBegin, rid for kDispatch/kFinish
  StatusCode expect_code;
  std::vector<std::string> expect_actions;
  SessionPhase expect_phase;
};

// A session that lives for many requests keeps bounded memory: ended attempts beyond the
// bound are forgotten oldest first (their rids may be begun again), live ones never are, and
// a termination still aborts every dispatched attempt.
TEST_F(SessionLifecycleTest, AnActiveSessionRemembersBoundedEndedAttempts) {
  Open("s");
  const std::string live = Begin("s", "held", 0);
  Dispatch(live);
  const int64_t requests = 5 * kMaxEndedAttemptsPerSession;
  for (int64_t i = 0; i < requests; ++i) {
    const std::string rid = Begin("s", "r" + std::to_string(i), 0);
    Dispatch(rid);
    Finish(rid);
  }
  EXPECT_LE(planner_.attempt_count(), 2 * kMaxEndedAttemptsPerSession + 1);
  EXPECT_EQ(State(live), AttemptState::kDispatched);
  // The newest ended attempts are remembered; the oldest may be begun again.
  EXPECT_EQ(planner_.BeginAttempt("s", "r" + std::to_string(requests - 1), 0).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(planner_.attempt_state("r0:0").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(planner_.BeginAttempt("s", "r0", 0).ok());
  planner_.CheckInvariants();
  Terminate("s");
  EXPECT_THAT(Take(), ElementsAre("cancel r0:0", "abort held:0"));
}

TEST_F(SessionLifecycleTest, StepTableScenario) {
  using enum Op;
  using P = SessionPhase;
  constexpr StatusCode kOk = StatusCode::kOk;
  const std::vector<Row> rows = {
      {kOpen, "a", "", kOk, {}, P::kActive},
      {kOpen, "b", "", kOk, {}, P::kActive},
      {kBegin, "a", "r1", kOk, {}, P::kActive},
      {kBegin, "a", "r2", kOk, {}, P::kActive},
      {kDispatch, "a", "r1:0", kOk, {}, P::kActive},
      {kBegin, "b", "r3", kOk, {}, P::kActive},
      {kDispatch, "b", "r3:0", kOk, {}, P::kActive},
      {kTerminate, "a", "", kOk, {"cancel r2:0", "abort r1:0"}, P::kDraining},
      {kTerminate, "a", "", kOk, {}, P::kDraining},
      {kBegin, "a", "r4", StatusCode::kFailedPrecondition, {}, P::kDraining},
      {kDispatch, "a", "r2:0", StatusCode::kFailedPrecondition, {}, P::kDraining},
      {kClose, "a", "", StatusCode::kFailedPrecondition, {}, P::kDraining},
      {kFinish, "a", "r1:0", kOk, {"close a"}, P::kClosing},
      {kTerminate, "a", "", kOk, {}, P::kClosing},
      {kCloseFail, "a", "", kOk, {}, P::kTerminal},
      {kEnd, "b", "", kOk, {"abort r3:0"}, P::kDraining},
      {kJoin, "b", "", kOk, {"close b"}, P::kClosing},
      {kClose, "b", "", kOk, {}, P::kTerminal},
      {kClose, "b", "", StatusCode::kFailedPrecondition, {}, P::kTerminal},
      {kEnd, "b", "", kOk, {}, P::kTerminal},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    SCOPED_TRACE("row " + std::to_string(i));
    Status status;
    switch (row.op) {
      case kOpen:
        status = planner_.OpenSession(row.session);
        break;
      case kBegin:
        status = planner_.BeginAttempt(row.session, row.arg, 0).status();
        break;
      case kDispatch:
        status = planner_.MarkDispatched(row.arg).status();
        break;
      case kFinish:
        status = planner_.MarkFinished(row.arg);
        break;
      case kTerminate:
        status = planner_.Terminate(row.session, TerminalReason::kFinished);
        break;
      case kJoin:
        status = planner_.OnAbortsJoined(row.session);
        break;
      case kClose:
        status = planner_.OnCloseOutcome(row.session, true);
        break;
      case kCloseFail:
        status = planner_.OnCloseOutcome(row.session, false);
        break;
      case kEnd:
        planner_.EndStep();
        break;
    }
    planner_.CheckInvariants();
    EXPECT_EQ(status.code(), row.expect_code) << status;
    EXPECT_EQ(Take(), row.expect_actions);
    EXPECT_EQ(Phase(row.session), row.expect_phase);
  }
  EXPECT_EQ(planner_.counters(),
            (SessionLifecycleCounters{.close = 2, .close_failure = 1, .terminated = 2}));
}

}  // namespace
}  // namespace agentkv::control
