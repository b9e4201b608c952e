// The gateway's session protocol without a network: a fake SessionEffects records cancels,
// aborts and closes, and the test decides when (and how) each close answers.
#include "agentkv/service/gateway/gateway_sessions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace agentkv::service {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Seconds = std::chrono::seconds;

class FakeEffects : public SessionEffects {
 public:
  void CancelQueuedAttempt(const std::string& rid) override { cancelled.push_back(rid); }
  void AbortOnEveryEngine(const std::string& rid) override { aborted.push_back(rid); }
  void ReturnLease(const std::string& lease_id) override { returned.push_back(lease_id); }
  void DeliverParentReturn(const std::string& parent) override { delivered.push_back(parent); }
  void CloseOnEveryEngine(const std::string& session_id, std::function<void(bool)> done) override {
    closes.push_back(session_id);
    if (answer_at_once.has_value()) return done(*answer_at_once);
    pending.push_back(std::move(done));
  }
  // Answers the oldest pending close.
  void AnswerClose(bool ok) {
    ASSERT_FALSE(pending.empty());
    auto done = std::move(pending.front());
    pending.erase(pending.begin());
    done(ok);
  }

  std::vector<std::string> cancelled;
  std::vector<std::string> aborted;
  std::vector<std::string> returned;
  std::vector<std::string> closes;
  std::vector<std::string> delivered;
  std::vector<std::function<void(bool)>> pending;
  std::optional<bool> answer_at_once = true;
};

class SessionManagerTest : public ::testing::Test {
 protected:
  void Make(bool lifecycle = true, int64_t max_closed = 8192, int64_t max_sessions = 100'000) {
    SessionManagerOptions options;
    options.lifecycle = lifecycle;
    options.max_sessions = max_sessions;
    options.idle_timeout = Seconds(60);
    options.drain_timeout = Seconds(5);
    options.max_closed_sessions = max_closed;
    options.on_close_outcome = [this](const std::string& id, bool ok) {
      outcomes.emplace_back(id, ok);
    };
    manager = std::make_unique<SessionManager>(options, &effects);
  }
  std::string Begin(const std::string& session, const std::string& request) {
    StatusOr<std::string> rid = manager->BeginAttempt(session, request, now);
    EXPECT_TRUE(rid.ok()) << rid.status();
    manager->CheckInvariants();
    return rid.ok() ? *rid : "";
  }
  // Closes `session` and returns the answer, if it came.
  std::optional<SessionCloseResult>* Close(const std::string& session) {
    results.emplace_back();
    auto* slot = &results.back();
    manager->Close(session, control::TerminalReason::kFinished, now,
                   [slot](SessionCloseResult r) { *slot = std::move(r); });
    manager->CheckInvariants();
    return slot;
  }

  FakeEffects effects;
  std::unique_ptr<SessionManager> manager;
  SteadyTime now = SteadyTime() + Seconds(1000);
  std::deque<std::optional<SessionCloseResult>> results;
  std::vector<std::pair<std::string, bool>> outcomes;
};

TEST_F(SessionManagerTest, AttemptRidsAreUniquePerLiveAttemptAndCarryTheSession) {
  Make();
  EXPECT_EQ(Begin("s", "req"), "req:0");
  EXPECT_EQ(Begin("s", "req"), "req:1");  // Same client rid while the first is live.
  StatusOr<std::string> sessionless = manager->BeginAttempt(std::nullopt, "req", now);
  ASSERT_TRUE(sessionless.ok());
  EXPECT_EQ(*sessionless, "req:2");
  StatusOr<control::GenerateIdentity> identity = manager->Dispatch("req:0");
  ASSERT_TRUE(identity.ok());
  EXPECT_EQ(identity->session_id, "s");
  EXPECT_EQ(manager->Dispatch("req:2")->session_id, std::nullopt);
  manager->Finish("req:2", now);
  // A finished sessionless rid is free again; the session's rids are never reused.
  EXPECT_EQ(*manager->BeginAttempt(std::nullopt, "req", now), "req:2");
  EXPECT_EQ(manager->live_attempts(), 3);
  EXPECT_EQ(manager->Dispatch("nope").status().code(), StatusCode::kNotFound);
  manager->CheckInvariants();
}

