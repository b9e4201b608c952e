// Tests of GatewayModel's admission: program admission (FIFO, aged bypass, lease return,
// refusals), gauge polls, the working set and admission v2.
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
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "gateway_model_test_support.h"
#include "tests/sim/sim_test_support.h"

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

// --- Program admission. ---

// A ledger whose ceiling fits one reservation of 128 + 1000 tokens: 1024 blocks x 16 tokens x
// 0.1 = 1638 tokens on one engine.
GatewayModelOptions TightAdmission(double max_wait_s) {
  GatewayModelOptions options;
  options.agentic.agentic_program_admission = true;
  options.agentic.agentic_admission_headroom = 0.1;
  options.agentic.agentic_admission_max_wait_s = max_wait_s;
  options.agentic.poll_interval_s = 0.25;
  return options;
}
constexpr FleetShape kOneTightEngine{.engines = 1, .device_blocks = 1024};

TEST_F(GatewayModelTest, AdmissionQueuesInFifoOrderAndDispatchesAsLeasesReturn) {
  Build(TightAdmission(/*max_wait_s=*/30.0), kOneTightEngine);
  // Requests 1-3 reserve 128 + 1000 tokens each: one at a time fits the ceiling. Request 4
  // reserves 128 + 30 and would fit beside any of them, but waits behind the FIFO's head.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 1000)).ok());
  ASSERT_EQ(gateway_->coordinator()->ledger().ceiling(), 1638);
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 8 * kTokensPerBlock + 1000);
  SubmitAt(TimeNs::Millis(10), Request(2, /*session=*/2, 8, 1000));
  SubmitAt(TimeNs::Millis(20), Request(3, /*session=*/3, 8, 1000));
  SubmitAt(TimeNs::Millis(30), Request(4, /*session=*/4, 8, 30));
  loop_.RunUntil(TimeNs::Millis(30));
  EXPECT_EQ(gateway_->admission_waiting(), 3);
  EXPECT_EQ(gateway_->in_flight(), 4);
  EXPECT_EQ(fleet_->num_submitted(), 1) << "the waiters have not reached an engine";
  EXPECT_FALSE(gateway_->FindRecord(RequestId(2))->dispatched.has_value());
  loop_.RunUntilIdle();

  const Completion* c1 = CompletionOf(1);
  const Completion* c2 = CompletionOf(2);
  const Completion* c3 = CompletionOf(3);
  const Completion* c4 = CompletionOf(4);
  ASSERT_TRUE(c1 && c2 && c3 && c4);
  EXPECT_EQ(CompletionOrder(), (std::vector<int64_t>{1, 2, 4, 3}));
  // Each waiter is dispatched when the lease before it returns: at its predecessor's finish.
  EXPECT_EQ(c1->record.dispatched, TimeNs(0));
  EXPECT_EQ(c2->record.received, TimeNs::Millis(10));
  EXPECT_EQ(c2->record.dispatched, c1->at);
  EXPECT_EQ(c3->record.received, TimeNs::Millis(20));
  EXPECT_EQ(c3->record.dispatched, c2->at);
  // Strict head of line: 4 fit beside 2 but left the queue only after 3, with it.
  EXPECT_EQ(c4->record.dispatched, c2->at);
  for (const Completion* c : {c1, c2, c3, c4}) {
    EXPECT_EQ(c->record.admission_action, AdmissionAction::kAdmit) << c->record.id;
    EXPECT_EQ(c->record.admission_reason, AdmissionReason::kCapacityAvailable) << c->record.id;
    EXPECT_EQ(c->record.engine, EngineId(0));
    ASSERT_TRUE(c->engine.has_value());
    EXPECT_EQ(c->engine->arrival, c->record.dispatched) << "the engine sees the dispatch";
  }
  const std::vector<std::pair<std::string, double>> metrics = gateway_->AgenticKvMetrics();
  EXPECT_EQ(Metric(metrics, control::kAdmitMetric), 1.0);
  EXPECT_EQ(Metric(metrics, control::kWaitMetric), 3.0);
  EXPECT_EQ(Metric(metrics, control::kWaitingMetric), 0.0);
  EXPECT_FALSE(Metric(metrics, control::kBypassAgedMetric).has_value());
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 0);
  EndSessions({1, 2, 3, 4});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, ClosingASessionCancelsItsAdmissionWaitAndAbortsItsRunningRequest) {
  GatewayModelOptions options = TightAdmission(/*max_wait_s=*/30.0);
  options.agentic.agentic_session_lifecycle = true;
  Build(options, kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 1000)).ok());
  SubmitAt(TimeNs::Millis(10), Request(2, /*session=*/1, 8, 1000));
  SubmitAt(TimeNs::Millis(20), Request(3, /*session=*/2, 8, 1000));
  loop_.RunUntil(TimeNs::Millis(30));
  ASSERT_EQ(gateway_->admission_waiting(), 2);
  // Session 1: request 2 waits for admission (cancelled), request 1 runs (aborted).
  EXPECT_TRUE(gateway_->EndSession(SessionId(1)).empty());
  EXPECT_EQ(gateway_->admission_waiting(), 1);
  const Completion* c2 = CompletionOf(2);
  ASSERT_NE(c2, nullptr) << "the cancelled waiter completes at once";
  EXPECT_FALSE(c2->engine.has_value());
  EXPECT_EQ(c2->record.dispatch_error.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c2->record.admission_reason, AdmissionReason::kCancelled);
  EXPECT_EQ(c2->at, TimeNs::Millis(30));
  loop_.RunUntilIdle();
  // Request 1 ended at its engine's next step boundary, aborted; request 3 (session 2) was
  // admitted when it returned its lease; session 1 closed after it ended.
  EXPECT_EQ(CompletionOrder(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(CompletionOf(1)->at, TimeNs::Millis(31));
  EXPECT_TRUE(CompletionOf(1)->engine->report.aborted);
  EXPECT_EQ(CompletionOf(3)->record.dispatched, CompletionOf(1)->at);
  EXPECT_FALSE(CompletionOf(3)->engine->report.aborted);
  EXPECT_EQ(gateway_->engine_session_closes(), 1);
  EXPECT_EQ(Metric(gateway_->AgenticKvMetrics(), control::kCancelledMetric), 1.0);
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 0);
  EndSessions({2});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// A request whose reservation exceeds the engine's whole KV (16384 tokens) is refused at once,
// as the gateway answers 400: it completes at its arrival as a rejected request that never
// reached an engine and computed nothing, reserves nothing, and the request behind it is
// admitted without waiting. (One over the ceiling, 1638 tokens, but within the engine is capped
// and runs: AdmissionOversizedTest.)
TEST_F(GatewayModelTest, AnOversizedRequestIsRefusedAtOnceAndDelaysNobody) {
  Build(TightAdmission(/*max_wait_s=*/30.0), kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 20'000)).ok());  // 128 + 20000 > 16384.
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 0);
  EXPECT_EQ(gateway_->in_flight(), 0);
  const Completion* refused = CompletionOf(1);
  ASSERT_NE(refused, nullptr);
  EXPECT_TRUE(refused->record.refused);
  EXPECT_EQ(refused->record.admission_action, AdmissionAction::kRefuse);
  EXPECT_EQ(refused->record.admission_reason, AdmissionReason::kOversized);
  EXPECT_FALSE(refused->record.engine.has_value());
  ASSERT_TRUE(refused->engine.has_value());
  EXPECT_TRUE(refused->engine->report.rejected);
  EXPECT_EQ(refused->engine->cold_tokens, 0);
  EXPECT_EQ(refused->engine->report.uncached_tokens, 0);
  EXPECT_EQ(refused->at, TimeNs(0));
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 8, 100)).ok());
  EXPECT_EQ(gateway_->FindRecord(RequestId(2))->dispatched, TimeNs(0));
  loop_.RunUntilIdle();
  EndSessions({1, 2});
  EXPECT_EQ(fleet_->num_submitted(), 1);
  EXPECT_EQ(Metric(gateway_->AgenticKvMetrics(), control::kRefusedOversizedMetric), 1.0);
  const Status drained = gateway_->CheckDrained();
  EXPECT_TRUE(drained.ok()) << drained;
}

