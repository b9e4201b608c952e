// Tests of the RL rollout generator: GRPO groups share their prompt and diverge after it, each
// turn's ids extend the previous turn's, stops, step gates (sync and bounded staleness), option
// validation and determinism.
#include "agentkv/sim/workload/rollout_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agentkv/routing/router.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/replay/instant_sources.h"

namespace agentkv::sim {
namespace {

RolloutWorkloadOptions Small() {
  RolloutWorkloadOptions o;
  o.prompts = 3;
  o.group_size = 4;
  o.steps = 3;
  o.max_context_tokens = 40'000;
  return o;
}

RolloutWorkload Generate(const RolloutWorkloadOptions& options) {
  StatusOr<RolloutWorkload> r = GenerateRolloutWorkload(options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : RolloutWorkload{};
}

// Index of trajectory (step, prompt, sample).
size_t Index(const RolloutWorkloadOptions& o, int64_t step, int64_t prompt, int64_t sample) {
  return static_cast<size_t>((step * o.prompts + prompt) * o.group_size + sample);
}

size_t CommonPrefix(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(RolloutWorkloadTest, ShapeIdsAndStartsFollowTheOptions) {
  const RolloutWorkloadOptions o = Small();
  const RolloutWorkload r = Generate(o);
  const AgenticWorkload& w = r.workload;
  ASSERT_EQ(w.conversations.size(), 36u);
  ASSERT_EQ(w.starts.size(), 36u);
  ASSERT_EQ(w.groups.size(), 36u);
  ASSERT_EQ(w.start_after_group.size(), 36u);
  EXPECT_EQ(w.conversations[Index(o, 1, 2, 3)].id, "rollout-s1-p2-g3");
  EXPECT_EQ(r.system_prompt_blocks, 15'000 / 64);
  for (size_t i = 0; i < w.conversations.size(); ++i) {
    EXPECT_EQ(w.starts[i], TimeNs());
    EXPECT_EQ(w.groups[i], static_cast<int32_t>(i / 12));
    EXPECT_EQ(w.conversations[i].block_size, 64);
    EXPECT_TRUE(w.conversations[i].subagents.empty());
  }
}

TEST(RolloutWorkloadTest, GroupMembersShareTheirPromptAndDivergeAfterIt) {
  const RolloutWorkloadOptions o = Small();
  const RolloutWorkload r = Generate(o);
  const AgenticWorkload& w = r.workload;
  std::set<uint64_t> own_ids_seen;
  for (int64_t step = 0; step < o.steps; ++step) {
    for (int64_t p = 0; p < o.prompts; ++p) {
      const WekaRequest& first = w.conversations[Index(o, step, p, 0)].requests.front();
      const size_t prompt_blocks = static_cast<size_t>(first.input_tokens / 64);
      ASSERT_GT(prompt_blocks, static_cast<size_t>(r.system_prompt_blocks));
      for (int64_t g = 0; g < o.group_size; ++g) {
        const WekaConversation& c = w.conversations[Index(o, step, p, g)];
        // Same prompt: the same first request ids, all below shared_prefix_ids.
        EXPECT_EQ(c.requests.front().input_tokens, first.input_tokens);
        EXPECT_EQ(c.requests.front().hash_ids, first.hash_ids);
        for (size_t b = 0; b < prompt_blocks; ++b) {
          EXPECT_LT(c.requests.front().hash_ids[b], r.shared_prefix_ids);
        }
        // The system prompt is the same ids in every trajectory.
        for (int64_t b = 0; b < r.system_prompt_blocks; ++b) {
          EXPECT_EQ(c.requests.front().hash_ids[static_cast<size_t>(b)], static_cast<uint64_t>(b));
        }
        // After the prompt: this trajectory's own ids, seen in no other trajectory.
        std::set<uint64_t> own(
            c.requests.back().hash_ids.begin() + static_cast<std::ptrdiff_t>(prompt_blocks),
            c.requests.back().hash_ids.end());
        for (uint64_t id : own) {
          EXPECT_GE(id, r.shared_prefix_ids);
          EXPECT_TRUE(own_ids_seen.insert(id).second) << "id " << id << " in two trajectories";
        }
        if (g > 0 && c.requests.size() > 1) {
          const WekaConversation& other = w.conversations[Index(o, step, p, 0)];
          if (other.requests.size() > 1) {
            EXPECT_EQ(CommonPrefix(c.requests[1].hash_ids, other.requests[1].hash_ids),
                      prompt_blocks);
          }
        }
      }
      // Another task of the same step shares the system prompt only.
      if (p > 0) {
        const WekaRequest& previous = w.conversations[Index(o, step, p - 1, 0)].requests.front();
        EXPECT_EQ(CommonPrefix(first.hash_ids, previous.hash_ids),
                  static_cast<size_t>(r.system_prompt_blocks));
      }
    }
  }
}

TEST(RolloutWorkloadTest, EachTurnExtendsThePreviousPromptAndOutput) {
  const RolloutWorkloadOptions o = Small();
  const RolloutWorkload r = Generate(o);
  int64_t multi_turn = 0;
  for (const WekaConversation& c : r.workload.conversations) {
    ASSERT_FALSE(c.requests.empty());
    EXPECT_EQ(c.requests.front().t, TimeNs());
    for (size_t k = 0; k < c.requests.size(); ++k) {
      const WekaRequest& q = c.requests[k];
      EXPECT_EQ(q.hash_ids.size(), static_cast<size_t>(q.input_tokens / 64));
      EXPECT_LE(q.input_tokens + q.output_tokens, o.max_context_tokens);
      EXPECT_GE(q.output_tokens, 1);
      EXPECT_EQ(q.stop, k + 1 == c.requests.size() ? "end_turn" : "tool_use");
      if (k == 0) continue;
      const WekaRequest& p = c.requests[k - 1];
      // The previous prompt and output, plus an observation of at least one token.
      EXPECT_GT(q.input_tokens, p.input_tokens + p.output_tokens);
      EXPECT_LE(q.input_tokens - p.input_tokens - p.output_tokens, o.max_observation_tokens);
      ASSERT_GE(q.hash_ids.size(), p.hash_ids.size());
      EXPECT_TRUE(std::equal(p.hash_ids.begin(), p.hash_ids.end(), q.hash_ids.begin()));
      EXPECT_GT(q.think_time, TimeNs());
      EXPECT_LE(q.think_time, TimeNs::Seconds(o.max_tool_s));
      EXPECT_EQ(q.t, p.t + q.think_time);
    }
    if (c.requests.size() > 1) ++multi_turn;
  }
  EXPECT_GT(multi_turn, 30);
}

TEST(RolloutWorkloadTest, SynchronousStepsWaitForThePreviousStep) {
  RolloutWorkloadOptions o = Small();
  o.mode = RolloutMode::kSynchronous;
  const RolloutWorkload r = Generate(o);
  for (size_t i = 0; i < r.workload.conversations.size(); ++i) {
    EXPECT_EQ(r.workload.start_after_group[i], r.workload.groups[i] - 1);
  }
  EXPECT_TRUE(r.workload.gated());
}

TEST(RolloutWorkloadTest, AsynchronousStepsLagByTheStalenessBound) {
  RolloutWorkloadOptions o = Small();
  o.steps = 5;
  o.mode = RolloutMode::kAsynchronous;
  o.staleness = 2;
  const RolloutWorkload r = Generate(o);
  for (size_t i = 0; i < r.workload.conversations.size(); ++i) {
    EXPECT_EQ(r.workload.start_after_group[i], std::max(-1, r.workload.groups[i] - 3));
  }
}

TEST(RolloutWorkloadTest, SameSeedSameWorkloadAnotherSeedAnother) {
  RolloutWorkloadOptions o = Small();
  const RolloutWorkload a = Generate(o);
  const RolloutWorkload b = Generate(o);
  EXPECT_EQ(a.workload, b.workload);
  EXPECT_EQ(a.shared_prefix_ids, b.shared_prefix_ids);
  o.seed = 2;
  EXPECT_NE(Generate(o).workload, a.workload);
}

TEST(RolloutWorkloadTest, ValidationNamesTheFieldAndValue) {
  struct Case {
    void (*mutate)(RolloutWorkloadOptions&);
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](RolloutWorkloadOptions& o) { o.prompts = 0; },
       "RolloutWorkloadOptions.prompts: must be in [1, 1000], got 0"},
      {[](RolloutWorkloadOptions& o) { o.group_size = 1001; },
       "RolloutWorkloadOptions.group_size: must be in [1, 1000], got 1001"},
      {[](RolloutWorkloadOptions& o) { o.steps = -1; },
       "RolloutWorkloadOptions.steps: must be in [1, 1000], got -1"},
      {[](RolloutWorkloadOptions& o) {
         o.prompts = 16;
         o.group_size = 16;
         o.steps = 4;
       },
       "RolloutWorkloadOptions.prompts * group_size * steps: must be in [1, 1000], got 1024"},
      {[](RolloutWorkloadOptions& o) {
         o.mode = RolloutMode::kAsynchronous;
         o.staleness = 0;
       },
       "RolloutWorkloadOptions.staleness: must be in [1, 1000], got 0"},
      {[](RolloutWorkloadOptions& o) { o.tool_s.sigma = -1; },
       "RolloutWorkloadOptions.tool_s.sigma: must be in [0, 10], got -1"},
      {[](RolloutWorkloadOptions& o) { o.turns.median = 0; },
       "RolloutWorkloadOptions.turns.median: must be in (0, inf), got 0"},
      {[](RolloutWorkloadOptions& o) { o.max_tool_s = 0; },
       "RolloutWorkloadOptions.max_tool_s: must be in (0, 86400], got 0"},
      {[](RolloutWorkloadOptions& o) { o.max_context_tokens = 0; },
       "RolloutWorkloadOptions.max_context_tokens: must be in [1, 10000000], got 0"},
      {[](RolloutWorkloadOptions& o) { o.system_prompt_tokens = -5; },
       "RolloutWorkloadOptions.system_prompt_tokens: must be in [0, 1000000], got -5"},
  };
  for (const Case& c : cases) {
    RolloutWorkloadOptions o;
    c.mutate(o);
    const Status s = ValidateRolloutWorkloadOptions(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_FALSE(GenerateRolloutWorkload(o).ok());
  }
  // Synchronous mode ignores the staleness.
  RolloutWorkloadOptions sync;
  sync.staleness = 0;
  EXPECT_TRUE(ValidateRolloutWorkloadOptions(sync).ok());
  EXPECT_TRUE(ValidateRolloutWorkloadOptions(RolloutWorkloadOptions{}).ok());
}

TEST(RolloutWorkloadTest, DefaultsGiveLongContextsWithinTheWindow) {
  const RolloutWorkload r = Generate(RolloutWorkloadOptions{});
  std::vector<int64_t> final_context;
  for (const WekaConversation& c : r.workload.conversations) {
    final_context.push_back(c.requests.back().input_tokens);
  }
  std::sort(final_context.begin(), final_context.end());
  // Tens of thousands of tokens at the median, never past the window.
  EXPECT_GT(final_context[final_context.size() / 2], 20'000);
  EXPECT_LE(final_context.back(), 65'536);
}

// The generator's gates as the agent driver runs them: per step, the first submission and the
// last completion, on a small two-engine fleet.
struct StepSpan {
  TimeNs first_submitted = TimeNs(std::numeric_limits<int64_t>::max());
  TimeNs last_completed;
};

std::vector<StepSpan> DriveSteps(const RolloutWorkload& rollout) {
  EventLoop loop;
  FleetModelOptions fleet_options;
  fleet_options.num_engines = 2;
  fleet_options.router.policy = routing::RouterPolicy::kRoundRobin;
  fleet_options.engine.config.kv_pool.tokens_per_block = 64;
  fleet_options.engine.config.kv_pool.max_total_tokens = 64 * 1024;
  StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&loop, fleet_options);
  EXPECT_TRUE(fleet.ok()) << fleet.status();
  StatusOr<std::unique_ptr<GatewayModel>> gateway =
      GatewayModel::Create(&loop, fleet->get(), GatewayModelOptions{});
  EXPECT_TRUE(gateway.ok()) << gateway.status();
  StatusOr<AgentDriverResult> result =
      RunAgentWorkload(&loop, gateway->get(), rollout.workload,
                       AgentDriverOptions{.shared_prefix_ids = rollout.shared_prefix_ids});
  EXPECT_TRUE(result.ok()) << result.status();
  std::vector<StepSpan> spans;
  if (!result.ok()) return spans;
  EXPECT_EQ(result->requests_completed, result->requests_issued);
  for (const DriverRequest& q : result->requests) {
    const size_t k = static_cast<size_t>(q.conversation.value() - 1);
    const size_t step = static_cast<size_t>(rollout.workload.groups[k]);
    if (spans.size() <= step) spans.resize(step + 1);
    spans[step].first_submitted = std::min(spans[step].first_submitted, q.submitted);
    spans[step].last_completed = std::max(spans[step].last_completed, q.completed.value());
  }
  return spans;
}

RolloutWorkloadOptions Driven(RolloutMode mode) {
  RolloutWorkloadOptions o;
  o.prompts = 2;
  o.group_size = 2;
  o.steps = 4;
  o.mode = mode;
  o.staleness = 1;
  o.system_prompt_tokens = 640;
  o.task_prompt_tokens = LogNormal{300.0, 0.3};
  o.turns = LogNormal{3.0, 0.3};
  o.observation_tokens = LogNormal{200.0, 0.3};
  o.tool_s = LogNormal{2.0, 0.5};
  o.max_context_tokens = 4000;
  return o;
}

TEST(RolloutWorkloadTest, DrivenSynchronousStepsNeverOverlap) {
  const std::vector<StepSpan> spans = DriveSteps(Generate(Driven(RolloutMode::kSynchronous)));
  ASSERT_EQ(spans.size(), 4u);
  for (size_t s = 1; s < spans.size(); ++s) {
    // A step's first request follows the previous step's last completion, at once.
    EXPECT_EQ(spans[s].first_submitted, spans[s - 1].last_completed) << s;
  }
}

TEST(RolloutWorkloadTest, DrivenAsynchronousStepsKeepTheStalenessBound) {
  const std::vector<StepSpan> spans = DriveSteps(Generate(Driven(RolloutMode::kAsynchronous)));
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[1].first_submitted, TimeNs());
  for (size_t s = 2; s < spans.size(); ++s) {
    TimeNs ended;  // Every step <= s - 2 has ended.
    for (size_t e = 0; e + 2 <= s; ++e) ended = std::max(ended, spans[e].last_completed);
    EXPECT_EQ(spans[s].first_submitted, ended) << s;
  }
  // Staleness 1 lets two steps run at once.
  EXPECT_LT(spans[1].first_submitted, spans[0].last_completed);
}

// retain_sessions marks every trajectory retained (and draws nothing: the same trajectories);
// driven through a gateway that ends sessions idle for a second, none of them is closed during
// its tool calls, where unmarked ones are.
TEST(RolloutWorkloadTest, RetainedTrajectoriesKeepTheirSessionsThroughLongToolCalls) {
  RolloutWorkloadOptions o = Driven(RolloutMode::kAsynchronous);
  o.tool_s = LogNormal{5.0, 0.3};  // Every tool call outlasts the idle timeout below.
  const RolloutWorkload plain = Generate(o);
  EXPECT_TRUE(plain.workload.retained.empty());
  o.retain_sessions = true;
  const RolloutWorkload retained = Generate(o);
  EXPECT_EQ(retained.workload.conversations, plain.workload.conversations);
  EXPECT_EQ(retained.workload.retained,
            std::vector<bool>(retained.workload.conversations.size(), true));
  for (const RolloutWorkload* rollout : {&plain, &retained}) {
    EventLoop loop;
    FleetModelOptions fleet_options;
    fleet_options.engine.config.kv_pool.tokens_per_block = 64;
    fleet_options.engine.config.kv_pool.max_total_tokens = 64 * 4096;
    StatusOr<std::unique_ptr<FleetModel>> fleet = FleetModel::Create(&loop, fleet_options);
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    GatewayModelOptions gateway_options;
    gateway_options.agentic.agentic_session_lifecycle = true;
    gateway_options.session_idle_timeout = TimeNs::Seconds(1);
    StatusOr<std::unique_ptr<GatewayModel>> gateway =
        GatewayModel::Create(&loop, fleet->get(), gateway_options);
    ASSERT_TRUE(gateway.ok()) << gateway.status();
    StatusOr<AgentDriverResult> result =
        RunAgentWorkload(&loop, gateway->get(), rollout->workload,
                         AgentDriverOptions{.shared_prefix_ids = rollout->shared_prefix_ids});
    ASSERT_TRUE(result.ok()) << result.status();
    const int64_t trajectories = static_cast<int64_t>(rollout->workload.conversations.size());
    const int64_t tool_calls = result->requests_completed - trajectories;
    ASSERT_GT(tool_calls, 0);
    // One close per trajectory at its end, plus one per tool call the idle timeout cut.
    EXPECT_EQ((*gateway)->flow().counters().close,
              rollout == &retained ? trajectories : trajectories + tool_calls);
    EXPECT_TRUE((*gateway)->CheckDrained().ok()) << (*gateway)->CheckDrained();
  }
}

TEST(RolloutWorkloadTest, TheInstantReplayRefusesTheGatedSteps) {
  const StatusOr<InstantWorkload> timeline = MergedTimeline(Generate(Small()).workload);
  ASSERT_FALSE(timeline.ok());
  EXPECT_EQ(timeline.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(timeline.status().message().find("cannot run a gated workload"), std::string::npos);
}

}  // namespace
}  // namespace agentkv::sim