// --agentic-subagent-demotion: the flow's DeliverParentReturn reaches the effects before
// BeginAttempt returns, once per return of the parent.
TEST(SessionManagerParentReturnTest, AParentsReturnIsDeliveredOncePerReturn) {
  for (const bool demotion : {false, true}) {
    SCOPED_TRACE(demotion ? "demotion on" : "demotion off");
    FakeEffects effects;
    SessionManagerOptions options;
    options.subagent_demotion = demotion;
    SessionManager manager(options, &effects);
    const SteadyTime now = SteadyTime() + Seconds(1);
    const auto begin = [&](const std::string& session, std::optional<std::string> parent) {
      ASSERT_TRUE(manager
                      .BeginAttempt(session, "r", now,
                                    control::AttemptSpec<std::string>{.parent = std::move(parent)})
                      .ok());
    };
    begin("parent", std::nullopt);
    begin("child", "parent");
    EXPECT_THAT(effects.delivered, IsEmpty());
    begin("parent", std::nullopt);
    begin("parent", std::nullopt);
    if (demotion) {
      EXPECT_THAT(effects.delivered, ElementsAre("parent"));
    } else {
      EXPECT_THAT(effects.delivered, IsEmpty());
    }
    manager.CheckInvariants();
  }
}

TEST_F(SessionManagerTest, LifecycleOffSendsNoSessionIdAndClosesNothing) {
  Make(/*lifecycle=*/false);
  const std::string rid = Begin("s", "r");
  EXPECT_EQ(manager->Dispatch(rid)->session_id, std::nullopt);
  manager->Finish(rid, now);
  auto* result = Close("s");
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ(**result, (SessionCloseResult{"s", true, 0}));
  EXPECT_THAT(effects.closes, IsEmpty());
  EXPECT_EQ(manager->counters().close, 0);
}

TEST_F(SessionManagerTest, CloseOfAnIdleSessionFansOutOnceAndIsIdempotent) {
  Make();
  effects.answer_at_once.reset();
  const std::string rid = Begin("s", "r");
  ASSERT_TRUE(manager->Dispatch(rid).ok());
  manager->Finish(rid, now);
  auto* first = Close("s");
  EXPECT_THAT(effects.closes, ElementsAre("s"));
  EXPECT_FALSE(first->has_value());  // Waits for the close outcome.
  auto* second = Close("s");         // While closing: waits too, no second fan-out.
  effects.AnswerClose(true);
  manager->CheckInvariants();
  ASSERT_TRUE(first->has_value());
  ASSERT_TRUE(second->has_value());
  EXPECT_EQ(**first, (SessionCloseResult{"s", true, 0}));
  EXPECT_EQ(**second, (SessionCloseResult{"s", true, 0}));
  auto* third = Close("s");  // Ended: the remembered outcome at once.
  ASSERT_TRUE(third->has_value());
  EXPECT_TRUE((*third)->closed);
  EXPECT_THAT(effects.closes, ElementsAre("s"));
  EXPECT_EQ(manager->counters().close, 1);
  EXPECT_THAT(outcomes, ElementsAre(std::pair<std::string, bool>{"s", true}));
}

TEST_F(SessionManagerTest, DispatchedAttemptsAreAbortedAndJoinedBeforeTheClose) {
  Make();
  const std::string a = Begin("s", "a");
  const std::string b = Begin("s", "b");
  ASSERT_TRUE(manager->Dispatch(a).ok());
  ASSERT_TRUE(manager->Dispatch(b).ok());
  auto* result = Close("s");
  EXPECT_THAT(effects.aborted, ElementsAre(a, b));
  EXPECT_THAT(effects.closes, IsEmpty());
  EXPECT_EQ(manager->BeginAttempt(std::string("s"), "c", now).status().code(),
            StatusCode::kFailedPrecondition);
  manager->Finish(a, now);
  EXPECT_THAT(effects.closes, IsEmpty());
  manager->Finish(b, now);
  manager->CheckInvariants();
  EXPECT_THAT(effects.closes, ElementsAre("s"));
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ(**result, (SessionCloseResult{"s", true, 2}));
}

