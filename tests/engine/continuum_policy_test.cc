#include "agentkv/engine/continuum_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;

constexpr kv::PauseClass kMain{PauseKind::kToolCall};
constexpr kv::PauseClass kSubagent{PauseKind::kToolCall, true};

ContinuumPolicy MustCreate(const ContinuumPolicyOptions& options = {}) {
  StatusOr<ContinuumPolicy> policy = ContinuumPolicy::Create(options);
  AGENTKV_CHECK(policy.ok()) << policy.status();
  return *std::move(policy);
}

PinRequest Turn(kv::PauseClass pause_class, int64_t tokens, double pressure) {
  PinRequest request;
  request.pause_class = pause_class;
  request.tokens = tokens;
  request.kv_pressure = pressure;
  return request;
}

TEST(ContinuumPolicyTest, OptionsValidateNamesTheField) {
  EXPECT_TRUE(ContinuumPolicyOptions{}.Validate().ok());
  ContinuumPolicyOptions o;
  o.memory_price = -1;
  EXPECT_THAT(o.Validate().message(), HasSubstr("memory_price"));
  o = {};
  o.max_pressure = 1.0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("max_pressure"));
  o = {};
  o.prior_pause = TimeNs(0);
  EXPECT_THAT(o.Validate().message(), HasSubstr("prior_pause"));
  o = {};
  o.decay_at = 1;
  EXPECT_THAT(ContinuumPolicy::Create(o).status().message(), HasSubstr("decay_at"));
}

TEST(ContinuumPolicyTest, BucketsAreLogSpacedFrom250Ms) {
  const ContinuumPolicy policy = MustCreate();
  EXPECT_EQ(policy.BucketEdge(0), TimeNs::Millis(250));
  EXPECT_EQ(policy.BucketEdge(3), TimeNs::Seconds(2));
  EXPECT_EQ(policy.BucketOf(TimeNs(0)), 0);
  EXPECT_EQ(policy.BucketOf(TimeNs::Seconds(2)), 3);
  EXPECT_EQ(policy.BucketOf(TimeNs::Seconds(2.001)), 4);
  EXPECT_EQ(policy.BucketOf(TimeNs::Seconds(1e6)), policy.pauses().grid().finite_buckets());
}

TEST(ContinuumPolicyTest, ExponentialPriorDecidesBeforeSamples) {
  const ContinuumPolicy policy = MustCreate();
  EXPECT_EQ(policy.samples(kMain), 0);
  // The prior alone: exponential pauses of mean 2 s.
  EXPECT_NEAR(policy.ReturnProbability(kMain, TimeNs::Seconds(1)), 1 - std::exp(-0.5), 1e-12);
  EXPECT_NEAR(policy.ReturnProbability(kMain, TimeNs::Seconds(2)), 1 - std::exp(-1.0), 1e-12);
  const PinDecision d = policy.DecideWithPrefill(Turn(kMain, 1000, 0.5), TimeNs::Millis(100));
  ASSERT_TRUE(d.ttl.has_value());
  EXPECT_GE(*d.ttl, TimeNs::Seconds(4));
  EXPECT_GT(d.return_probability, 0.85);
  EXPECT_GT(d.benefit_s, d.cost_s);
  // Without a prior, a class with no samples has nothing to decide on.
  const ContinuumPolicy empty = MustCreate({.prior_weight = 0});
  EXPECT_FALSE(empty.DecideWithPrefill(Turn(kMain, 1000, 0.5), TimeNs::Millis(100)).ttl);
}

