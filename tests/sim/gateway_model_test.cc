// Tests of GatewayModel: pass-through with every feature off, sub-agent demotion delivered, the
// session lifecycle (session attached on generate, closed on every engine) and closes in flight,
// TTL and Continuum pins, Submit errors, idle and retained sessions, options. Admission, polls
// and the working set: gateway_model_admission_test.cc; randomized runs:
// gateway_model_random_test.cc.
#include "agentkv/sim/gateway_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/retention.h"
#include "agentkv/routing/router.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/event_loop.h"
#include "agentkv/sim/fleet_model.h"
#include "gateway_model_test_support.h"
#include "sim_test_support.h"

namespace agentkv::sim {
namespace {

using control::AdmissionAction;
using control::AdmissionReason;
using testing_support::Completion;
using testing_support::FleetShape;
using testing_support::GatewayModelTest;
using testing_support::Keys;
using testing_support::kStep;
using testing_support::kTokensPerBlock;
using testing_support::Metric;

// --- Everything off: the gateway passes requests through. ---

TEST_F(GatewayModelTest, EverythingOffPassesRequestsThroughUnchanged) {
  Build(GatewayModelOptions{});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 8, 3)).ok());
  ASSERT_TRUE(Submit(Request(3, /*session=*/2, 8, 2)).ok());
  EXPECT_EQ(gateway_->in_flight(), 3);
  EXPECT_EQ(gateway_->admission_waiting(), 0);
  EXPECT_EQ(gateway_->coordinator(), nullptr);
  EXPECT_EQ(fleet_->num_submitted(), 3) << "no admission: every request reaches an engine now";
  loop_.RunUntilIdle();

  EXPECT_EQ((std::map<int64_t, int>{{1, 1}, {2, 1}, {3, 1}}), completion_count_);
  EXPECT_EQ(gateway_->in_flight(), 0);
  for (const Completion& c : completions_) {
    ASSERT_TRUE(c.engine.has_value());
    ASSERT_TRUE(c.record.engine.has_value());
    const EngineRequestRecord* engine_record =
        fleet_->engine(*c.record.engine).FindRecord(c.record.id);
    ASSERT_NE(engine_record, nullptr) << "the record names the serving engine";
    EXPECT_EQ(c.engine->finished, engine_record->finished);
    EXPECT_EQ(c.engine->report.output_tokens, c.record.id.value() == 1   ? 4
                                              : c.record.id.value() == 2 ? 3
                                                                         : 2);
    EXPECT_EQ(c.record.dispatched, c.record.received);
    EXPECT_FALSE(c.record.admission_action.has_value());
    EXPECT_FALSE(c.record.admission_reason.has_value());
    EXPECT_TRUE(c.record.dispatch_error.ok());
    EXPECT_EQ(c.record.prompt_tokens, 8 * kTokensPerBlock);
    EXPECT_EQ(c.record.prompt_blocks, 8);
  }
  // Round robin over two engines: 1 and 3 on engine 0, 2 on engine 1.
  EXPECT_EQ(CompletionOf(1)->record.engine, EngineId(0));
  EXPECT_EQ(CompletionOf(2)->record.engine, EngineId(1));
  EXPECT_EQ(CompletionOf(3)->record.engine, EngineId(0));

  // Without the lifecycle, generate carries no session: no engine tracks one.
  for (int32_t e = 0; e < 2; ++e) {
    EXPECT_FALSE(Cache(e).SessionOpen(SessionId(1))) << "engine " << e;
    EXPECT_FALSE(Cache(e).SessionOpen(SessionId(2))) << "engine " << e;
  }
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty());
  EXPECT_TRUE(gateway_->EndSession(SessionId(2)).empty());
  EXPECT_EQ(gateway_->engine_session_closes(), 0);
  EXPECT_EQ(gateway_->tokens_freed_by_close(), 0);
  EXPECT_TRUE(gateway_->AgenticKvMetrics().empty());
  // Prompt blocks stay cached: nothing was released by a close.
  EXPECT_EQ(Cache(0).Match(keys_[1]).device_blocks, 8);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, CheckDrainedReportsWorkInFlightAndSessionsNotEnded) {
  GatewayModelOptions options;
  options.agentic.agentic_program_admission = true;
  Build(options);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 50)).ok());
  Status in_flight = gateway_->CheckDrained();
  EXPECT_EQ(in_flight.code(), StatusCode::kInternal) << in_flight;
  EXPECT_NE(in_flight.message().find("in flight"), std::string::npos) << in_flight;
  loop_.RunUntilIdle();
  Status open = gateway_->CheckDrained();
  EXPECT_EQ(open.code(), StatusCode::kInternal) << "the session was never ended";
  EXPECT_NE(open.message().find("session"), std::string::npos) << open;
  EndSessions({1});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Sub-agent demotion delivered. ---

