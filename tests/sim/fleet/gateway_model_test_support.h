// The fixture and helpers shared by GatewayModel's tests: a small fleet of fixed-step engines
// behind the gateway, requests by session, and what the completion callback saw.
#ifndef AGENTKV_TESTS_SIM_GATEWAY_MODEL_TEST_SUPPORT_H_
#define AGENTKV_TESTS_SIM_GATEWAY_MODEL_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "agentkv/kv/retention.h"
#include "agentkv/routing/router.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "tests/sim/sim_test_support.h"

namespace agentkv::sim::testing_support {

inline constexpr int32_t kTokensPerBlock = 16;
// Every engine step lasts exactly this long, so request times are step counts.
inline constexpr TimeNs kStep = TimeNs::Millis(1);

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

inline std::optional<double> Metric(const std::vector<std::pair<std::string, double>>& metrics,
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
                  fleet_->engine(*record.engine).engine().cache().GetPriority(keys->second[0]);
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
    return fleet_->engine(EngineId(engine)).engine().cache();
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

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_GATEWAY_MODEL_TEST_SUPPORT_H_
