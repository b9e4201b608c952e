// CoordinatorBreaker as a table: probe outcomes at given times, and the state after each.
#include "agentkv/service/admission/coordinator_breaker.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentkv::service {
namespace {

using Change = CoordinatorBreaker::Change;

struct Step {
  double at_s;
  bool answered;
  Change expect_change;
  bool expect_open;
};

void RunSteps(CoordinatorBreaker& breaker, const std::vector<Step>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    SCOPED_TRACE("step " + std::to_string(i) + " at " + std::to_string(s.at_s) + " s");
    EXPECT_EQ(breaker.OnProbe(s.answered, TimeNs::Seconds(s.at_s)), s.expect_change);
    EXPECT_EQ(breaker.open(), s.expect_open);
  }
}

TEST(CoordinatorBreakerTest, OpensAfterConsecutiveFailuresAndClosesOnTheFirstProbeAfterCooldown) {
  CoordinatorBreaker breaker(/*failures=*/2, /*cooldown=*/TimeNs::Seconds(5));
  RunSteps(breaker,
           {
               {0, false, Change::kNone, false},
               {1, true, Change::kNone, false},  // An answer resets the count.
               {2, false, Change::kNone, false},
               {3, false, Change::kOpened, true},
               {4, false, Change::kNone, true},
               {5, true, Change::kNone, true},  // Answered within the cool-down: stays open.
               {8, true, Change::kClosed, false},
               {9, true, Change::kNone, false},
           });
  EXPECT_EQ(breaker.opens(), 1);
  EXPECT_EQ(breaker.opened_at(), TimeNs::Seconds(3));
}

TEST(CoordinatorBreakerTest, AFailedProbeAfterTheCooldownKeepsItOpenForAnotherOne) {
  CoordinatorBreaker breaker(/*failures=*/1, /*cooldown=*/TimeNs::Seconds(5));
  RunSteps(breaker, {
                        {0, false, Change::kOpened, true},
                        {6, false, Change::kNone, true},  // Probe failed: open until 11.
                        {10, true, Change::kNone, true},
                        {11, true, Change::kClosed, false},
                        {12, false, Change::kOpened, true},
                    });
  EXPECT_EQ(breaker.opens(), 2);
  EXPECT_EQ(breaker.consecutive_failures(), 1);
}

}  // namespace
}  // namespace agentkv::service