// A parent on engine 0 and its sub-agent on engine 1 (round robin): only a delivered parent
// return reaches the child; without delivery engine 0 knows no child and engine 1 never sees
// the parent.
TEST_F(GatewayModelTest, ADeliveredParentReturnDemotesAChildOnAnotherEngine) {
  for (const bool deliver : {false, true}) {
    SCOPED_TRACE(deliver ? "delivered" : "parent's engine only");
    completions_.clear();
    keys_.clear();
    completion_count_.clear();
    GatewayModelOptions options;
    options.deliver_subagent_demotion = deliver;
    demote_ = kv::Priority{1};
    Build(options);
    const TimeNs t0 = loop_.now();
    SubmitAt(t0, Request(1, /*session=*/1, 4, 2));
    GatewayRequest child = Request(2, /*session=*/2, 6, 2);
    child.request.kv_options.parent_conversation = ConversationId(1);
    child.request.kv_options.parent_hint_authenticated = true;
    SubmitAt(t0 + TimeNs::Millis(1), std::move(child));
    loop_.RunUntilIdle();
    ASSERT_EQ(CompletionOf(1)->record.engine, EngineId(0));
    ASSERT_EQ(CompletionOf(2)->record.engine, EngineId(1));
    ASSERT_EQ(Cache(1).GetPriority(keys_[2][5]).value(), kv::kDefaultPriority);

    SubmitAt(loop_.now() + TimeNs::Millis(5), Request(3, /*session=*/1, 5, 2));
    loop_.RunUntilIdle();
    const int64_t demoted = deliver ? 1 : 0;
    EXPECT_EQ(Cache(1).stats().demoted_children, demoted);
    EXPECT_EQ(Cache(0).stats().demoted_children, 0);
    EXPECT_EQ(gateway_->demotion_deliveries(), deliver ? 1 : 0);
    EXPECT_EQ(gateway_->children_demoted_by_delivery(), demoted);
    EXPECT_EQ(Cache(1).GetPriority(keys_[2][5]).value(),
              deliver ? kv::Priority{1} : kv::kDefaultPriority);
    EndSessions({1, 2});
    EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
    for (int32_t e = 0; e < 2; ++e) {
      EXPECT_TRUE(Cache(e).CheckInvariants().ok()) << Cache(e).CheckInvariants();
      EXPECT_EQ(Cache(e).active_requests(), 0);
    }
  }
}

