// Tests of FleetModel: routing policies over simulated engines, session closes on every
// engine, conservation and determinism.
#include "agentkv/sim/fleet/fleet_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/routing/router.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "tests/sim/sim_test_support.h"

namespace agentkv::sim {
namespace {

constexpr int32_t kTokensPerBlock = 16;

using testing_support::Keys;

// Request `id` of `session`: the session's prompt grows by one block per turn.
engine::SchedulerRequest SessionRequest(int64_t id, int64_t session, int64_t turn) {
  engine::SchedulerRequest request;
  request.id = RequestId(id);
  request.prompt_tokens = (8 + turn) * kTokensPerBlock;
  request.prompt_keys = Keys(static_cast<uint64_t>(session) * 1000, 8 + turn);
  request.max_new_tokens = 4;
  request.kv_options.session = SessionId(session);
  return request;
}

std::unique_ptr<FleetModel> MakeFleet(
    EventLoop* loop, const std::string& policy, int32_t engines,
    kv::SessionCloseMode close_mode = kv::SessionCloseMode::kDereference) {
  FleetModelOptions options;
  options.num_engines = engines;
  options.router.policy = routing::ParseRouterPolicy(policy).value();
  options.engine.config.kv_pool.tokens_per_block = kTokensPerBlock;
  options.engine.config.kv_pool.max_total_tokens = 4096 * kTokensPerBlock;
  options.engine.config.cache.session_close_mode = close_mode;
  StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(loop, options);
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  return fleet.ok() ? std::move(*fleet) : nullptr;
}

TEST(FleetModelTest, ConsistentHashingKeepsASessionOnOneEngine) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet = MakeFleet(&loop, "consistent_hashing", 4);
  ASSERT_NE(fleet, nullptr);
  std::map<int64_t, std::set<int32_t>> engines_of_session;
  int64_t id = 0;
  for (int64_t turn = 0; turn < 3; ++turn) {
    for (int64_t session = 1; session <= 24; ++session) {
      StatusOr<EngineId> engine = fleet->Submit(SessionRequest(id++, session, turn),
                                                routing::SessionRoutingKey(SessionId(session)));
      ASSERT_TRUE(engine.ok()) << engine.status();
      engines_of_session[session].insert(engine->value());
    }
    loop.RunUntil(loop.now() + TimeNs::Millis(50));
  }
  loop.RunUntilIdle();
  std::set<int32_t> used;
  for (const auto& [session, engines] : engines_of_session) {
    EXPECT_EQ(engines.size(), 1u) << "session " << session;
    used.insert(*engines.begin());
  }
  EXPECT_GT(used.size(), 1u) << "24 sessions should not all hash to one engine";
  EXPECT_EQ(fleet->num_completed(), id);
  // Later turns reuse the earlier turns' prefix on the engine the session stays on.
  const EngineId engine(*engines_of_session[1].begin());
  const EngineRequestRecord* last_turn = fleet->engine(engine).FindRecord(RequestId(2 * 24));
  ASSERT_NE(last_turn, nullptr);
  EXPECT_GT(last_turn->report.cached_device_tokens, 0);
}

TEST(FleetModelTest, RoundRobinSpreads) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet = MakeFleet(&loop, "round_robin", 4);
  ASSERT_NE(fleet, nullptr);
  std::vector<int32_t> placed;
  for (int64_t i = 0; i < 8; ++i) {
    StatusOr<EngineId> engine = fleet->Submit(SessionRequest(i, /*session=*/1, 0), 1);
    ASSERT_TRUE(engine.ok()) << engine.status();
    placed.push_back(engine->value());
  }
  EXPECT_EQ(placed, (std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  for (int32_t e = 0; e < 4; ++e) {
    EXPECT_EQ(fleet->gauges(EngineId(e)).num_queue_reqs, 2) << "engine " << e;
    EXPECT_EQ(fleet->router().load(EngineId(e)), 2);
  }
  loop.RunUntilIdle();
  EXPECT_EQ(fleet->num_completed(), 8);
  for (const engine::SchedulerGauges& gauges : fleet->AllGauges()) {
    EXPECT_EQ(gauges.num_finished_reqs, 2);
    EXPECT_EQ(gauges.num_running_reqs + gauges.num_queue_reqs, 0);
  }
  for (int32_t e = 0; e < 4; ++e) EXPECT_EQ(fleet->router().load(EngineId(e)), 0);
}

TEST(FleetModelTest, CacheAwareFollowsTheSharedPrefix) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet = MakeFleet(&loop, "cache_aware", 4);
  ASSERT_NE(fleet, nullptr);
  StatusOr<EngineId> first = fleet->Submit(SessionRequest(0, /*session=*/9, 0), 0);
  ASSERT_TRUE(first.ok());
  loop.RunUntilIdle();
  StatusOr<EngineId> second = fleet->Submit(SessionRequest(1, /*session=*/9, 1), 0);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(FleetModelTest, CloseOnEveryEngineFreesTheSessionWhereItLived) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet =
      MakeFleet(&loop, "round_robin", 3, kv::SessionCloseMode::kRelease);
  ASSERT_NE(fleet, nullptr);
  // Engine 0 serves session 5, engine 1 session 6; engine 2 serves nothing.
  ASSERT_EQ(*fleet->Submit(SessionRequest(0, 5, 0), 5), EngineId(0));
  ASSERT_EQ(*fleet->Submit(SessionRequest(1, 6, 0), 6), EngineId(1));
  loop.RunUntilIdle();
  const int64_t cached = fleet->gauges(EngineId(0)).evictable_tokens;
  EXPECT_GT(cached, 0);
  EXPECT_TRUE(fleet->engine(EngineId(0)).engine().cache().SessionOpen(SessionId(5)));

  const std::vector<int64_t> freed = fleet->CloseSessionOnEveryEngine(SessionId(5));
  ASSERT_EQ(freed.size(), 3u);
  EXPECT_EQ(freed[0], cached);
  EXPECT_EQ(freed[1], 0);
  EXPECT_EQ(freed[2], 0);
  EXPECT_EQ(fleet->gauges(EngineId(0)).evictable_tokens, 0);
  EXPECT_FALSE(fleet->engine(EngineId(0)).engine().cache().SessionOpen(SessionId(5)));
  // Session 6 on engine 1 is untouched.
  EXPECT_GT(fleet->gauges(EngineId(1)).evictable_tokens, 0);
  // Idempotent.
  EXPECT_EQ(fleet->CloseSessionOnEveryEngine(SessionId(5)), (std::vector<int64_t>{0, 0, 0}));
}

// An abort goes to every engine: the one holding the request ends it at its next step
// boundary and completes it through the fleet's callback; the others, and a second abort
// once it finished, ignore it.
TEST(FleetModelTest, AbortOnEveryEngineEndsTheRequestWhereItRuns) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet = MakeFleet(&loop, "round_robin", 3);
  ASSERT_NE(fleet, nullptr);
  std::vector<std::tuple<EngineId, int64_t, bool>> completed;
  fleet->set_completion_callback([&](EngineId engine, const EngineRequestRecord& record) {
    completed.emplace_back(engine, record.id.value(), record.report.aborted);
  });
  engine::SchedulerRequest long_request = SessionRequest(0, 5, 0);
  long_request.max_new_tokens = 1000;
  ASSERT_EQ(*fleet->Submit(std::move(long_request), 5), EngineId(0));
  ASSERT_EQ(*fleet->Submit(SessionRequest(1, 6, 0), 6), EngineId(1));
  EXPECT_EQ(fleet->AbortOnEveryEngine(RequestId(9)), 0) << "unknown everywhere";
  loop.RunNext();  // Engine 0's first step starts.
  EXPECT_EQ(fleet->AbortOnEveryEngine(RequestId(0)), 1);
  loop.RunUntilIdle();
  EXPECT_EQ(fleet->num_completed(), 2);
  ASSERT_EQ(completed.size(), 2u);
  const EngineRequestRecord* aborted = fleet->engine(EngineId(0)).FindRecord(RequestId(0));
  ASSERT_NE(aborted, nullptr);
  EXPECT_TRUE(aborted->report.aborted);
  EXPECT_EQ(aborted->report.output_tokens, 1) << "ended after its prefill step";
  EXPECT_NE(std::find(completed.begin(), completed.end(), std::make_tuple(EngineId(0), 0, true)),
            completed.end());
  EXPECT_NE(std::find(completed.begin(), completed.end(), std::make_tuple(EngineId(1), 1, false)),
            completed.end());
  EXPECT_EQ(fleet->engine(EngineId(0)).in_flight(), 0);
  EXPECT_EQ(fleet->AbortOnEveryEngine(RequestId(0)), 0) << "finished: ignored";
}