// Without kept records (as the replay runs it) the gateway holds a request's record while it is
// in flight, shows it to the completion callback, and forgets it then: served or refused.
TEST_F(GatewayModelTest, WithoutKeptRecordsARequestIsForgottenOnceItsCallbackReturned) {
  GatewayModelOptions options = TightAdmission(/*max_wait_s=*/30.0);
  options.keep_finished_records = false;
  Build(options, kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 20'000)).ok());  // Refused: oversized.
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 8, 100)).ok());
  ASSERT_NE(gateway_->FindRecord(RequestId(2)), nullptr) << "in flight: kept";
  loop_.RunUntilIdle();
  EndSessions({1, 2});
  ASSERT_NE(CompletionOf(1), nullptr);
  ASSERT_NE(CompletionOf(2), nullptr);
  EXPECT_TRUE(CompletionOf(1)->record.refused);
  EXPECT_TRUE(CompletionOf(1)->engine.has_value());
  EXPECT_EQ(CompletionOf(2)->engine->report.output_tokens, 100);
  EXPECT_EQ(gateway_->FindRecord(RequestId(1)), nullptr);
  EXPECT_EQ(gateway_->RefusedRecord(RequestId(1)), nullptr);
  EXPECT_EQ(gateway_->FindRecord(RequestId(2)), nullptr);
  const Status drained = gateway_->CheckDrained();
  EXPECT_TRUE(drained.ok()) << drained;
}