// The replay's rule (control::ParentReturnDelivery::kEveryAttempt): every request of a named
// parent delivers its return, not only the first after a sub-agent's.
TEST_F(GatewayModelTest, EveryRequestOfANamedParentIsDelivered) {
  GatewayModelOptions options;
  options.deliver_subagent_demotion = true;
  demote_ = kv::Priority{1};
  Build(options);
  GatewayRequest child = Request(1, /*session=*/2, 4, 2);
  child.request.kv_options.parent_conversation = ConversationId(1);
  child.request.kv_options.parent_hint_authenticated = true;
  ASSERT_TRUE(Submit(std::move(child)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 4, 2)).ok());
  ASSERT_TRUE(Submit(Request(3, /*session=*/1, 4, 2)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(gateway_->demotion_deliveries(), 2);
  EndSessions({1, 2});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// Only a conversation some request named as its parent is delivered, and an unauthenticated
// hint names none.
TEST_F(GatewayModelTest, OnlyAParentsRequestIsDelivered) {
  GatewayModelOptions options;
  options.deliver_subagent_demotion = true;
  demote_ = kv::Priority{1};
  Build(options);
  GatewayRequest forged = Request(1, /*session=*/2, 4, 2);
  forged.request.kv_options.parent_conversation = ConversationId(1);
  ASSERT_TRUE(Submit(std::move(forged)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 4, 2)).ok());
  ASSERT_TRUE(Submit(Request(3, /*session=*/3, 4, 2)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(gateway_->demotion_deliveries(), 0);
  EndSessions({1, 2, 3});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Session lifecycle. ---

TEST_F(GatewayModelTest, LifecycleAttachesTheSessionAndClosesItOnEveryEngine) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  Build(options);
  // Round robin: session 1 lands on both engines, session 2 on engine 0 only.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 6, 4)).ok());
  ASSERT_TRUE(Submit(Request(3, /*session=*/2, 5, 4)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(CompletionOrder().size(), 3u);
  EXPECT_TRUE(Cache(0).SessionOpen(SessionId(1)));
  EXPECT_TRUE(Cache(1).SessionOpen(SessionId(1)));
  EXPECT_TRUE(Cache(0).SessionOpen(SessionId(2)));
  EXPECT_FALSE(Cache(1).SessionOpen(SessionId(2)));

  const std::vector<int64_t> freed = gateway_->EndSession(SessionId(1));
  ASSERT_EQ(freed.size(), 2u) << "one entry per engine";
  // Release mode frees the session's own blocks: all 8 (engine 0) and 6 (engine 1) prompt
  // blocks no one else shares.
  EXPECT_EQ(freed[0], 8 * kTokensPerBlock);
  EXPECT_EQ(freed[1], 6 * kTokensPerBlock);
  EXPECT_FALSE(Cache(0).SessionOpen(SessionId(1)));
  EXPECT_FALSE(Cache(1).SessionOpen(SessionId(1)));
  EXPECT_TRUE(Cache(0).SessionOpen(SessionId(2))) << "another session is left alone";
  EXPECT_EQ(Cache(0).Match(keys_[1]).device_blocks, 0);
  EXPECT_EQ(Cache(0).Match(keys_[3]).device_blocks, 5);
  EXPECT_EQ(gateway_->engine_session_closes(), 2);
  EXPECT_EQ(gateway_->tokens_freed_by_close(), 14 * kTokensPerBlock);
  std::vector<std::pair<std::string, double>> metrics = gateway_->AgenticKvMetrics();
  EXPECT_EQ(Metric(metrics, control::kSessionCloseMetric), 1.0);
  EXPECT_EQ(Metric(metrics, control::kLifecycleEnabledMetric), 1.0);
  EXPECT_FALSE(Metric(metrics, control::kSessionCloseFailureMetric).has_value());
  EXPECT_FALSE(Metric(metrics, control::kAdmitMetric).has_value()) << "admission is off";

  // Idempotent: ending it again closes nothing; an unknown session is a no-op.
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty());
  EXPECT_TRUE(gateway_->EndSession(SessionId(99)).empty());
  EXPECT_EQ(gateway_->engine_session_closes(), 2);
  EXPECT_NE(gateway_->CheckDrained().code(), StatusCode::kOk) << "session 2 still open";

  EXPECT_EQ(gateway_->EndSession(SessionId(2)).size(), 2u);
  EXPECT_FALSE(Cache(0).SessionOpen(SessionId(2)));
  EXPECT_EQ(gateway_->engine_session_closes(), 4);
  EXPECT_EQ(gateway_->tokens_freed_by_close(), 19 * kTokensPerBlock);
  EXPECT_EQ(Metric(gateway_->AgenticKvMetrics(), control::kSessionCloseMetric), 2.0);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Close while requests are in flight (the served gateway's drain, on simulated time). ---

// The close aborts the request on every engine; its engine ends it at the next step boundary
// (6 ms, one step after the close at 5 ms), long before its natural end (20 ms), and the
// drain, then the close on every engine, follow at once.
TEST_F(GatewayModelTest, ClosingASessionWithARequestInFlightAbortsItThenClosesEveryEngine) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  Build(options);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 20)).ok());
  loop_.RunUntil(TimeNs::Millis(5));
  ASSERT_EQ(gateway_->in_flight(), 1);
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty()) << "the close waits for the drain";
  EXPECT_EQ(gateway_->aborts_requested(), 1);
  EXPECT_EQ(gateway_->aborts_performed(), 1);
  EXPECT_EQ(*gateway_->flow().phase(SessionId(1)), control::SessionPhase::kDraining);
  EXPECT_EQ(gateway_->engine_session_closes(), 0);
  loop_.RunUntil(TimeNs::Millis(6));
  const Completion* c = CompletionOf(1);
  ASSERT_NE(c, nullptr) << "aborted at the step boundary after the close";
  EXPECT_EQ(c->at, TimeNs::Millis(6));
  ASSERT_TRUE(c->engine.has_value());
  EXPECT_TRUE(c->engine->report.aborted);
  EXPECT_EQ(c->engine->report.output_tokens, 6) << "the prefill's token and five decodes";
  EXPECT_EQ(c->engine->first_token, TimeNs::Millis(1));
  EXPECT_EQ(gateway_->in_flight(), 0);
  EXPECT_EQ(gateway_->engine_session_closes(), 2) << "the drain ended at the abort";
  EXPECT_FALSE(Cache(0).SessionOpen(SessionId(1)));
  EXPECT_EQ(Metric(gateway_->AgenticKvMetrics(), control::kSessionCloseMetric), 1.0);
  loop_.RunUntilIdle();
  EXPECT_EQ(fleet_->engine(*c->record.engine).num_steps(), 6) << "no step past the abort";
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty()) << "ended: no second close";
  EXPECT_EQ(gateway_->engine_session_closes(), 2);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// A close whose abort meets the request's last step: the request finishes normally at that
// step's end, which ends the drain as well.
TEST_F(GatewayModelTest, AnAbortMeetingTheLastStepLetsTheRequestFinish) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  Build(options);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 6)).ok());
  loop_.RunUntil(TimeNs::Millis(5));  // The step started at 5 ms emits the sixth token.
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty());
  EXPECT_EQ(gateway_->aborts_requested(), 1);
  EXPECT_EQ(gateway_->aborts_performed(), 0) << "the engine found it finishing";
  loop_.RunUntilIdle();
  ASSERT_NE(CompletionOf(1), nullptr);
  EXPECT_EQ(CompletionOf(1)->at, TimeNs::Millis(6));
  EXPECT_FALSE(CompletionOf(1)->engine->report.aborted);
  EXPECT_EQ(CompletionOf(1)->engine->report.output_tokens, 6);
  EXPECT_EQ(gateway_->engine_session_closes(), 2);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// A drain timeout shorter than the wait for the engine's next step boundary closes the
