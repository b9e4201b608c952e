// Tests of the fleet arm runner (RunFleetArm) through the GatewayFeed seam: the order in which
// it calls a feed, that a feed's errors and a lost request fail the arm, and the sizing helpers
// the feeds share. The feed under test is the open-loop feed wrapped in a recorder that can
// also misbehave on purpose.
#include "agentkv/sim/replay/fleet_arm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agentkv/sim/replay/open_loop_feed.h"
#include "tests/sim/arm_names.h"

namespace agentkv::sim {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

// Forwards to an OpenLoopFeed, recording each call; optionally fails Validate, reports one
// more issued request than the inner feed (a lost request), or adds one request to the tally
// that never ran (a request summarized twice).
class RecordingFeed final : public GatewayFeed {
 public:
  explicit RecordingFeed(const std::vector<OpenLoopRequest>& requests) : inner_(requests, 16) {}

  Status Validate() const override {
    calls_.push_back("Validate");
    return fail_validate_ ? InvalidArgumentError("refused on purpose") : inner_.Validate();
  }
  int32_t tokens_per_block() const override {
    calls_.push_back("tokens_per_block");
    return inner_.tokens_per_block();
  }
  int64_t InfiniteCapacityBlocks(int64_t device_blocks) const override {
    calls_.push_back("InfiniteCapacityBlocks");
    return inner_.InfiniteCapacityBlocks(device_blocks);
  }
  std::unique_ptr<FleetNextUse> Future(const kv::BlockKeyHasher& hasher, int64_t device_blocks,
                                       TimeNs origin) override {
    calls_.push_back("Future");
    return inner_.Future(hasher, device_blocks, origin);
  }
  Status Attach(ArmFleet& arm_fleet, RequestTally& tally) override {
    calls_.push_back(arm_fleet.oracle != nullptr ? "Attach(oracle)" : "Attach");
    if (summarize_one_more_) {
      stray_engine_.finished = TimeNs::Seconds(1);
      tally.Add(RequestView{.gateway = &stray_gateway_,
                            .engine = &stray_engine_,
                            .agentic = false,
                            .pause_before = std::nullopt},
                0);
    }
    return inner_.Attach(arm_fleet, tally);
  }
  double CompletedFraction() const override { return inner_.CompletedFraction(); }
  StatusOr<FedCounts> Ended() const override {
    calls_.push_back("Ended");
    StatusOr<FedCounts> counts = inner_.Ended();
    if (counts.ok() && lose_one_) ++counts->issued;
    return counts;
  }
  FedSessions Sessions() const override {
    calls_.push_back("Sessions");
    return inner_.Sessions();
  }
  void SummarizeWorkload(const ArmFleet& /*arm_fleet*/, ArmResult& result) const override {
    calls_.push_back("SummarizeWorkload");
    // The common summary ran before: the arm's counts are there.
    EXPECT_EQ(result.sessions, 3);
  }

  std::vector<std::string>& calls() { return calls_; }
  void FailValidate() { fail_validate_ = true; }
  void LoseOneRequest() { lose_one_ = true; }
  void SummarizeOneMore() { summarize_one_more_ = true; }

 private:
  OpenLoopFeed inner_;
  mutable std::vector<std::string> calls_;
  bool fail_validate_ = false;
  bool lose_one_ = false;
  bool summarize_one_more_ = false;
  GatewayRecord stray_gateway_;
  EngineRequestRecord stray_engine_;
};

// Three 16-token-block requests, the second sharing the first's prefix.
std::vector<OpenLoopRequest> ThreeRequests() {
  std::vector<OpenLoopRequest> requests(3);
  requests[0] = {.arrival = TimeNs::Seconds(0), .hash_ids = {1, 2}, .prompt_tokens = 40};
  requests[1] = {.arrival = TimeNs::Seconds(1), .hash_ids = {1, 2, 3}, .prompt_tokens = 50};
  requests[2] = {.arrival = TimeNs::Seconds(2), .hash_ids = {9}, .prompt_tokens = 20};
  for (OpenLoopRequest& r : requests) r.output_tokens = 4;
  return requests;
}

ReplayOptions OneEngine() {
  ReplayOptions options;
  options.num_engines = 1;
  options.engine.kv_pool.max_total_tokens = 64 * 16;
  return options;
}

ArmSpec Arm(const std::string& name) { return testing_support::Arms({name}).front(); }

TEST(FleetArmTest, CallsTheFeedInTheRunnersOrder) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  StatusOr<ArmRun> run = RunFleetArm(feed, OneEngine(), Arm("baseline"), {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(feed.calls(), ElementsAre("Validate", "tokens_per_block", "Attach", "Ended",
                                        "Sessions", "SummarizeWorkload"));
}

TEST(FleetArmTest, SizesInfiniteCacheArmsAndRanksOracleArmsBeforeAttaching) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed infinite(requests);
  ASSERT_TRUE(RunFleetArm(infinite, OneEngine(), Arm("infinite-cache"), {}).ok());
  EXPECT_THAT(infinite.calls(),
              ElementsAre("Validate", "tokens_per_block", "InfiniteCapacityBlocks", "Attach",
                          "Ended", "Sessions", "SummarizeWorkload"));
  RecordingFeed oracle(requests);
  ASSERT_TRUE(RunFleetArm(oracle, OneEngine(), Arm("oracle"), {}).ok());
  EXPECT_THAT(oracle.calls(),
              ElementsAre("Validate", "tokens_per_block", "Future", "Attach(oracle)", "Ended",
                          "Sessions", "SummarizeWorkload"));
}

TEST(FleetArmTest, SummarizesWhatTheFeedSubmitted) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  std::vector<double> progress;
  StatusOr<ArmRun> run =
      RunFleetArm(feed, OneEngine(), Arm("baseline"), [&](double f) { progress.push_back(f); });
  ASSERT_TRUE(run.ok()) << run.status();
  const ArmResult& r = run->result;
  EXPECT_EQ(r.arm, "baseline");
  EXPECT_EQ(r.requests_issued, 3);
  EXPECT_EQ(r.requests_completed, 3);
  EXPECT_EQ(r.sessions, 3);
  EXPECT_EQ(r.conversations, 3);
  EXPECT_EQ(r.prompt_tokens, 40 + 50 + 20);
  // The second request finds the first's two blocks on the device.
  EXPECT_EQ(r.cached_device_tokens, 2 * 16);
  EXPECT_EQ(r.output_tokens, 3 * 4);
  EXPECT_EQ(r.server_time.count, 3);
  EXPECT_GT(r.makespan_s, 2.0);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), 1.0);
}

