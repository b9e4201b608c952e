// Randomized runs of GatewayModel: conservation, FIFO order and the ledger bound over a random
// workload, and sessions closed mid-flight (cancel, abort, drain) on simulated time.
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

using control::AdmissionReason;
using testing_support::Keys;
using testing_support::kStep;
using testing_support::kTokensPerBlock;
using testing_support::Metric;

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

// Request `id` of `session`: `blocks` prompt blocks of content `content`, `max_new` output tokens.
GatewayRequest RandomRequest(int64_t id, int64_t session, int64_t blocks, int64_t max_new,
                             uint64_t content) {
  GatewayRequest r;
  r.request.id = RequestId(id);
  r.request.prompt_keys = Keys(content, blocks);
  r.request.prompt_tokens = blocks * kTokensPerBlock;
  r.request.max_new_tokens = max_new;
  r.request.kv_options.conversation = ConversationId(session);
  r.session = SessionId(session);
  r.routing_key = routing::SessionRoutingKey(r.session);
  return r;
}

// Strict FIFO: waiters leave the queue (admitted or aged) in their arrival order.
void ExpectWaitersLeftInArrivalOrder(const GatewayModel& gateway,
                                     const std::vector<int64_t>& waited_in_arrival_order) {
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
}

// Every request has a decision; an aged one waited the max wait, one that never waited left at
// once.
void ExpectDecisionsMatchWaits(const GatewayModel& gateway, const std::set<int64_t>& waited,
                               int64_t requests) {
  for (int64_t id = 0; id < requests; ++id) {
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
}

// Every session closes on every engine once, and the engines hold none of them after.
void ExpectEverySessionClosesOnEveryEngineOnce(GatewayModel& gateway, const FleetModel& fleet,
                                               int64_t requests) {
  const int32_t engines = fleet.num_engines();
  std::set<int64_t> sessions;
  for (int64_t id = 0; id < requests; ++id) {
    sessions.insert(gateway.FindRecord(RequestId(id))->session.value());
  }
  for (int64_t s : sessions) {
    EXPECT_EQ(gateway.EndSession(SessionId(s)).size(), static_cast<size_t>(engines))
        << "session " << s;
  }
  EXPECT_EQ(gateway.engine_session_closes(), engines * static_cast<int64_t>(sessions.size()));
  EXPECT_EQ(Metric(gateway.AgenticKvMetrics(), control::kSessionCloseMetric),
            static_cast<double>(sessions.size()));
  for (int32_t e = 0; e < engines; ++e) {
    for (int64_t s : sessions) {
      EXPECT_FALSE(fleet.engine(EngineId(e)).engine().cache().SessionOpen(SessionId(s)));
    }
    EXPECT_TRUE(fleet.engine(EngineId(e)).engine().CheckInvariants().ok());
  }
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
      const int64_t session = session_of(rng);
      const int64_t n = blocks(rng);
      GatewayRequest r =
          RandomRequest(id, session, n, output(rng), static_cast<uint64_t>(session) * 1'000'000);
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
    ExpectWaitersLeftInArrivalOrder(gateway, waited_in_arrival_order);
    ExpectDecisionsMatchWaits(gateway, waited, kRequests);
    ExpectEverySessionClosesOnEveryEngineOnce(gateway, fleet, kRequests);
    EXPECT_EQ(gateway.coordinator()->ledger().reserved(), 0);
    EXPECT_TRUE(gateway.CheckDrained().ok()) << gateway.CheckDrained();
  }
}

// What ClosesMidFlightCancelDrainAndConserve's completions must show: each request ends once;
// an aborted one with fewer tokens than asked, at most one step after the close that aborted
// it; a cancelled one never dispatched, with a FailedPrecondition dispatch error.
struct CloseObserver {
  explicit CloseObserver(const EventLoop* event_loop) : loop(event_loop) {}

  void OnComplete(const GatewayRecord& record, const EngineRequestRecord* engine) {
    ++completed[record.id.value()];
    if (engine != nullptr && engine->report.aborted) {
      ++aborted;
      EXPECT_LT(engine->report.output_tokens, max_new_of.at(record.id.value()));
      auto close = aborting_close_of.find(record.session.value());
      ASSERT_NE(close, aborting_close_of.end()) << "aborted without a close";
      EXPECT_GE(loop->now(), close->second);
      EXPECT_LE(loop->now(), close->second + kStep) << "ended at the next step boundary";
      EXPECT_TRUE(record.dispatched.has_value());
    }
    if (engine == nullptr) {
      // Cancelled in the FIFO (or admitted just before the cancel reached the coordinator).
      EXPECT_EQ(record.dispatch_error.code(), StatusCode::kFailedPrecondition)
          << record.dispatch_error;
      EXPECT_FALSE(record.dispatched.has_value());
      ++cancelled;
    }
  }