// session before the aborted request ends.
TEST_F(GatewayModelTest, ADrainPastItsTimeoutClosesBeforeTheRequestEnds) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  options.session_drain_timeout = TimeNs(400'000);
  Build(options);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 100)).ok());
  loop_.RunUntil(TimeNs::Millis(5));
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty());
  loop_.RunUntil(TimeNs(5'400'000));
  EXPECT_EQ(gateway_->engine_session_closes(), 2) << "closed at the drain deadline";
  EXPECT_EQ(gateway_->in_flight(), 1) << "the request still runs";
  EXPECT_EQ(*gateway_->flow().phase(SessionId(1)), control::SessionPhase::kTerminal);
  loop_.RunUntilIdle();
  ASSERT_NE(CompletionOf(1), nullptr);
  EXPECT_EQ(CompletionOf(1)->at, TimeNs::Millis(6)) << "then the abort ended it";
  EXPECT_TRUE(CompletionOf(1)->engine->report.aborted);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- TTL pins: fixed-ttl, then continuum. ---
TEST_F(GatewayModelTest, ToolCallTurnPinsItsPromptUntilTheTtlExpires) {
  GatewayModelOptions options;
  options.fixed_ttl = TimeNs::Seconds(10);
  Build(options, {.engines = 1});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4, /*tool_call=*/true)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 8, 4, /*tool_call=*/false)).ok());
  loop_.RunUntil(TimeNs::Seconds(1));
  ASSERT_EQ(completions_.size(), 2u);
  EXPECT_EQ(CompletionOf(1)->first_block_priority, kv::kMaxPriority) << "pinned at completion";
  EXPECT_EQ(CompletionOf(2)->first_block_priority, kv::kDefaultPriority) << "no tool call";
  for (const kv::BlockKey key : keys_[1]) EXPECT_EQ(*Cache(0).GetPriority(key), kv::kMaxPriority);
  const EngineModel& engine = fleet_->engine(EngineId(0));
  EXPECT_EQ(engine.pin_counters().pins, 1);
  EXPECT_EQ(gateway_->in_flight(), 0);
  EndSessions({1, 2});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << "a pending pin is the engine's, not the gateway's";

  const TimeNs pinned_at = CompletionOf(1)->at;
  loop_.RunUntil(pinned_at + TimeNs::Seconds(10) - TimeNs(1));
  EXPECT_EQ(*Cache(0).GetPriority(keys_[1][0]), kv::kMaxPriority);
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), pinned_at + TimeNs::Seconds(10));
  for (const kv::BlockKey key : keys_[1]) {
    EXPECT_EQ(*Cache(0).GetPriority(key), kv::kDefaultPriority);
  }
  EXPECT_EQ(engine.pin_counters().expired, 1);
  EXPECT_EQ(engine.pin_counters().returned, 0);
}

