// Tests of the session lifecycle vocabulary (session_lifecycle.h): attempt rids, names and the
// close outcome rule. The lifecycle itself runs in control::GatewayFlow
// (gateway_flow_test.cc).
#include "agentkv/control/session_lifecycle.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentkv::control {
namespace {

TEST(SessionLifecycleRidTest, FormatsRequestAndAttempt) {
  EXPECT_EQ(FormatAttemptRid("request-1", 0), "request-1:0");
  EXPECT_EQ(FormatAttemptRid("request-1", 2), "request-1:2");
  EXPECT_EQ(FormatAttemptRid("a:b", 10), "a:b:10");
}

TEST(SessionLifecycleNamesTest, NamesAreLowercase) {
  EXPECT_EQ(SessionPhaseName(SessionPhase::kDraining), "draining");
  EXPECT_EQ(SessionPhaseName(SessionPhase::kTerminal), "terminal");
  EXPECT_EQ(TerminalReasonName(TerminalReason::kDropped), "dropped");
  EXPECT_EQ(TerminalReasonName(TerminalReason::kDiscarded), "discarded");
}

TEST(SessionLifecycleOutcomeTest, CloseSucceedsOnlyIfEveryEngineSucceeded) {
  const std::vector<Status> all_ok = {Status::Ok(), Status::Ok()};
  const std::vector<Status> one_failed = {Status::Ok(), UnavailableError("engine-1")};
  const std::vector<Status> timed_out = {DeadlineExceededError("2 s close timeout")};
  EXPECT_TRUE(CloseSucceededOnEveryEngine(all_ok));
  EXPECT_FALSE(CloseSucceededOnEveryEngine(one_failed));
  EXPECT_FALSE(CloseSucceededOnEveryEngine(timed_out));
  // No engine discovered: nothing was released.
  EXPECT_FALSE(CloseSucceededOnEveryEngine({}));
}

}  // namespace
}  // namespace agentkv::control