TEST(FleetModelTest, RejectsBadOptions) {
  EventLoop loop;
  FleetModelOptions options;
  options.num_engines = 0;
  EXPECT_FALSE(FleetModel::Create(&loop, options).ok());
  options.num_engines = 2;
  options.router.policy = static_cast<routing::RouterPolicy>(9);
  EXPECT_FALSE(FleetModel::Create(&loop, options).ok());
}

// Closed-loop sessions: each session sends its next turn 5 ms after the previous response.
// Returns (request, engine, finish time) in completion order.
std::vector<std::tuple<int64_t, int32_t, int64_t>> RunClosedLoop(const std::string& policy) {
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet = MakeFleet(&loop, policy, 3);
  EXPECT_NE(fleet, nullptr);
  if (fleet == nullptr) return {};
  constexpr int64_t kSessions = 12;
  constexpr int64_t kTurns = 5;
  std::vector<std::tuple<int64_t, int32_t, int64_t>> completions;
  std::map<int64_t, int> count;
  fleet->set_completion_callback([&](EngineId engine, const EngineRequestRecord& record) {
    completions.emplace_back(record.id.value(), engine.value(), record.finished->ns());
    ++count[record.id.value()];
    const int64_t session = record.id.value() / kTurns;
    const int64_t turn = record.id.value() % kTurns;
    if (turn + 1 == kTurns) return;
    loop.ScheduleAfter(TimeNs::Millis(5), [&fleet, id = record.id.value() + 1, session, turn] {
      StatusOr<EngineId> placed = fleet->Submit(SessionRequest(id, session, turn + 1),
                                                routing::SessionRoutingKey(SessionId(session)));
      EXPECT_TRUE(placed.ok()) << placed.status();
    });
  });
  for (int64_t session = 0; session < kSessions; ++session) {
    loop.Schedule(TimeNs::Millis(session), [&fleet, session] {
      StatusOr<EngineId> placed = fleet->Submit(SessionRequest(session * kTurns, session, 0),
                                                routing::SessionRoutingKey(SessionId(session)));
      EXPECT_TRUE(placed.ok()) << placed.status();
    });
  }
  loop.RunUntilIdle();
  EXPECT_EQ(fleet->num_submitted(), kSessions * kTurns);
  EXPECT_EQ(fleet->num_completed(), kSessions * kTurns);
  EXPECT_EQ(static_cast<int64_t>(count.size()), kSessions * kTurns);
  for (const auto& [id, n] : count) EXPECT_EQ(n, 1) << "request " << id;
  return completions;
}

TEST(FleetModelTest, ClosedLoopConservesAndIsDeterministic) {
  for (const char* policy : {"round_robin", "consistent_hashing", "cache_aware"}) {
    SCOPED_TRACE(policy);
    const auto a = RunClosedLoop(policy);
    const auto b = RunClosedLoop(policy);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.size(), 60u);
  }
}

}  // namespace
}  // namespace agentkv::sim