TEST_F(GatewayModelTest, FollowUpTurnBeforeExpiryCountsAsReturned) {
  GatewayModelOptions options;
  options.fixed_ttl = TimeNs::Seconds(10);
  Build(options, {.engines = 1});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4, /*tool_call=*/true, /*content=*/77)).ok());
  loop_.RunUntilIdle();
  // The TTL ran out with no follow-up: one expired pin.
  ASSERT_EQ(fleet_->engine(EngineId(0)).pin_counters().expired, 1);
  const TimeNs t = loop_.now();
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 9, 4, /*tool_call=*/true, /*content=*/77)).ok());
  loop_.RunUntil(t + TimeNs::Seconds(5));
  // The tool result comes back 5 s later, within the 10 s TTL.
  ASSERT_TRUE(Submit(Request(3, /*session=*/1, 10, 4, /*tool_call=*/false, /*content=*/77)).ok());
  loop_.RunUntilIdle();
  const EngineModel::PinCounters& pins = fleet_->engine(EngineId(0)).pin_counters();
  EXPECT_EQ(pins.pins, 2);
  EXPECT_EQ(pins.returned, 1);
  EXPECT_EQ(pins.expired, 1) << "only the first pin expired unanswered";
  EXPECT_EQ(CompletionOf(3)->engine->report.cached_device_tokens, 9 * kTokensPerBlock);
  EndSessions({1});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, NoTtlMeansNoPins) {
  Build(GatewayModelOptions{}, {.engines = 1});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4, /*tool_call=*/true)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(CompletionOf(1)->first_block_priority, kv::kDefaultPriority);
  EXPECT_EQ(fleet_->engine(EngineId(0)).pin_counters().pins, 0);
}