TEST_F(GatewayModelTest, AWaiterBypassesAgedAfterTheMaxWait) {
  GatewayModelOptions options = TightAdmission(/*max_wait_s=*/1.0);
  // The long request reserves 128 + 1000 (the cap), not 128 + 3000.
  options.agentic.agentic_admission_expected_decode_cap = 1000;
  Build(options, kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 3000)).ok());
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 8 * kTokensPerBlock + 1000);
  SubmitAt(TimeNs::Millis(100), Request(2, /*session=*/2, 8, 500));
  SubmitAt(TimeNs::Millis(200), Request(3, /*session=*/3, 8, 600));
  loop_.RunUntil(TimeNs::Millis(900));
  EXPECT_EQ(gateway_->admission_waiting(), 2);
  loop_.RunUntilIdle();

  const Completion* first = CompletionOf(1);
  const Completion* second = CompletionOf(2);
  const Completion* third = CompletionOf(3);
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(first->record.admission_action, AdmissionAction::kAdmit);
  for (const Completion* c : {second, third}) {
    EXPECT_EQ(c->record.admission_action, AdmissionAction::kBypass) << c->record.id;
    EXPECT_EQ(c->record.admission_reason, AdmissionReason::kAged) << c->record.id;
    // Aged at the first drain (a gauge poll, every 0.25 s) after waiting 1 s.
    ASSERT_TRUE(c->record.dispatched.has_value());
    const TimeNs waited = *c->record.dispatched - c->record.received;
    EXPECT_GE(waited, TimeNs::Seconds(1.0)) << c->record.id;
    EXPECT_LE(waited, TimeNs::Seconds(1.25)) << c->record.id;
    EXPECT_LT(c->at, first->at) << "bypassed past the long request still running";
  }
  EXPECT_EQ(second->record.dispatched, TimeNs::Seconds(1.25));
  EXPECT_EQ(third->record.dispatched, TimeNs::Seconds(1.25));
  EXPECT_EQ(CompletionOrder(), (std::vector<int64_t>{2, 3, 1}));
  const std::vector<std::pair<std::string, double>> metrics = gateway_->AgenticKvMetrics();
  EXPECT_EQ(Metric(metrics, control::kBypassAgedMetric), 2.0);
  EXPECT_EQ(Metric(metrics, control::kBypassMetric), 2.0);
  EXPECT_EQ(gateway_->coordinator()->ledger().reserved(), 0);
  EXPECT_EQ(gateway_->coordinator()->ledger().lease_count(), 0);
  EndSessions({1, 2, 3});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// A newcomer's Acquire drains the FIFO: a waiter it resolves (here aged) is dispatched then,