  const EventLoop* loop;
  std::map<int64_t, int> completed;
  std::map<int64_t, int64_t> max_new_of;
  // The latest close of each session that had requests on engines (aborted them).
  std::map<int64_t, TimeNs> aborting_close_of;
  int64_t cancelled = 0;
  int64_t aborted = 0;
  int64_t accepted = 0;
};

// Schedules a close of `session` at `at`, noting it when it aborts requests on engines.
void ScheduleClose(EventLoop& loop, GatewayModel& gateway, CloseObserver& observer, TimeNs at,
                   int64_t session) {
  loop.Schedule(at, [&loop, &gateway, &observer, session] {
    const int64_t aborts_before = gateway.aborts_performed();
    (void)gateway.EndSession(SessionId(session));
    if (gateway.aborts_performed() > aborts_before) {
      observer.aborting_close_of[session] = loop.now();
    }
  });
}

// Schedules `r` at `at`; a session still ending refuses it.
void ScheduleRequest(EventLoop& loop, GatewayModel& gateway, CloseObserver& observer, TimeNs at,
                     GatewayRequest r) {
  observer.max_new_of[r.request.id.value()] = r.request.max_new_tokens;
  loop.Schedule(at, [&gateway, &observer, r = std::move(r)]() mutable {
    // A session still ending (draining, closing, or closed while requests it aborted still
    // run) refuses new requests, as the gateway answers 409.
    const bool ending = gateway.flow().Knows(r.session) &&
                        *gateway.flow().phase(r.session) != control::SessionPhase::kActive;
    Status s = gateway.Submit(std::move(r));
    if (!s.ok()) {
      EXPECT_TRUE(ending) << s;
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
      return;
    }
    ++observer.accepted;
  });
}

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
    CloseObserver observer(&loop);
    gateway.set_completion_callback(
        [&observer](const GatewayRecord& record, const EngineRequestRecord* engine) {
          observer.OnComplete(record, engine);
        });
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> gap_us(0, 30'000);
    std::uniform_int_distribution<int64_t> session_of(1, 6);
    TimeNs at(0);
    for (int64_t id = 0; id < 150; ++id) {
      at += TimeNs(gap_us(rng) * 1000);
      const int64_t session = session_of(rng);
      if (rng() % 5 == 0) {
        ScheduleClose(loop, gateway, observer, at, session);
        continue;
      }
      const int64_t n = static_cast<int64_t>(rng() % 30) + 1;
      const int64_t max_new = static_cast<int64_t>(rng() % 300) + 1;
      ScheduleRequest(
          loop, gateway, observer, at,
          RandomRequest(id, session, n, max_new, static_cast<uint64_t>(id) * 1'000'000));
    }
    loop.RunUntilIdle();
    for (int64_t s = 1; s <= 6; ++s) (void)gateway.EndSession(SessionId(s));
    loop.RunUntilIdle();
    EXPECT_EQ(static_cast<int64_t>(observer.completed.size()), observer.accepted);
    for (const auto& [id, count] : observer.completed) EXPECT_EQ(count, 1) << "request " << id;
    EXPECT_EQ(gateway.coordinator()->ledger().reserved(), 0);
    EXPECT_TRUE(gateway.CheckDrained().ok()) << gateway.CheckDrained();
    for (int32_t e = 0; e < 2; ++e) {
      EXPECT_TRUE(gateway.fleet().engine(EngineId(e)).engine().CheckInvariants().ok());
    }
    EXPECT_EQ(observer.aborted, gateway.aborts_performed())
        << "every abort an engine took ended one";
    EXPECT_LE(gateway.aborts_performed(), gateway.aborts_requested());
    cancelled_total += observer.cancelled;
    aborts_total += observer.aborted;
  }
  EXPECT_GT(cancelled_total, 0) << "some closes should cancel admission waits";
  EXPECT_GT(aborts_total, 0) << "some closes should abort running requests";
}

}  // namespace
}  // namespace agentkv::sim