TEST_F(SessionManagerTest, QueuedAttemptsAreCancelledAndMayNotDispatch) {
  Make();
  const std::string rid = Begin("s", "r");  // Still waiting for admission.
  auto* result = Close("s");
  EXPECT_THAT(effects.cancelled, ElementsAre(rid));
  EXPECT_THAT(effects.aborted, IsEmpty());
  ASSERT_TRUE(result->has_value());  // Nothing was in flight: closed at once.
  EXPECT_EQ(**result, (SessionCloseResult{"s", true, 0}));
  EXPECT_EQ(manager->Dispatch(rid).status().code(), StatusCode::kFailedPrecondition);
  // The ended incarnation cannot restart until its cancelled attempt reports back.
  EXPECT_EQ(manager->BeginAttempt(std::string("s"), "r2", now).status().code(),
            StatusCode::kFailedPrecondition);
  manager->Finish(rid, now);
  manager->CheckInvariants();
  EXPECT_EQ(Begin("s", "r3"), "r3:0");  // A new incarnation.
  EXPECT_EQ(manager->active_sessions(), 1);
}

TEST_F(SessionManagerTest, TheLeaseOfAnAdmittedAttemptIsReturnedWhenItFinishes) {
  Make();
  StatusOr<std::string> rid = manager->BeginAttempt(std::string("s"), "r", now,
                                                    control::AttemptSpec<std::string>{true, false});
  ASSERT_TRUE(rid.ok());
  EXPECT_EQ(manager->Dispatch(*rid).status().code(), StatusCode::kFailedPrecondition)
      << "not before its admission decision";
  control::AdmissionDecision admit;
  admit.action = control::AdmissionAction::kAdmit;
  admit.reason = control::AdmissionReason::kCapacityAvailable;
  admit.lease_id = "0:ticket";
  EXPECT_EQ(*manager->OnAdmission(*rid, admit), control::AdmissionVerdict::kDispatch);
  ASSERT_TRUE(manager->Dispatch(*rid).ok());
  EXPECT_THAT(effects.returned, IsEmpty());
  manager->Finish(*rid, now);
  EXPECT_THAT(effects.returned, ElementsAre("0:ticket"));
  manager->CheckInvariants();
}

TEST_F(SessionManagerTest, AClientThatLeavesGetsItsWaitCancelledOrItsCallCut) {
  Make();
  const std::string waiting = *manager->BeginAttempt(
      std::string("s"), "w", now, control::AttemptSpec<std::string>{true, false});
  std::vector<control::FlowAction<std::string>> actions = manager->ClientGone(waiting);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(std::get<control::CancelAttempt>(actions[0]).rid, waiting);
  const std::string plain = Begin("s", "p");
  ASSERT_TRUE(manager->Dispatch(plain).ok());
  actions = manager->ClientGone(plain);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(std::get<control::AbortOnEveryEngine>(actions[0]).rid, plain);
  EXPECT_EQ(std::get<control::CutUpstream>(actions[1]).rid, plain);
  EXPECT_THAT(manager->ClientGone(plain), IsEmpty()) << "idempotent";
  EXPECT_THAT(effects.aborted, IsEmpty()) << "the caller performs a departure's actions";
  manager->Finish(waiting, now);
  manager->Finish(plain, now);
  manager->CheckInvariants();
}

TEST_F(SessionManagerTest, AFailedCloseStillEndsTheSessionAndIsCounted) {
  Make();
  effects.answer_at_once = false;
  auto* result = Close("s");  // Unknown to this gateway: closed anyway.
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ(**result, (SessionCloseResult{"s", false, 0}));
  EXPECT_EQ(manager->counters().close, 1);
  EXPECT_EQ(manager->counters().close_failure, 1);
  EXPECT_EQ(manager->active_sessions(), 0);
  auto* again = Close("s");
  ASSERT_TRUE(again->has_value());
  EXPECT_FALSE((*again)->closed);
  EXPECT_EQ(effects.closes.size(), 1u);
}