// not at the next gauge poll.
TEST_F(GatewayModelTest, WaiterResolvedByANewArrivalIsDispatchedAtOnce) {
  GatewayModelOptions options = TightAdmission(/*max_wait_s=*/1.0);
  options.agentic.poll_interval_s = 2.0;
  options.agentic.agentic_admission_expected_decode_cap = 1000;
  Build(options, kOneTightEngine);
  // 1 holds 128 + 1000 for 3 s; 2 and 3 (128 + 500 each) cannot join it.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 3000)).ok());
  SubmitAt(TimeNs::Millis(100), Request(2, /*session=*/2, 8, 500));
  SubmitAt(TimeNs::Millis(1500), Request(3, /*session=*/3, 8, 500));
  loop_.RunUntil(TimeNs::Millis(1500));
  const GatewayRecord* second = gateway_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->admission_reason, AdmissionReason::kAged);
  EXPECT_EQ(second->dispatched, TimeNs::Millis(1500));
  EXPECT_EQ(gateway_->admission_waiting(), gateway_->coordinator()->waiting());
  loop_.RunUntilIdle();
  EndSessions({1, 2, 3});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, AWaiterThatCannotRunIsRefusedByTheEngineWithoutBlockingOthers) {
  GatewayModelOptions options = TightAdmission(/*max_wait_s=*/30.0);
  // The whole pool is the ceiling (1024 tokens), and the decode cap hides request 1's real
  // need from admission: it reserves 960 + 10 tokens, but needs 73 blocks of 64 to run, so
  // the engine refuses it at once (a rejected completion) when the waiter is dispatched.
  options.agentic.agentic_admission_headroom = 1.0;
  options.agentic.agentic_admission_expected_decode_cap = 10;
  Build(options, {.engines = 1, .device_blocks = 64});
  ASSERT_TRUE(Submit(Request(3, /*session=*/3, 10, 300)).ok());  // Reserves 170.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 60, 200)).ok()) << "it waits first";
  EXPECT_EQ(gateway_->admission_waiting(), 1);
  SubmitAt(TimeNs::Millis(500), Request(2, /*session=*/2, 2, 4));
  loop_.RunUntilIdle();
  ASSERT_EQ(CompletionOrder(), (std::vector<int64_t>{3, 1, 2}));
  const Completion* refused = CompletionOf(1);
  ASSERT_TRUE(refused->engine.has_value());
  EXPECT_TRUE(refused->engine->report.rejected);
  EXPECT_EQ(refused->engine->report.output_tokens, 0);
  EXPECT_EQ(refused->record.admission_reason, AdmissionReason::kCapacityAvailable);
  EXPECT_EQ(refused->at, CompletionOf(3)->at) << "refused as soon as it was dispatched";
  EXPECT_TRUE(CompletionOf(2)->engine.has_value());
  EXPECT_EQ(gateway_->in_flight(), 0);
  EndSessions({1, 2, 3});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Gauge polls. ---

TEST_F(GatewayModelTest, PollsEveryIntervalWhileBusyAndNeverWhileIdle) {
  GatewayModelOptions options;
  options.agentic.poll_interval_s = 0.5;
  Build(options);
  const TimeNs interval = TimeNs::Seconds(0.5);
  // Busy from 0 to 1.4 s, idle until 100 s, busy again until 100.9 s.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 1400)).ok());
  SubmitAt(TimeNs::Seconds(100), Request(2, /*session=*/2, 8, 900));
  loop_.RunUntilIdle();
  ASSERT_EQ(completions_.size(), 2u);
  const TimeNs idle_from = CompletionOf(1)->at;
  const TimeNs idle_until = TimeNs::Seconds(100);
  EXPECT_EQ(idle_from, TimeNs::Millis(1400));

  const std::vector<KvUsageSample>& samples = gateway_->kv_usage();
  std::vector<TimeNs> times;
  for (size_t i = 0; i < samples.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "sample " << i << " at " << samples[i].time);
    times.push_back(samples[i].time);
    if (i > 0) {
      EXPECT_GE(samples[i].time - samples[i - 1].time, interval);
    }
    EXPECT_EQ(samples[i].capacity_tokens, TotalCapacityTokens());
    EXPECT_EQ(samples[i].capacity_tokens, 2 * 4096 * kTokensPerBlock);
    EXPECT_FALSE(samples[i].time > idle_from && samples[i].time < idle_until)
        << "a sample while the fleet was idle (idle from " << idle_from << ")";
    // A request's arrival polls before it reaches an engine; the others see it running.
    const bool at_arrival = samples[i].time == TimeNs(0) || samples[i].time == idle_until;
    EXPECT_EQ(samples[i].used_tokens > 0, !at_arrival);
  }
  // The first request polls at once; polls follow every 0.5 s while busy; the request after
  // the gap polls at once again.
  EXPECT_EQ(times, (std::vector<TimeNs>{TimeNs(0), TimeNs::Millis(500), TimeNs::Millis(1000),
                                        idle_until, idle_until + TimeNs::Millis(500)}));
  EXPECT_EQ(gateway_->in_flight(), 0);
}