TEST(ContinuumPolicyTest, LearnsPerClassAndPinsOnlyShortPauses) {
  ContinuumPolicy policy = MustCreate();
  for (int i = 0; i < 100; ++i) {
    policy.ObservePause(kMain, TimeNs::Seconds(3));
    policy.ObservePause(kSubagent, TimeNs::Seconds(300));
  }
  EXPECT_EQ(policy.samples(kMain), 100);
  const PinRequest main = Turn(kMain, 20'000, 0.5);
  const PinDecision pinned = policy.DecideWithPrefill(main, TimeNs::Millis(500));
  ASSERT_TRUE(pinned.ttl.has_value());
  EXPECT_GE(*pinned.ttl, TimeNs::Seconds(4));
  EXPECT_LE(*pinned.ttl, TimeNs::Seconds(64));
  EXPECT_GT(pinned.return_probability, 0.99);
  // The same turn of a sub-agent: holding 20k tokens for minutes costs more than it saves.
  PinRequest sub = main;
  sub.pause_class = kSubagent;
  const PinDecision declined = policy.DecideWithPrefill(sub, TimeNs::Millis(500));
  EXPECT_FALSE(declined.ttl.has_value());
  EXPECT_TRUE(declined.declined_by_cost);
}

TEST(ContinuumPolicyTest, PriceRisesWithPressure) {
  ContinuumPolicy policy = MustCreate();
  for (int i = 0; i < 50; ++i) policy.ObservePause(kMain, TimeNs::Seconds(30));
  const TimeNs prefill = TimeNs::Millis(200);
  EXPECT_TRUE(policy.DecideWithPrefill(Turn(kMain, 10'000, 0.0), prefill).ttl.has_value());
  EXPECT_TRUE(policy.DecideWithPrefill(Turn(kMain, 10'000, 0.1), prefill).ttl.has_value());
  const PinDecision high = policy.DecideWithPrefill(Turn(kMain, 10'000, 0.95), prefill);
  EXPECT_FALSE(high.ttl.has_value());
  EXPECT_TRUE(high.declined_by_cost);
  // Queueing saved adds to the benefit and can tip the decision.
  PinRequest queued = Turn(kMain, 10'000, 0.95);
  queued.queueing_saved = TimeNs::Seconds(100);
  EXPECT_TRUE(policy.DecideWithPrefill(queued, prefill).ttl.has_value());
}

TEST(ContinuumPolicyTest, NoReturnLowersTheReturnProbability) {
  ContinuumPolicy policy = MustCreate({.prior_weight = 0});
  policy.ObservePause(kMain, TimeNs::Seconds(1));
  policy.ObserveNoReturn(kMain);
  EXPECT_DOUBLE_EQ(policy.ReturnProbability(kMain, TimeNs::Seconds(2048)), 0.5);
  // Nothing to pin, nothing learned: no pin and no cost decline.
  const PinDecision empty = policy.DecideWithPrefill(Turn(kSubagent, 100, 0.5), TimeNs(1000));
  EXPECT_FALSE(empty.ttl.has_value());
  EXPECT_FALSE(empty.declined_by_cost);
  EXPECT_FALSE(policy.DecideWithPrefill(Turn(kMain, 0, 0.5), TimeNs(1000)).ttl.has_value());
}

TEST(ContinuumPolicyTest, CountsDecayToBoundedMemory) {
  ContinuumPolicy policy = MustCreate({.decay_at = 8});
  for (int i = 0; i < 7; ++i) policy.ObservePause(kMain, TimeNs::Seconds(1));
  EXPECT_EQ(policy.samples(kMain), 7);
  policy.ObservePause(kMain, TimeNs::Seconds(1));
  EXPECT_EQ(policy.samples(kMain), 4);
}

TEST(ContinuumPolicyTest, PrefillSavedComesFromTheCostModel) {
  StatusOr<CostModel> cost = CostModel::CreateByName("llama-3.1-8b", "h100", 1);
  ASSERT_TRUE(cost.ok()) << cost.status();
  const ContinuumPolicy policy = MustCreate();
  StepShape shape;
  shape.prefill_tokens = 8000;
  shape.num_requests = 1;
  const PinRequest turn = Turn(kMain, 8000, 0.5);
  const PinDecision via_model = policy.Decide(turn, *cost);
  const PinDecision direct = policy.DecideWithPrefill(turn, cost->Estimate(shape));
  EXPECT_DOUBLE_EQ(via_model.benefit_s, direct.benefit_s);
  EXPECT_GT(via_model.benefit_s, 0.0);
}

}  // namespace
}  // namespace agentkv::engine