TEST_F(SessionManagerTest, SweepEndsIdleSessionsAndClosesOverdueDrains) {
  Make();
  const std::string idle = Begin("idle", "r");
  manager->Finish(idle, now);
  const std::string busy = Begin("busy", "r");
  ASSERT_TRUE(manager->Dispatch(busy).ok());
  EXPECT_EQ(manager->Sweep(now + Seconds(59)), 0);
  EXPECT_EQ(manager->Sweep(now + Seconds(61)), 1);  // In-flight sessions are never idle.
  EXPECT_THAT(effects.closes, ElementsAre("idle"));
  // A drain whose abort is never answered closes after the drain timeout.
  auto* result = Close("busy");
  EXPECT_THAT(effects.aborted, ElementsAre(busy));
  EXPECT_EQ(manager->Sweep(now + Seconds(4)), 0);
  EXPECT_EQ(manager->Sweep(now + Seconds(5)), 1);
  manager->CheckInvariants();
  EXPECT_THAT(effects.closes, ElementsAre("idle", "busy"));
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->aborted, 1);
  manager->Finish(busy, now + Seconds(6));  // The late answer is harmless.
  manager->CheckInvariants();
  EXPECT_EQ(manager->live_attempts(), 0);
}

TEST_F(SessionManagerTest, RemembersOnlyTheNewestClosedSessions) {
  Make(/*lifecycle=*/true, /*max_closed=*/2);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(Close(id)->has_value());
  EXPECT_EQ(effects.closes.size(), 3u);
  ASSERT_TRUE(Close("c")->has_value());  // Remembered: no fan-out.
  EXPECT_EQ(effects.closes.size(), 3u);
  ASSERT_TRUE(Close("a")->has_value());  // Forgotten: closed again.
  EXPECT_EQ(effects.closes.size(), 4u);
  manager->CheckInvariants();
}

// At --max-sessions, a new session ends the one idle the longest (closed on the engines, as
// the idle timeout would); sessions with work in flight are never chosen, and when all are
// busy the newcomer is refused.
TEST_F(SessionManagerTest, AtTheSessionCapTheLongestIdleSessionMakesRoom) {
  Make(/*lifecycle=*/true, /*max_closed=*/8192, /*max_sessions=*/3);
  const std::string busy = Begin("busy", "r");
  manager->Finish(Begin("old", "r"), now);
  now += Seconds(1);
  manager->Finish(Begin("recent", "r"), now);
  now += Seconds(1);
  Begin("new", "r");  // Ends "old", the longest idle; "busy" has a request in flight.
  EXPECT_THAT(effects.closes, ElementsAre("old"));
  EXPECT_EQ(manager->active_sessions(), 3);
  EXPECT_EQ(manager->evicted(), 1);
  // "recent" is idle, "busy" and "new" are not: the next newcomer ends "recent".
  Begin("newer", "r");
  EXPECT_THAT(effects.closes, ElementsAre("old", "recent"));
  // Everyone busy now: refused, and nothing is closed.
  StatusOr<std::string> refused = manager->BeginAttempt("newest", "r", now);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), testing::HasSubstr("--max-sessions"));
  EXPECT_EQ(manager->refused(), 1);
  EXPECT_EQ(effects.closes.size(), 2u);
  // A request in an existing session never needs room.
  Begin("busy", "second");
  manager->Finish(busy, now);
  manager->CheckInvariants();
}

// A session a request marked retained survives any idle time and is never the one the cap
// ends; a later request clears the mark, and a close ends it on every engine like any other.
TEST_F(SessionManagerTest, ARetainedSessionEndsOnlyWhenClosed) {
  Make(/*lifecycle=*/true, /*max_closed=*/8192, /*max_sessions=*/2);
  const control::AttemptSpec<std::string> retain{.retain = true};
  StatusOr<std::string> kept = manager->BeginAttempt("kept", "r", now, retain);
  ASSERT_TRUE(kept.ok()) << kept.status();
  manager->Finish(*kept, now);
  EXPECT_EQ(manager->retained_sessions(), 1);
  manager->Finish(Begin("plain", "r"), now + Seconds(1));
  EXPECT_EQ(manager->Sweep(now + Seconds(3600)), 1);
  EXPECT_THAT(effects.closes, ElementsAre("plain"));
  // At the cap (2), "kept" is idle longer than "other" but only "other" can make room.
  manager->Finish(Begin("other", "r"), now + Seconds(3600));
  Begin("new", "r");
  EXPECT_THAT(effects.closes, ElementsAre("plain", "other"));
  // The bound on retained sessions (max_sessions / 2 = 1): a second mark is refused.
  StatusOr<std::string> refused =
      manager->BeginAttempt("new", "second", now + Seconds(3600), retain);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(manager->retain_refused(), 1);
  // "new" busy, "kept" retained: a newcomer cannot get in.
  EXPECT_EQ(manager->BeginAttempt("late", "r", now + Seconds(3600)).status().code(),
            StatusCode::kUnavailable);
  auto* result = Close("kept");
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ(**result, (SessionCloseResult{"kept", true, 0}));
  EXPECT_THAT(effects.closes, ElementsAre("plain", "other", "kept"));
  EXPECT_EQ(manager->retained_sessions(), 0);
  manager->CheckInvariants();
}