TEST_F(GatewayModelTest, SampleCountsWaitersAndUsedTokens) {
  Build(TightAdmission(/*max_wait_s=*/30.0), kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 600)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 8, 1000)).ok());
  ASSERT_EQ(gateway_->admission_waiting(), 1);
  loop_.RunUntil(TimeNs::Seconds(0.3));
  const std::vector<KvUsageSample>& samples = gateway_->kv_usage();
  ASSERT_EQ(samples.size(), 2u) << "polls at 0 and 0.25 s";
  EXPECT_EQ(samples[1].time, TimeNs::Seconds(0.25));
  EXPECT_EQ(samples[1].waiting_requests, 1) << "the admission waiter";
  // Request 1 holds its prompt and ~250 generated tokens, rounded up to blocks.
  EXPECT_GT(samples[1].used_tokens, 8 * kTokensPerBlock + 200);
  EXPECT_LT(samples[1].used_tokens, 8 * kTokensPerBlock + 300);
  EXPECT_EQ(samples[1].capacity_tokens, 1024 * kTokensPerBlock);
  loop_.RunUntilIdle();
  EndSessions({1, 2});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Working set: a paused program keeps its context; a new one waits for room. ---

TEST_F(GatewayModelTest, APausedProgramsHeldContextKeepsANewProgramWaitingUntilItsLastTurn) {
  GatewayModelOptions options;
  control::WorkingSetOptions working_set;
  working_set.headroom = 1.0;  // 16,384 tokens on the one engine.
  working_set.default_hold = TimeNs::Seconds(10);
  working_set.max_hold = TimeNs::Seconds(10);
  working_set.max_wait = TimeNs::Seconds(100);
  options.working_set = working_set;
  Build(options, kOneTightEngine);
  // Program 1's first turn ends in a tool call: it holds its 9,600 + 4 tokens for 10 s, and
  // the engine keeps them pinned as long.
  GatewayRequest first = Request(1, /*session=*/1, 600, 4, /*tool_call=*/true);
  first.next_pause = PauseKind::kToolCall;
  ASSERT_TRUE(Submit(std::move(first)).ok());
  // Program 2 needs 8,004 tokens: with program 1's context held it does not fit, and waits.
  SubmitAt(TimeNs::Millis(100), Request(2, /*session=*/2, 500, 4));
  // Program 1 is back from its tool and goes at once; this is its last turn.
  SubmitAt(TimeNs::Millis(200), Request(3, /*session=*/1, 610, 4));
  loop_.RunUntil(TimeNs::Millis(150));
  ASSERT_NE(CompletionOf(1), nullptr);
  EXPECT_EQ(CompletionOf(1)->first_block_priority, kv::kMaxPriority) << "held context pinned";
  EXPECT_EQ(gateway_->admission_waiting(), 1);
  EXPECT_EQ(gateway_->working_set()->Gauges().held_tokens, 600 * kTokensPerBlock + 4);
  loop_.RunUntilIdle();
  const Completion* c2 = CompletionOf(2);
  const Completion* c3 = CompletionOf(3);
  ASSERT_TRUE(c2 != nullptr && c3 != nullptr);
  EXPECT_EQ(c3->record.dispatched, TimeNs::Millis(200)) << "a continuing program never waits";
  EXPECT_EQ(c2->record.dispatched, c3->at) << "the new program runs once program 1 is done";
  EXPECT_EQ(gateway_->working_set()->counters().waited, 1);
  EXPECT_EQ(gateway_->working_set()->counters().holds_returned, 1);
  EndSessions({1, 2});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

TEST_F(GatewayModelTest, ClosingASessionCancelsItsWorkingSetWait) {
  GatewayModelOptions options;
  control::WorkingSetOptions working_set;
  working_set.headroom = 1.0;
  options.working_set = working_set;
  Build(options, kOneTightEngine);
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 900, 4)).ok());
  ASSERT_TRUE(Submit(Request(2, /*session=*/2, 500, 4)).ok());
  EXPECT_EQ(gateway_->admission_waiting(), 1);
  EndSessions({2});
  EXPECT_EQ(gateway_->admission_waiting(), 0);
  ASSERT_NE(CompletionOf(2), nullptr);
  EXPECT_FALSE(CompletionOf(2)->record.dispatch_error.ok()) << "cancelled, never dispatched";
  loop_.RunUntilIdle();
  EndSessions({1});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
}

