// Tests of the fleet arm's summary, one metric family at a time, on hand-made request records.
#include "agentkv/sim/replay/arm_summary.h"

#include <gtest/gtest.h>

#include <deque>
#include <optional>
#include <vector>

namespace agentkv::sim {
namespace {

// What a request knows of the pause before it: an agentic request its agent's previous
// request's next pause (none for the agent's first), an open-loop request nothing.
struct Before {
  bool agentic = false;
  std::optional<PauseKind> pause;
};
constexpr Before kOpenLoop{};
constexpr Before kFirstRequest{.agentic = true, .pause = std::nullopt};
constexpr Before After(PauseKind pause) { return {.agentic = true, .pause = pause}; }

// Gateway and engine records of requests, kept alive for the views.
class Requests {
 public:
  // A served request: received at `received_s`, dispatched 1 s later, first scheduled 2 s
  // later, first token 3 s later, finished `server_s` after arrival.
  void Served(int64_t prompt, int64_t cached, int64_t evicted, Before before, double received_s = 0,
              double server_s = 4) {
    Add(received_s, server_s, before);
    gateway_.back().prompt_tokens = prompt;
    gateway_.back().prompt_blocks = prompt / 16;
    engine_.back().report.cached_device_tokens = cached;
    engine_.back().report.uncached_tokens = prompt - cached;
    engine_.back().cold_tokens = prompt - cached - evicted;
    engine_.back().evicted_recompute_tokens = evicted;
    engine_.back().report.output_tokens = 2;
    engine_.back().first_scheduled = TimeNs::Seconds(received_s + 2);
    engine_.back().first_token = TimeNs::Seconds(received_s + 3);
  }
  // A request admission refused: its prompt is counted apart and it looked nothing up.
  void Refused(int64_t prompt) {
    Add(0, 0, kOpenLoop);
    gateway_.back().refused = true;
    gateway_.back().prompt_tokens = prompt;
    gateway_.back().dispatched.reset();
  }
  std::vector<RequestView> Views() const {
    std::vector<RequestView> views;
    for (size_t i = 0; i < gateway_.size(); ++i) {
      views.push_back({.gateway = &gateway_[i],
                       .engine = &engine_[i],
                       .agentic = before_[i].agentic,
                       .pause_before = before_[i].pause});
    }
    return views;
  }

