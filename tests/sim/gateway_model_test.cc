// Tests of GatewayModel: pass-through with every feature off, the session lifecycle (session
// attached on generate, closed on every engine), idle sessions and retained ones, program
// admission (FIFO, aged bypass, lease return), gauge polls, Continuum TTL pins, Submit errors,
// and a randomized run checking the gateway's conservation rules.
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
#include "sim_test_support.h"

namespace agentkv::sim {
namespace {

constexpr int32_t kTokensPerBlock = 16;
// Every engine step lasts exactly this long, so request times are step counts.
constexpr TimeNs kStep = TimeNs::Millis(1);

using control::AdmissionAction;
using control::AdmissionReason;
using testing_support::Keys;

struct FleetShape {
  int32_t engines = 2;
  int64_t device_blocks = 4096;
  std::string policy = "round_robin";
};

// What the completion callback saw of one request.
struct Completion {
  GatewayRecord record;
  std::optional<EngineRequestRecord> engine;
  TimeNs at;
  // The priority of the request's first prompt block on its engine at completion (after any
  // pin the gateway took), when cached.
  std::optional<kv::Priority> first_block_priority;
};

std::optional<double> Metric(const std::vector<std::pair<std::string, double>>& metrics,
                             std::string_view name) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  return std::nullopt;
}

class GatewayModelTest : public ::testing::Test {
 protected:
  void Build(const GatewayModelOptions& options, const FleetShape& shape = {}) {
    FleetModelOptions fleet_options;
    fleet_options.num_engines = shape.engines;
    fleet_options.router.policy = routing::ParseRouterPolicy(shape.policy).value();
    fleet_options.engine.config.kv_pool.tokens_per_block = kTokensPerBlock;
    fleet_options.engine.config.kv_pool.max_total_tokens = shape.device_blocks * kTokensPerBlock;
    fleet_options.engine.config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
    fleet_options.engine.fixed_step_time = kStep;
    if (demote_.has_value()) {
      kv::KvCacheOptions& cache = fleet_options.engine.config.cache;
      cache.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
      cache.finished_subagent_priority = demote_;
      cache.finished_subagent_min_idle_iterations = 0;
    }
    StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&loop_, fleet_options);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    fleet_ = std::move(*fleet);
    StatusOr<std::unique_ptr<GatewayModel>> gateway =
        GatewayModel::Create(&loop_, fleet_.get(), options);
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    gateway_ = std::move(*gateway);
    gateway_->set_completion_callback(
        [this](const GatewayRecord& record, const EngineRequestRecord* engine) {
          Completion c{record, std::nullopt, loop_.now(), std::nullopt};
          if (engine != nullptr) {
            c.engine = *engine;
            EXPECT_EQ(engine->id, record.id);
            EXPECT_EQ(engine->finished, loop_.now()) << "the callback runs at the finish time";
          }
          if (record.engine.has_value()) {
            auto keys = keys_.find(record.id.value());
            if (keys != keys_.end() && !keys->second.empty()) {
              StatusOr<kv::Priority> p =
                  fleet_->engine(*record.engine).scheduler().cache().GetPriority(keys->second[0]);
              if (p.ok()) c.first_block_priority = *p;
            }
          }
          ++completion_count_[record.id.value()];
          completions_.push_back(std::move(c));
        });
  }

  // Request `id` of `session`: `blocks` full prompt blocks of content `content` (default: the
  // request's own), `max_new` output tokens.
  GatewayRequest Request(int64_t id, int64_t session, int64_t blocks, int64_t max_new,
                         bool tool_call = false, uint64_t content = 0) {
    GatewayRequest r;
    r.request.id = RequestId(id);
    r.request.prompt_keys =
        Keys(content != 0 ? content : static_cast<uint64_t>(id) * 1'000'000, blocks);
    r.request.prompt_tokens = blocks * kTokensPerBlock;
    r.request.max_new_tokens = max_new;
    r.request.kv_options.conversation = ConversationId(session);
    r.session = SessionId(session);
    r.routing_key = routing::SessionRoutingKey(SessionId(session));
    r.ends_in_tool_call = tool_call;
    keys_[id] = r.request.prompt_keys;
    return r;
  }

  Status Submit(GatewayRequest request) { return gateway_->Submit(std::move(request)); }

  // Submits `request` at `at` (the Submit must succeed).
  void SubmitAt(TimeNs at, GatewayRequest request) {
    loop_.Schedule(at, [this, request = std::move(request)]() mutable {
      Status s = gateway_->Submit(std::move(request));
      EXPECT_TRUE(s.ok()) << s;
    });
  }

  const Completion* CompletionOf(int64_t id) const {
    for (const Completion& c : completions_) {
      if (c.record.id == RequestId(id)) return &c;
    }
    return nullptr;
  }