// --- Admission v2. ---

TEST_F(GatewayModelTest, AdmissionV2ReservesUncachedTokensOnTheSessionsEngine) {
  GatewayModelOptions options;
  options.agentic.agentic_program_admission = true;
  options.agentic.agentic_admission_policy = control::AdmissionPolicy::kV2;
  Build(options, FleetShape{.engines = 2, .policy = "consistent_hashing"});
  const control::AdmissionCoordinator& c = *gateway_->coordinator();
  const EngineId engine = *fleet_->router().StickyEngine(routing::SessionRoutingKey(SessionId(1)));
  const std::string name = GatewayEngineName(engine);
  // A new session reserves its whole prompt plus decode, charged to its engine.
  ASSERT_TRUE(Submit(Request(1, /*session=*/1, 8, 100)).ok());
  EXPECT_EQ(c.ledger().engine_reserved(name), 8 * kTokensPerBlock + 100);
  loop_.RunUntilIdle();
  EXPECT_EQ(c.ledger().reserved(), 0);
  // Its next request reserves only what its last prompt did not hold.
  ASSERT_TRUE(Submit(Request(2, /*session=*/1, 12, 100)).ok());
  EXPECT_EQ(c.ledger().engine_reserved(name), 4 * kTokensPerBlock + 100);
  EXPECT_EQ(gateway_->FindRecord(RequestId(2))->engine, engine) << "landed where admission said";
  // Two new sessions sharing a 4-block prefix reserve it once.
  GatewayRequest a = Request(3, /*session=*/3, 6, 10, false, 77);
  GatewayRequest b = Request(4, /*session=*/3 + 2 * 1000, 6, 10, false, 77);
  a.shared_prefix_blocks = b.shared_prefix_blocks = 4;
  const bool same_engine =
      fleet_->router().StickyEngine(a.routing_key) == fleet_->router().StickyEngine(b.routing_key);
  const int64_t before = c.ledger().reserved();
  ASSERT_TRUE(Submit(std::move(a)).ok());
  ASSERT_TRUE(Submit(std::move(b)).ok());
  EXPECT_EQ(c.ledger().reserved() - before,
            2 * (2 * kTokensPerBlock + 10) + (same_engine ? 1 : 2) * 4 * kTokensPerBlock);
  EXPECT_EQ(c.ledger().prefix_entries(), same_engine ? 1 : 2);
  loop_.RunUntilIdle();
  EndSessions({1, 3, 2003});
  EXPECT_TRUE(gateway_->CheckDrained().ok()) << gateway_->CheckDrained();
  EXPECT_EQ(c.ledger().prefix_entries(), 0);
}

}  // namespace
}  // namespace agentkv::sim