TEST_F(GatewayModelTest, ContinuumLearnsPausesPerClassAndPinsByItsPolicy) {
  GatewayModelOptions options;
  options.continuum = engine::ContinuumPolicyOptions{};
  Build(options, {.engines = 1});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4, /*tool_call=*/true, /*content=*/77)).ok());
  loop_.RunUntil(TimeNs::Seconds(1));
  // The prior (pauses of 2 s) on an idle engine: the turn is pinned.
  EXPECT_EQ(CompletionOf(1)->first_block_priority, kv::kMaxPriority);
  const engine::ContinuumPolicy* policy = gateway_->continuum_policy();
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->samples(kMainAgentPause), 0);
  // The program comes back 1 s after its turn completed: one pause of the main-agent class.
  SubmitAt(CompletionOf(1)->at + TimeNs::Seconds(1),
           Request(2, /*session=*/1, 9, 4, /*tool_call=*/false, /*content=*/77));
  // A sub-agent's tool call pauses in the sub-agent class and never ends.
  GatewayRequest sub = Request(3, /*session=*/2, 8, 4, /*tool_call=*/true);
  sub.request.kv_options.parent_conversation = ConversationId(1);
  ASSERT_TRUE(Submit(std::move(sub)).ok());
  // A main agent's Task call: it now waits for its sub-agents (their own class).
  GatewayRequest spawn = Request(4, /*session=*/3, 8, 4, /*tool_call=*/true);
  spawn.next_pause = PauseKind::kSubagentWait;
  ASSERT_TRUE(Submit(std::move(spawn)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(policy->samples(kMainAgentPause), 1);
  EXPECT_EQ(policy->samples(kSubagentPause), 0);
  const EngineModel::PinCounters& pins = fleet_->engine(EngineId(0)).pin_counters();
  EXPECT_EQ(pins.pins, 3);
  EXPECT_EQ(pins.returned, 1);
  EXPECT_EQ(gateway_->pins_declined_by_cost(), 0);
  EndSessions({1, 2, 3});
  EXPECT_EQ(policy->samples(kSubagentPause), 1);
  EXPECT_EQ(policy->samples(kSubagentWaitPause), 1);
  EXPECT_EQ(policy->samples(kMainAgentPause), 1);
  EXPECT_DOUBLE_EQ(policy->ReturnProbability(kSubagentPause, TimeNs::Seconds(2048)), 4.0 / 5.0);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, ContinuumDeclinesAPinWhoseMemoryCostsMoreThanItSaves) {
  GatewayModelOptions options;
  // Programs return after about 17 minutes and memory is dear.
  options.continuum =
      engine::ContinuumPolicyOptions{.memory_price = 1.0, .prior_pause = TimeNs::Seconds(1000)};
  Build(options, {.engines = 1});
  // A long request of another session keeps the pool under pressure.
  ASSERT_TRUE(Submit(Request(9, /*session=*/9, 32, 2000)).ok());
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4, /*tool_call=*/true)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(CompletionOf(1)->first_block_priority, kv::kDefaultPriority);
  EXPECT_EQ(fleet_->engine(EngineId(0)).pin_counters().pins, 0);
  EXPECT_EQ(gateway_->pins_declined_by_cost(), 1);
  EndSessions({1, 9});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Errors. ---

TEST_F(GatewayModelTest, SubmitErrorsLeaveNothingInFlight) {
  Build(GatewayModelOptions{}, {.engines = 2, .device_blocks = 64});
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 4)).ok());
  Status reused = Submit(Request(1, /*session=*/2, 8, 4));
  EXPECT_EQ(reused.code(), StatusCode::kAlreadyExists) << reused;
  EXPECT_EQ(gateway_->in_flight(), 1);

  // A prompt of no tokens is malformed: an error, and nothing in flight.
  Status malformed = Submit(Request(2, /*session=*/3, 0, 200));
  EXPECT_EQ(malformed.code(), StatusCode::kInvalidArgument) << malformed;
  EXPECT_EQ(gateway_->in_flight(), 1);
  EXPECT_EQ(gateway_->FindRecord(RequestId(2)), nullptr);
  loop_.RunUntilIdle();
  EXPECT_EQ(CompletionOrder(), (std::vector<int64_t>{1}));
  EndSessions({1, 2, 3});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, AnEndedSessionReopensOnItsNextRequest) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  Build(options);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 4, 2)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(gateway_->EndSession(SessionId(1)).size(), 2u);
  // The session was forgotten: a new request starts it afresh and it can be closed again.
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 4, 2)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(gateway_->EndSession(SessionId(1)).size(), 2u);
  EXPECT_EQ(Metric(gateway_->AgenticKvMetrics(), control::kSessionCloseMetric), 2.0);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// The gateway's idle timeout on simulated time: a plain session idle past it is closed on every