// Random begins (some marking their session retained or clearing the mark), finishes and
// closes under a small cap, against a model of which sessions are active, idle and retained:
// the cap always holds, the evicted session is always the longest-idle unretained one, a
// refusal happens exactly when no session is idle and unretained, and a mark past the bound
// (max_sessions / 2) is refused.
TEST_F(SessionManagerTest, RandomTrafficNeverExceedsTheCapAndEvictsTheLongestIdle) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    effects = FakeEffects();
    Make(/*lifecycle=*/true, /*max_closed=*/4, /*max_sessions=*/4);
    std::mt19937_64 rng(seed);
    std::map<std::string, std::vector<std::string>> live;  // session -> live rids
    std::map<std::string, SteadyTime> idle_since;          // the model's idle sessions
    std::set<std::string> retained;                        // the model's retained sessions
    int request = 0;
    for (int op = 0; op < 3000; ++op) {
      now += std::chrono::milliseconds(rng() % 50 + 1);
      const std::string session = "s" + std::to_string(rng() % 10);
      const int kind = static_cast<int>(rng() % 4);
      if (kind < 2) {
        const bool known = live.contains(session) || idle_since.contains(session);
        const size_t closes_before = effects.closes.size();
        control::AttemptSpec<std::string> spec;
        if (rng() % 3 == 0) spec.retain = rng() % 2 == 0;
        std::optional<std::string> victim;
        for (const auto& [id, since] : idle_since) {
          if (retained.contains(id)) continue;
          if (!victim.has_value() || since < idle_since.at(*victim)) victim = id;
        }
        const bool full = !known && live.size() + idle_since.size() >= 4;
        StatusOr<std::string> rid =
            manager->BeginAttempt(session, "q" + std::to_string(request++), now, spec);
        if (spec.retain == true && !retained.contains(session) && retained.size() >= 2) {
          ASSERT_EQ(rid.status().code(), StatusCode::kResourceExhausted) << rid.status();
          continue;
        }
        if (full && !victim.has_value()) {
          ASSERT_EQ(rid.status().code(), StatusCode::kUnavailable) << rid.status();
          continue;
        }
        ASSERT_TRUE(rid.ok()) << rid.status();
        if (full) {
          ASSERT_EQ(effects.closes.size(), closes_before + 1);
          ASSERT_EQ(effects.closes.back(), *victim);
          idle_since.erase(*victim);
        } else {
          ASSERT_EQ(effects.closes.size(), closes_before);
        }
        if (spec.retain == true) retained.insert(session);
        if (spec.retain == false) retained.erase(session);
        idle_since.erase(session);
        live[session].push_back(*rid);
      } else if (kind == 2 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        manager->Finish(it->second.back(), now);
        it->second.pop_back();
        if (it->second.empty()) {
          idle_since[it->first] = now;
          live.erase(it);
        }
      } else if (kind == 3 && idle_since.contains(session)) {
        ASSERT_TRUE(Close(session)->has_value());
        idle_since.erase(session);
        retained.erase(session);
      }
      manager->CheckInvariants();
      ASSERT_EQ(manager->active_sessions(), static_cast<int64_t>(live.size() + idle_since.size()));
      ASSERT_EQ(manager->retained_sessions(), static_cast<int64_t>(retained.size()));
    }
  }
}

}  // namespace
}  // namespace agentkv::service