 private:
  void Add(double received_s, double server_s, Before before) {
    GatewayRecord g;
    g.id = RequestId(static_cast<int64_t>(gateway_.size()));
    g.received = TimeNs::Seconds(received_s);
    g.dispatched = TimeNs::Seconds(received_s + 1);
    gateway_.push_back(g);
    EngineRequestRecord e;
    e.id = g.id;
    e.finished = TimeNs::Seconds(received_s + server_s);
    engine_.push_back(e);
    before_.push_back(before);
  }
  // Deques: adding a request leaves the earlier records where the views point.
  std::deque<GatewayRecord> gateway_;
  std::deque<EngineRequestRecord> engine_;
  std::vector<Before> before_;
};

TEST(ArmSummaryTest, RequestCountsKeepRefusedWorkApartAndSplitRecomputeByPause) {
  Requests requests;
  requests.Served(160, 64, 32, kFirstRequest);
  requests.Served(160, 0, 48, After(PauseKind::kToolCall));
  requests.Served(160, 96, 16, After(PauseKind::kHumanTurn));
  requests.Refused(1000);
  ArmResult result;
  SummarizeRequestCounts(requests.Views(), result);
  EXPECT_EQ(result.requests_refused, 1);
  EXPECT_EQ(result.refused_prompt_tokens, 1000);
  EXPECT_EQ(result.prompt_tokens, 480);
  EXPECT_EQ(result.cached_device_tokens, 160);
  EXPECT_EQ(result.uncached_tokens, 320);
  EXPECT_EQ(result.evicted_recompute_tokens, 96);
  EXPECT_EQ(result.cold_tokens, 320 - 96);
  EXPECT_EQ(result.evicted_recompute_first, 32);
  EXPECT_EQ(result.evicted_recompute_after_tool_call, 48);
  EXPECT_EQ(result.evicted_recompute_after_subagent_wait, 0);
  EXPECT_EQ(result.evicted_recompute_after_human_turn, 16);
  EXPECT_EQ(result.output_tokens, 6);
}

TEST(ArmSummaryTest, OpenLoopRequestsHaveNoPauseSplit) {
  Requests requests;
  requests.Served(160, 0, 32, kOpenLoop);
  ArmResult result;
  SummarizeRequestCounts(requests.Views(), result);
  EXPECT_EQ(result.evicted_recompute_tokens, 32);
  EXPECT_EQ(result.evicted_recompute_first, 0);
}

TEST(ArmSummaryTest, HitRatiosAreCachedOverPromptInTokensAndWholeBlocks) {
  ArmResult result;
  result.prompt_tokens = 400;
  result.prompt_blocks = 25;
  result.cached_device_tokens = 100;
  result.cached_host_tokens = 40;
  SummarizeHitRatios(16, result);
  EXPECT_EQ(result.cached_device_blocks, 6);
  EXPECT_EQ(result.cached_host_blocks, 2);
  EXPECT_DOUBLE_EQ(result.token_hit_ratio_device, 0.25);
  EXPECT_DOUBLE_EQ(result.token_hit_ratio_host, 0.1);
  EXPECT_DOUBLE_EQ(result.block_hit_ratio_device, 6.0 / 25);
  EXPECT_DOUBLE_EQ(result.block_hit_ratio_host, 2.0 / 25);
}

TEST(ArmSummaryTest, ThroughputIsOverTheMakespanAndZeroWithoutOne) {
  ArmResult result;
  result.requests_completed = 10;
  result.output_tokens = 500;
  SummarizeThroughput(TimeNs::Seconds(5), result);
  EXPECT_DOUBLE_EQ(result.makespan_s, 5);
  EXPECT_DOUBLE_EQ(result.requests_per_s, 2);
  EXPECT_DOUBLE_EQ(result.output_tokens_per_s, 100);
  ArmResult empty;
  SummarizeThroughput(TimeNs(0), empty);
  EXPECT_EQ(empty.requests_per_s, 0);
}

TEST(ArmSummaryTest, LatencyCountsAdmissionWaitOfEveryDispatchedRequestAndTtftOfServedOnes) {
  Requests requests;
  requests.Served(160, 0, 0, kOpenLoop, /*received_s=*/0);
  requests.Served(160, 0, 0, kOpenLoop, /*received_s=*/10);
  requests.Refused(1000);
  ArmResult result;
  SummarizeLatency(requests.Views(), {3.0, 1.0}, result);
  EXPECT_EQ(result.admission_wait.count, 2);
  EXPECT_DOUBLE_EQ(result.admission_wait.mean_s, 1);
  EXPECT_EQ(result.queueing_delay.count, 2);
  EXPECT_DOUBLE_EQ(result.queueing_delay.mean_s, 2);
  EXPECT_EQ(result.ttft.count, 2);
  EXPECT_DOUBLE_EQ(result.ttft.mean_s, 3);
  EXPECT_EQ(result.session_times_s, (std::vector<double>{1.0, 3.0}));
  EXPECT_DOUBLE_EQ(result.session_time.max_s, 3);
}

TEST(ArmSummaryTest, ServerTimeSumsEachSessionsRequests) {
  Requests requests;
  requests.Served(160, 0, 0, kOpenLoop, 0, /*server_s=*/2);
  requests.Served(160, 0, 0, kOpenLoop, 5, /*server_s=*/3);
  requests.Served(160, 0, 0, kOpenLoop, 9, /*server_s=*/7);
  ArmResult result;
  SummarizeServerTime(requests.Views(), {0, 0, 1}, 2, result);
  EXPECT_EQ(result.server_time.count, 2);
  EXPECT_DOUBLE_EQ(result.server_time.mean_s, 6);
  EXPECT_DOUBLE_EQ(result.server_time.max_s, 7);
  EXPECT_EQ(result.request_server_time.count, 3);
  EXPECT_DOUBLE_EQ(result.request_server_time.max_s, 7);
}

}  // namespace
}  // namespace agentkv::sim