  std::vector<int64_t> CompletionOrder() const {
    std::vector<int64_t> order;
    for (const Completion& c : completions_) order.push_back(c.record.id.value());
    return order;
  }

  const kv::KvCacheManager& Cache(int32_t engine) const {
    return fleet_->engine(EngineId(engine)).scheduler().cache();
  }

  void EndSessions(std::initializer_list<int64_t> sessions) {
    for (int64_t s : sessions) (void)gateway_->EndSession(SessionId(s));
  }

  int64_t TotalCapacityTokens() const {
    int64_t total = 0;
    for (int32_t e = 0; e < fleet_->num_engines(); ++e) {
      total += fleet_->gauges(EngineId(e)).max_total_num_tokens;
    }
    return total;
  }

  // When set before Build, engines demote finished sub-agents to this priority
  // (per_conversation, no idle bound).
  std::optional<kv::Priority> demote_;
  EventLoop loop_;
  std::unique_ptr<FleetModel> fleet_;
  std::unique_ptr<GatewayModel> gateway_;
  std::map<int64_t, std::vector<kv::BlockKey>> keys_;
  std::map<int64_t, int> completion_count_;
  std::vector<Completion> completions_;
};

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

// --- TTL pins: fixed-ttl, then continuum. ---

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

// --- Randomized: conservation, FIFO and the ledger bound over a random workload. ---

// The randomized tests' fleet: `engines` round-robin engines of 512 blocks, release on close.
FleetModelOptions RandomFleet(int32_t engines) {
  FleetModelOptions fleet_options;
  fleet_options.num_engines = engines;
  fleet_options.router.policy = routing::RouterPolicy::kRoundRobin;
  fleet_options.engine.config.kv_pool.tokens_per_block = kTokensPerBlock;
  fleet_options.engine.config.kv_pool.max_total_tokens = 512 * kTokensPerBlock;
  fleet_options.engine.config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  fleet_options.engine.fixed_step_time = kStep;
  return fleet_options;
}

// The randomized tests' gateway: lifecycle and admission on, a tight ledger, fast polls.
GatewayModelOptions RandomGateway() {
  GatewayModelOptions options;
  options.agentic.agentic_session_lifecycle = true;
  options.agentic.agentic_program_admission = true;
  options.agentic.agentic_admission_headroom = 0.1;
  options.agentic.agentic_admission_max_wait_s = 0.4;
  options.agentic.poll_interval_s = 0.1;
  options.agentic.staleness_s = 0.5;
  return options;
}

