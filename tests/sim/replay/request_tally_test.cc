// Tests of the per-request families of an arm's summary, folded one request at a time
// (RequestTally), on hand-made request records.
#include "agentkv/sim/replay/request_tally.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <utility>
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
  // Adds every request to a tally into `result`, request i in session sessions[i] (or i when
  // `sessions` is empty), and finishes it over `num_sessions` sessions (the request count when
  // 0) with `session_times`.
  void AddTo(ArmResult& result, size_t num_sessions = 0, std::vector<double> session_times = {},
             const std::vector<size_t>& sessions = {}) const {
    RequestTally tally(&result);
    const std::vector<RequestView> views = Views();
    for (size_t i = 0; i < views.size(); ++i)
      tally.Add(views[i], sessions.empty() ? i : sessions[i]);
    EXPECT_EQ(tally.requests(), static_cast<int64_t>(views.size()));
    tally.Finish(num_sessions == 0 ? views.size() : num_sessions, std::move(session_times));
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

TEST(RequestTallyTest, RequestCountsKeepRefusedWorkApartAndSplitRecomputeByPause) {
  Requests requests;
  requests.Served(160, 64, 32, kFirstRequest);
  requests.Served(160, 0, 48, After(PauseKind::kToolCall));
  requests.Served(160, 96, 16, After(PauseKind::kHumanTurn));
  requests.Refused(1000);
  ArmResult result;
  requests.AddTo(result);
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

TEST(RequestTallyTest, OpenLoopRequestsHaveNoPauseSplit) {
  Requests requests;
  requests.Served(160, 0, 32, kOpenLoop);
  ArmResult result;
  requests.AddTo(result);
  EXPECT_EQ(result.evicted_recompute_tokens, 32);
  EXPECT_EQ(result.evicted_recompute_first, 0);
}

TEST(RequestTallyTest, LatencyCountsAdmissionWaitOfEveryDispatchedRequestAndTtftOfServedOnes) {
  Requests requests;
  requests.Served(160, 0, 0, kOpenLoop, /*received_s=*/0);
  requests.Served(160, 0, 0, kOpenLoop, /*received_s=*/10);
  requests.Refused(1000);
  ArmResult result;
  requests.AddTo(result, /*num_sessions=*/2, {3.0, 1.0}, /*sessions=*/{0, 1, 1});
  EXPECT_EQ(result.admission_wait.count, 2);
  EXPECT_DOUBLE_EQ(result.admission_wait.mean_s, 1);
  EXPECT_EQ(result.queueing_delay.count, 2);
  EXPECT_DOUBLE_EQ(result.queueing_delay.mean_s, 2);
  EXPECT_EQ(result.ttft.count, 2);
  EXPECT_DOUBLE_EQ(result.ttft.mean_s, 3);
  EXPECT_EQ(result.session_times_s, (std::vector<double>{1.0, 3.0}));
  EXPECT_DOUBLE_EQ(result.session_time.max_s, 3);
}

TEST(RequestTallyTest, ServerTimeSumsEachSessionsRequests) {
  Requests requests;
  requests.Served(160, 0, 0, kOpenLoop, 0, /*server_s=*/2);
  requests.Served(160, 0, 0, kOpenLoop, 5, /*server_s=*/3);
  requests.Served(160, 0, 0, kOpenLoop, 9, /*server_s=*/7);
  ArmResult result;
  requests.AddTo(result, /*num_sessions=*/2, {}, /*sessions=*/{0, 0, 1});
  EXPECT_EQ(result.server_time.count, 2);
  EXPECT_DOUBLE_EQ(result.server_time.mean_s, 6);
  EXPECT_DOUBLE_EQ(result.server_time.max_s, 7);
  EXPECT_EQ(result.request_server_time.count, 3);
  EXPECT_DOUBLE_EQ(result.request_server_time.max_s, 7);
}

TEST(RequestTallyTest, TheOrderRequestsCompleteInDoesNotMatter) {
  // A replay adds requests as they complete, not as they were submitted: every family must
  // come out the same in any order (exact sums, percentiles over sorted samples).
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    Requests requests;
    std::vector<size_t> sessions;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      const int64_t prompt = 16 * static_cast<int64_t>(1 + rng() % 20);
      const int64_t cached = 16 * static_cast<int64_t>(rng() % static_cast<uint64_t>(prompt / 16));
      const int64_t evicted = (prompt - cached) / 2;
      const Before before = rng() % 3 == 0 ? kFirstRequest : After(PauseKind::kToolCall);
      if (rng() % 8 == 0) {
        requests.Refused(prompt);
      } else {
        requests.Served(prompt, cached, evicted, before,
                        /*received_s=*/static_cast<double>(rng() % 1000) / 10.0,
                        /*server_s=*/0.001 * static_cast<double>(1 + rng() % 9000));
      }
      sessions.push_back(rng() % 5);
    }
    const std::vector<RequestView> views = requests.Views();
    std::vector<size_t> order(views.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    ArmResult in_order;
    ArmResult shuffled;
    RequestTally a(&in_order);
    RequestTally b(&shuffled);
    for (size_t i : order) a.Add(views[i], sessions[i]);
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) b.Add(views[i], sessions[i]);
    a.Finish(5, {1.0, 2.0});
    b.Finish(5, {2.0, 1.0});
    EXPECT_EQ(in_order, shuffled) << "round " << round;
    EXPECT_EQ(in_order.server_time.count, 5);
  }
}

TEST(RequestTallyDeathTest, ARequestOfASessionBeyondTheCountIsABug) {
  Requests requests;
  requests.Served(160, 0, 0, kOpenLoop);
  ArmResult result;
  EXPECT_DEATH(requests.AddTo(result, /*num_sessions=*/1, {}, /*sessions=*/{3}),
               "a request of an unknown session");
}

TEST(RequestTallyDeathTest, ARefusedRequestWithCacheCountsIsABug) {
  Requests requests;
  requests.Served(160, 64, 0, kOpenLoop);
  ArmResult result;
  RequestTally tally(&result);
  RequestView view = requests.Views().front();
  GatewayRecord refused = *view.gateway;
  refused.refused = true;
  view.gateway = &refused;
  EXPECT_DEATH(tally.Add(view, 0), "has prefix cache counts");
}

}  // namespace
}  // namespace agentkv::sim