TEST(FleetArmTest, AFeedThatRefusesItsWorkloadFailsBeforeAnythingRuns) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  feed.FailValidate();
  StatusOr<ArmRun> run = RunFleetArm(feed, OneEngine(), Arm("baseline"), {});
  ASSERT_EQ(run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr("refused on purpose"));
  EXPECT_THAT(feed.calls(), ElementsAre("Validate"));
}

TEST(FleetArmTest, BadOptionsFailBeforeTheFeedIsAsked) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  ReplayOptions options = OneEngine();
  options.num_engines = 0;
  EXPECT_EQ(RunFleetArm(feed, options, Arm("baseline"), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(feed.calls().empty());
}

TEST(FleetArmTest, ALostRequestIsInternal) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  feed.LoseOneRequest();
  StatusOr<ArmRun> run = RunFleetArm(feed, OneEngine(), Arm("baseline"), {});
  ASSERT_EQ(run.status().code(), StatusCode::kInternal);
  EXPECT_THAT(run.status().message(), HasSubstr("4 requests issued but 3 completed"));
  // Nothing is summarized after a failed end check.
  EXPECT_THAT(feed.calls(), ElementsAre("Validate", "tokens_per_block", "Attach", "Ended"));
}

TEST(FleetArmTest, ARequestSummarizedThatNeverCompletedIsInternal) {
  const std::vector<OpenLoopRequest> requests = ThreeRequests();
  RecordingFeed feed(requests);
  feed.SummarizeOneMore();
  StatusOr<ArmRun> run = RunFleetArm(feed, OneEngine(), Arm("baseline"), {});
  ASSERT_EQ(run.status().code(), StatusCode::kInternal);
  EXPECT_THAT(run.status().message(), HasSubstr("3 requests completed but 4 were summarized"));
}

TEST(FleetArmSizingTest, FitsOneEngineCountsPromptAndOutputInWholeBlocks) {
  // 30 + 2 tokens = 2 blocks of 16; 31 + 2 = 3.
  EXPECT_TRUE(FitsOneEngine(30, 2, 2, 16));
  EXPECT_FALSE(FitsOneEngine(31, 2, 2, 16));
}

TEST(FleetArmSizingTest, SubmittedPromptIsTheLargerOfRecordedAndBlocksAndAtLeastOne) {
  EXPECT_EQ(SubmittedPromptTokens(100, 2, 16), 100);
  EXPECT_EQ(SubmittedPromptTokens(10, 2, 16), 32);
  EXPECT_EQ(SubmittedPromptTokens(0, 0, 16), 1);
}

TEST(FleetArmSizingTest, InfiniteCapacityCountsDistinctBlocksPerNamespaceAndEveryTail) {
  // {1, 2} and {1, 2, 3} share two blocks in namespace 1; {1} in namespace 2 is distinct.
  // Tails: 0 / 16 + 2, 20 / 16 + 2, 40 / 16 + 2 = 2 + 3 + 4.
  EXPECT_EQ(InfiniteCapacityBlocks({{1, 2}, {1, 2, 3}, {1}}, {1, 1, 2}, {0, 20, 40}, 16),
            3 + 1 + 2 + 3 + 4);
}

}  // namespace
}  // namespace agentkv::sim