TEST(GatewayModelRandomTest, ConservesRequestsLeasesAndFifoOrder) {
  for (uint64_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EventLoop loop;
    StatusOr<std::unique_ptr<FleetModel>> made = FleetModel::Create(&loop, RandomFleet(3));
    ASSERT_TRUE(made.ok()) << made.status();
    FleetModel& fleet = **made;
    GatewayModelOptions options = RandomGateway();
    options.fixed_ttl = TimeNs::Seconds(0.2);
    StatusOr<std::unique_ptr<GatewayModel>> made_gateway =
        GatewayModel::Create(&loop, &fleet, options);
    ASSERT_TRUE(made_gateway.ok()) << made_gateway.status();
    GatewayModel& gateway = **made_gateway;

    std::map<int64_t, int> completed;
    std::vector<int64_t> waited_in_arrival_order;
    std::set<int64_t> waited;
    int64_t max_reserved_over_ceiling = 0;
    gateway.set_completion_callback(
        [&](const GatewayRecord& record, const EngineRequestRecord* engine) {
          ++completed[record.id.value()];
          EXPECT_NE(engine, nullptr) << "every request fits an engine";
          const control::BudgetLedger& ledger = gateway.coordinator()->ledger();
          max_reserved_over_ceiling =
              std::max(max_reserved_over_ceiling, ledger.reserved() - ledger.ceiling());
        });

    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> gap_us(0, 60'000);
    std::uniform_int_distribution<int64_t> blocks(1, 40);
    std::uniform_int_distribution<int64_t> output(1, 300);
    std::uniform_int_distribution<int64_t> session_of(1, 12);
    std::bernoulli_distribution tool(0.5);
    constexpr int64_t kRequests = 120;
    TimeNs at(0);
    for (int64_t id = 0; id < kRequests; ++id) {
      at += TimeNs(gap_us(rng) * 1000);
      GatewayRequest r;
      r.request.id = RequestId(id);
      const int64_t session = session_of(rng);
      const int64_t n = blocks(rng);
      r.request.prompt_keys = Keys(static_cast<uint64_t>(session) * 1'000'000, n);
      r.request.prompt_tokens = n * kTokensPerBlock;
      r.request.max_new_tokens = output(rng);
      r.request.kv_options.conversation = ConversationId(session);
      r.session = SessionId(session);
      r.routing_key = routing::SessionRoutingKey(r.session);
      r.ends_in_tool_call = tool(rng);
      loop.Schedule(at, [&, r = std::move(r)]() mutable {
        const int64_t rid = r.request.id.value();
        const int64_t in_flight_before = gateway.in_flight();
        Status s = gateway.Submit(std::move(r));
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(gateway.in_flight(), in_flight_before + 1);
        if (!gateway.FindRecord(RequestId(rid))->dispatched.has_value()) {
          waited.insert(rid);
          waited_in_arrival_order.push_back(rid);
        }
        EXPECT_EQ(gateway.coordinator()->waiting(), gateway.admission_waiting());
        EXPECT_TRUE(gateway.coordinator()->CheckInvariants().ok());
      });
    }
    loop.RunUntilIdle();
    EXPECT_EQ(gateway.in_flight(), 0);
    EXPECT_EQ(static_cast<int64_t>(completed.size()), kRequests);
    for (const auto& [id, count] : completed) EXPECT_EQ(count, 1) << "request " << id;
    EXPECT_LE(max_reserved_over_ceiling, 0) << "admission never commits past the ceiling";
    ASSERT_GT(waited.size(), 5u) << "the workload should make requests wait";

    // Strict FIFO: waiters leave the queue (admitted or aged) in their arrival order.
    std::vector<std::pair<TimeNs, int64_t>> dispatch;
    for (int64_t id : waited_in_arrival_order) {
      const GatewayRecord* record = gateway.FindRecord(RequestId(id));
      ASSERT_NE(record, nullptr);
      ASSERT_TRUE(record->dispatched.has_value());
      dispatch.emplace_back(*record->dispatched, id);
    }
    for (size_t i = 1; i < dispatch.size(); ++i) {
      EXPECT_LE(dispatch[i - 1].first, dispatch[i].first)
          << "waiter " << dispatch[i].second << " left before " << dispatch[i - 1].second;
    }
    for (int64_t id = 0; id < kRequests; ++id) {
      const GatewayRecord* record = gateway.FindRecord(RequestId(id));
      ASSERT_NE(record, nullptr);
      ASSERT_TRUE(record->admission_action.has_value());
      if (record->admission_reason == AdmissionReason::kAged) {
        EXPECT_GE(*record->dispatched - record->received, TimeNs::Seconds(0.4)) << id;
      }
      if (!waited.contains(id)) {
        EXPECT_EQ(record->dispatched, record->received) << id;
      }
    }

    // Every session closes on every engine once.
    std::set<int64_t> sessions;
    for (int64_t id = 0; id < kRequests; ++id) {
      sessions.insert(gateway.FindRecord(RequestId(id))->session.value());
    }
    for (int64_t s : sessions) {
      EXPECT_EQ(gateway.EndSession(SessionId(s)).size(), 3u) << "session " << s;
    }
    EXPECT_EQ(gateway.engine_session_closes(), 3 * static_cast<int64_t>(sessions.size()));
    EXPECT_EQ(Metric(gateway.AgenticKvMetrics(), control::kSessionCloseMetric),
              static_cast<double>(sessions.size()));
    for (int32_t e = 0; e < 3; ++e) {
      for (int64_t s : sessions) {
        EXPECT_FALSE(fleet.engine(EngineId(e)).scheduler().cache().SessionOpen(SessionId(s)));
      }
      EXPECT_TRUE(fleet.engine(EngineId(e)).scheduler().CheckInvariants().ok());
    }
    EXPECT_EQ(gateway.coordinator()->ledger().reserved(), 0);
    EXPECT_TRUE(gateway.CheckDrained().ok()) << gateway.CheckDrained();
  }
}

}  // namespace
}  // namespace agentkv::sim

