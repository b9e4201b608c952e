#include "agentkv/load/ramp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace agentkv::load {
namespace {

using testing::ElementsAre;

RampOptions Ramp() {
  return RampOptions{.start_users = 2,
                     .step_users = 3,
                     .period = TimeNs::Seconds(10),
                     .ttft_slo = TimeNs::Seconds(1)};
}

// A served request sent at `sent_s` whose first token came `ttft_s` later.
MeasuredRequest Served(double sent_s, double ttft_s) {
  MeasuredRequest r;
  r.gateway.received = TimeNs::Seconds(sent_s);
  r.engine.first_token = TimeNs::Seconds(sent_s + ttft_s);
  return r;
}

TEST(RampTest, OptionsOutOfRangeAreRefused) {
  EXPECT_TRUE(Ramp().Validate().ok());
  RampOptions o = Ramp();
  o.start_users = 0;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = Ramp();
  o.step_users = 1001;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = Ramp();
  o.period = TimeNs(0);
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = Ramp();
  o.ttft_slo = TimeNs(0);
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(RampTest, StartUsersBeginAtOnceThenStepUsersEveryPeriod) {
  EXPECT_THAT(RampStarts(7, Ramp()),
              ElementsAre(TimeNs(0), TimeNs(0), TimeNs::Seconds(10), TimeNs::Seconds(10),
                          TimeNs::Seconds(10), TimeNs::Seconds(20), TimeNs::Seconds(20)));
  EXPECT_TRUE(RampStarts(0, Ramp()).empty());
}

TEST(RampTest, TheFirstStepPastTheSloStopsTheRampAndTheStepBeforeIsHeld) {
  RampMonitor monitor(Ramp(), 100);
  std::vector<MeasuredRequest> measured = {Served(1, 0.2), Served(3, 0.5), Served(12, 0.9)};
  // Step 0 ([0, 10) s) has not ended at 9 s.
  EXPECT_FALSE(monitor.Advance(TimeNs::Seconds(9), measured));
  EXPECT_TRUE(monitor.result().steps.empty());
  EXPECT_FALSE(monitor.Advance(TimeNs::Seconds(20), measured));
  ASSERT_EQ(monitor.result().steps.size(), 2u);
  EXPECT_EQ(monitor.result().steps[0].users, 2);
  EXPECT_EQ(monitor.result().steps[0].requests, 2);
  EXPECT_DOUBLE_EQ(monitor.result().steps[0].ttft_p95_s, 0.5);
  EXPECT_EQ(monitor.result().steps[1].users, 5);
  EXPECT_EQ(monitor.result().users_held, 5);
  // Step 2: a request past the SLO; a failed one does not count.
  measured.push_back(Served(21, 1.5));
  MeasuredRequest failed = Served(22, 9);
  failed.failed = true;
  measured.push_back(failed);
  EXPECT_TRUE(monitor.Advance(TimeNs::Seconds(35), measured));
  EXPECT_TRUE(monitor.result().slo_exceeded);
  EXPECT_EQ(monitor.result().steps.back().users, 8);
  EXPECT_EQ(monitor.result().steps.back().requests, 1);
  EXPECT_EQ(monitor.result().users_held, 5);
  // Stopped: nothing more is judged.
  EXPECT_TRUE(monitor.Advance(TimeNs::Seconds(100), measured));
  monitor.Finish(TimeNs::Seconds(100), measured);
  EXPECT_EQ(monitor.result().steps.size(), 3u);
}

TEST(RampTest, AWorkloadThatRunsOutOfUsersEndsWithAllOfThemHeld) {
  RampMonitor monitor(Ramp(), 4);  // Steps reach 2, then 4 users (capped).
  const std::vector<MeasuredRequest> measured = {Served(1, 0.1), Served(15, 0.1)};
  monitor.Finish(TimeNs::Seconds(17), measured);
  ASSERT_EQ(monitor.result().steps.size(), 2u);
  EXPECT_EQ(monitor.result().steps[1].users, 4);
  EXPECT_FALSE(monitor.result().slo_exceeded);
  EXPECT_EQ(monitor.result().users_held, 4);
  // A first step already past the SLO holds nobody.
  RampMonitor slow(Ramp(), 4);
  EXPECT_TRUE(slow.Advance(TimeNs::Seconds(10), {Served(1, 3)}));
  EXPECT_EQ(slow.result().users_held, 0);
}

}  // namespace
}  // namespace agentkv::load