// engine (exactly one timeout after its last request completed) and its next request finds no
// KV; a retained one (a partial rollout kept across steps) keeps its session and its KV however
// long it pauses, until its end closes it.
TEST_F(GatewayModelTest, ARetainedSessionOutlivesTheIdleTimeoutAndKeepsItsKv) {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  options.session_idle_timeout = TimeNs::Millis(50);
  Build(options, FleetShape{.policy = "consistent_hashing"});
  GatewayRequest kept = Request(1, /*session=*/1, 8, 4, false, /*content=*/1000);
  kept.retain = true;
  ASSERT_TRUE(Submit(std::move(kept)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 8, 4, false, /*content=*/2000)).ok());
  const auto phase = [this](int64_t session) {
    return gateway_->flow().phase(SessionId(session)).value();
  };
  loop_.RunUntil(TimeNs::Millis(10));
  ASSERT_EQ(completions_.size(), 2u);
  const TimeNs plain_idle_since = CompletionOf(2)->at;
  loop_.RunUntil(plain_idle_since + TimeNs::Millis(49));
  EXPECT_EQ(phase(2), control::SessionPhase::kActive);
  loop_.RunUntil(plain_idle_since + TimeNs::Millis(50));
  EXPECT_EQ(phase(2), control::SessionPhase::kTerminal) << "closed one idle timeout later";
  EXPECT_EQ(gateway_->engine_session_closes(), 2) << "on every engine";
  loop_.RunUntil(TimeNs::Seconds(10));  // 200 idle timeouts.
  EXPECT_EQ(phase(1), control::SessionPhase::kActive);
  EXPECT_TRUE(gateway_->flow().retained(SessionId(1)));
  EXPECT_TRUE(Cache(CompletionOf(1)->record.engine->value()).SessionOpen(SessionId(1)));
  EXPECT_EQ(gateway_->engine_session_closes(), 2);

  // Both come back with a longer prompt over the same blocks: only the retained one hits.
  ASSERT_TRUE(Submit(Request(3, /*session=*/1, 12, 4, false, /*content=*/1000)).ok());
  ASSERT_TRUE(Submit(Request(4, /*session=*/2, 12, 4, false, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(CompletionOf(3)->engine->cached_tokens(), 8 * kTokensPerBlock);
  EXPECT_EQ(CompletionOf(4)->engine->cached_tokens(), 0);
  EXPECT_EQ(phase(2), control::SessionPhase::kTerminal) << "its new incarnation idled out too";
  EXPECT_EQ(phase(1), control::SessionPhase::kActive);
  EXPECT_EQ(gateway_->engine_session_closes(), 4);
  // Only its end (EndSession, the explicit close) ends the retained session.
  EXPECT_EQ(gateway_->EndSession(SessionId(1)).size(), 2u);
  EXPECT_EQ(phase(1), control::SessionPhase::kTerminal);
  EXPECT_EQ(gateway_->flow().retained_sessions(), 0);
  EXPECT_TRUE(gateway_->EndSession(SessionId(2)).empty()) << "already ended: no second close";
  EXPECT_EQ(gateway_->engine_session_closes(), 6);
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST(GatewayModelOptionsTest, ValidatesPollIntervalAndTtl) {
  GatewayModelOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.fixed_ttl = TimeNs(0);
  EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(options.Validate().message().find("fixed_ttl"), std::string::npos);
  options.fixed_ttl = TimeNs(1);
  EXPECT_TRUE(options.Validate().ok());
  options.session_idle_timeout = TimeNs(-1);
  EXPECT_NE(options.Validate().message().find("session_idle_timeout"), std::string::npos);
  options.session_idle_timeout = TimeNs(0);
  options.continuum = engine::ContinuumPolicyOptions{};
  EXPECT_NE(options.Validate().message().find("exclusive"), std::string::npos);
  options.fixed_ttl.reset();
  options.continuum->memory_price = -1.0;
  EXPECT_NE(options.Validate().message().find("memory_price"), std::string::npos);
  options.continuum.reset();
  options.agentic.poll_interval_s = 0.0;
  EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);
  options.agentic.poll_interval_s = 1.0;
  options.agentic.agentic_program_admission = true;
  options.agentic.agentic_admission_headroom = 1.5;
  EXPECT_EQ(options.Validate().code(), StatusCode::kInvalidArgument);

  EventLoop loop;
  FleetModelOptions fleet_options;
  fleet_options.engine.config.kv_pool.tokens_per_block = kTokensPerBlock;
  fleet_options.engine.config.kv_pool.max_total_tokens = 64 * kTokensPerBlock;
  StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&loop, fleet_options);
  ASSERT_TRUE(fleet.ok());
  EXPECT_FALSE(GatewayModel::Create(&loop, fleet->get(), options).ok());
}

}  // namespace
}  // namespace agentkv::sim