namespace agentkv::sim {
namespace {

// Sessions closed at random moments, while their requests wait for admission or run: the
// served close protocol on simulated time. Every request ends exactly once (run to its end,
// aborted on its engine by its session's close, or cancelled in the FIFO by it), an aborted
// request ends at most one step after the close that aborted it with fewer tokens than it
// asked for, a request for a draining session is refused, every lease comes back, and the
// gateway drains.
TEST(GatewayModelRandomTest, ClosesMidFlightCancelDrainAndConserve) {
  int64_t cancelled_total = 0;
  int64_t aborts_total = 0;
  for (uint64_t seed : {21u, 22u, 23u, 24u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EventLoop loop;
    StatusOr<std::unique_ptr<FleetModel>> made = FleetModel::Create(&loop, RandomFleet(2));
    ASSERT_TRUE(made.ok()) << made.status();
    GatewayModelOptions options = RandomGateway();
    options.session_drain_timeout = TimeNs::Millis(seed % 2 == 0 ? 50 : 5000);
    StatusOr<std::unique_ptr<GatewayModel>> made_gateway =
        GatewayModel::Create(&loop, made->get(), options);
    ASSERT_TRUE(made_gateway.ok()) << made_gateway.status();
    GatewayModel& gateway = **made_gateway;

    std::map<int64_t, int> completed;
    std::map<int64_t, int64_t> max_new_of;
    // The latest close of each session that had requests on engines (aborted them).
    std::map<int64_t, TimeNs> aborting_close_of;
    int64_t cancelled = 0;
    int64_t aborted = 0;
    gateway.set_completion_callback(
        [&](const GatewayRecord& record, const EngineRequestRecord* engine) {
          ++completed[record.id.value()];
          if (engine != nullptr && engine->report.aborted) {
            ++aborted;
            EXPECT_LT(engine->report.output_tokens, max_new_of.at(record.id.value()));
            auto close = aborting_close_of.find(record.session.value());
            ASSERT_NE(close, aborting_close_of.end()) << "aborted without a close";
            EXPECT_GE(loop.now(), close->second);
            EXPECT_LE(loop.now(), close->second + kStep) << "ended at the next step boundary";
            EXPECT_TRUE(record.dispatched.has_value());
          }
          if (engine == nullptr) {
            // Cancelled in the FIFO (or admitted just before the cancel reached the coordinator).
            EXPECT_EQ(record.dispatch_error.code(), StatusCode::kFailedPrecondition)
                << record.dispatch_error;
            EXPECT_FALSE(record.dispatched.has_value());
            ++cancelled;
          }
        });
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> gap_us(0, 30'000);
    std::uniform_int_distribution<int64_t> session_of(1, 6);
    int64_t accepted = 0;
    TimeNs at(0);
    for (int64_t id = 0; id < 150; ++id) {
      at += TimeNs(gap_us(rng) * 1000);
      const int64_t session = session_of(rng);
      if (rng() % 5 == 0) {
        loop.Schedule(at, [&, session] {
          const int64_t aborts_before = gateway.aborts_performed();
          (void)gateway.EndSession(SessionId(session));
          if (gateway.aborts_performed() > aborts_before) aborting_close_of[session] = loop.now();
        });
        continue;
      }
      GatewayRequest r;
      r.request.id = RequestId(id);
      const int64_t n = static_cast<int64_t>(rng() % 30) + 1;
      r.request.prompt_keys = Keys(static_cast<uint64_t>(id) * 1'000'000, n);
      r.request.prompt_tokens = n * kTokensPerBlock;
      r.request.max_new_tokens = static_cast<int64_t>(rng() % 300) + 1;
      r.request.kv_options.conversation = ConversationId(session);
      r.session = SessionId(session);
      r.routing_key = routing::SessionRoutingKey(r.session);
      max_new_of[id] = r.request.max_new_tokens;
      loop.Schedule(at, [&, r = std::move(r)]() mutable {
        // A session still ending (draining, closing, or closed while requests it aborted
        // still run) refuses new requests, as the gateway answers 409.
        const bool ending = gateway.flow().Knows(r.session) &&
                            *gateway.flow().phase(r.session) != control::SessionPhase::kActive;
        Status s = gateway.Submit(std::move(r));
        if (!s.ok()) {
          EXPECT_TRUE(ending) << s;
          EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
          return;
        }
        ++accepted;
      });
    }
    loop.RunUntilIdle();
    for (int64_t s = 1; s <= 6; ++s) (void)gateway.EndSession(SessionId(s));
    loop.RunUntilIdle();
    EXPECT_EQ(static_cast<int64_t>(completed.size()), accepted);
    for (const auto& [id, count] : completed) EXPECT_EQ(count, 1) << "request " << id;
    EXPECT_EQ(gateway.coordinator()->ledger().reserved(), 0);
    EXPECT_TRUE(gateway.CheckDrained().ok()) << gateway.CheckDrained();
    for (int32_t e = 0; e < 2; ++e) {
      EXPECT_TRUE(gateway.fleet().engine(EngineId(e)).scheduler().CheckInvariants().ok());
    }
    EXPECT_EQ(aborted, gateway.aborts_performed()) << "every abort an engine took ended one";
    EXPECT_LE(gateway.aborts_performed(), gateway.aborts_requested());
    cancelled_total += cancelled;
    aborts_total += aborted;
  }
  EXPECT_GT(cancelled_total, 0) << "some closes should cancel admission waits";
  EXPECT_GT(aborts_total, 0) << "some closes should abort running requests";
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
