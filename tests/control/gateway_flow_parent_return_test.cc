// Tests of GatewayFlow's parent returns (sub-agent demotion delivered): when DeliverParentReturn
// is emitted under each ParentReturnDelivery, for which session, in what order with the other
// actions of a begin, and the bound on the parents remembered.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "agentkv/control/gateway_flow.h"
#include "gateway_flow_test_support.h"

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_support::At;
using testing_support::Describe;
using testing_support::GatewayFlowTest;
using testing_support::Spec;

class ParentReturnTest : public GatewayFlowTest {
 protected:
  // Begins (and dispatches and finishes) a request of `session` naming `parent`; returns the
  // actions it emitted.
  std::vector<std::string> Request(const std::optional<std::string>& session,
                                   const std::optional<std::string>& parent = std::nullopt) {
    StatusOr<std::string> rid =
        flow().BeginAttempt(session, "r" + std::to_string(next_++), Spec{.parent = parent}, now_);
    EXPECT_TRUE(rid.ok()) << rid.status();
    flow().CheckInvariants();
    std::vector<std::string> actions = Actions();
    if (rid.ok()) {
      Dispatch(*rid);
      Finish(*rid);
    }
    return actions;
  }

  int next_ = 0;
};

// The served gateway's rule: the parent's first request after a sub-agent's request delivers
// its return, once; its later requests deliver nothing until a sub-agent names it again.
TEST_F(ParentReturnTest, OncePerReturnDeliversAtTheParentsFirstRequestAfterASubagents) {
  Make(/*lifecycle=*/true, 100'000, ParentReturnDelivery::kOncePerReturn);
  EXPECT_THAT(Request("parent"), IsEmpty()) << "nobody named it a parent yet";
  EXPECT_THAT(Request("child-1", "parent"), IsEmpty()) << "a sub-agent's request is no return";
  EXPECT_THAT(Request("child-2", "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent")) << "one return, two sub-agents";
  EXPECT_THAT(Request("parent"), IsEmpty()) << "not on every request of the parent";
  EXPECT_THAT(Request("child-1"), IsEmpty()) << "a child's own unhinted request";
  EXPECT_THAT(Request("parent"), IsEmpty());
  EXPECT_THAT(Request("child-1", "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent")) << "the next return";
  EXPECT_EQ(flow().remembered_parents(), 1);
}

// The simulator's rule: every request of a session once a sub-agent named it.
TEST_F(ParentReturnTest, EveryAttemptDeliversAtEachRequestOfANamedParent) {
  Make(/*lifecycle=*/true, 100'000, ParentReturnDelivery::kEveryAttempt);
  EXPECT_THAT(Request("parent"), IsEmpty());
  EXPECT_THAT(Request("child", "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent"));
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent"));
  EXPECT_THAT(Request("child"), IsEmpty()) << "the child is nobody's parent";
}

// Demotion off: hints are not even remembered.
TEST_F(ParentReturnTest, OffDeliversNothingAndRemembersNoParent) {
  Make(/*lifecycle=*/true);
  EXPECT_THAT(Request("child", "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), IsEmpty());
  EXPECT_EQ(flow().remembered_parents(), 0);
}

// A sessionless request may name a parent; a request naming its own session is its own return
// (as the engines' registry ignores it, delivering to an engine is harmless).
TEST_F(ParentReturnTest, ASessionlessHintCountsAndASelfHintDeliversAtOnce) {
  Make(/*lifecycle=*/true, 100'000, ParentReturnDelivery::kOncePerReturn);
  EXPECT_THAT(Request(std::nullopt, "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent"));
  EXPECT_THAT(Request("self", "self"), ElementsAre("deliver self"));
}

// A refused begin changes nothing: the hint it carried is not remembered, and a due return is
// still due.
TEST_F(ParentReturnTest, ARefusedBeginNeitherNamesNorDelivers) {
  Make(/*lifecycle=*/true, 100'000, ParentReturnDelivery::kOncePerReturn);
  EXPECT_THAT(Request("child", "parent"), IsEmpty());
  EXPECT_EQ(flow().BeginAttempt("other", "", Spec{.parent = "x"}, now_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(flow().BeginAttempt("parent", "", {}, now_).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_THAT(Actions(), IsEmpty());
  EXPECT_EQ(flow().remembered_parents(), 1);
  EXPECT_THAT(Request("parent"), ElementsAre("deliver parent"));
}

// Opening the parent's session at the cap ends the longest-idle one first: its close comes
// before the delivery, in the order the driver performs them.
TEST_F(ParentReturnTest, TheDeliveryFollowsTheActionsOfMakingRoom) {
  Make(/*lifecycle=*/true, /*max_sessions=*/1, ParentReturnDelivery::kOncePerReturn);
  EXPECT_THAT(Request("idle", "parent"), IsEmpty());
  EXPECT_THAT(Request("parent"), ElementsAre("close idle", "deliver parent"));
}

// At most max_sessions parents are remembered; the oldest is forgotten first.
TEST_F(ParentReturnTest, RemembersAtMostMaxSessionsParents) {
  Make(/*lifecycle=*/false, /*max_sessions=*/2, ParentReturnDelivery::kEveryAttempt);
  (void)Request(std::nullopt, "p1");
  (void)Request(std::nullopt, "p2");
  (void)Request(std::nullopt, "p3");
  EXPECT_EQ(flow().remembered_parents(), 2);
  EXPECT_THAT(Request("p1"), IsEmpty()) << "forgotten";
  EXPECT_THAT(Request("p3"), ElementsAre("deliver p3"));
}

// The simulator's typed keys name the parent the same way.
TEST(ParentReturnSessionIdTest, TheDeliveryNamesTheTypedParent) {
  GatewayFlowOptions options;
  options.parent_return = ParentReturnDelivery::kEveryAttempt;
  GatewayFlow<SessionId> flow(options);
  ASSERT_TRUE(flow.BeginAttempt(SessionId(2), "1", {.parent = SessionId(1)}, At(0)).ok());
  ASSERT_TRUE(flow.BeginAttempt(SessionId(1), "2", {}, At(1)).ok());
  std::vector<std::string> actions;
  for (const auto& action : flow.TakeActions()) actions.push_back(Describe<SessionId>(action));
  EXPECT_THAT(actions, ElementsAre("deliver 1"));
  flow.CheckInvariants();
}

TEST(ParentReturnDeliveryTest, Names) {
  EXPECT_EQ(ParentReturnDeliveryName(ParentReturnDelivery::kOff), "off");
  EXPECT_EQ(ParentReturnDeliveryName(ParentReturnDelivery::kOncePerReturn), "once-per-return");
  EXPECT_EQ(ParentReturnDeliveryName(ParentReturnDelivery::kEveryAttempt), "every-attempt");
}

}  // namespace
}  // namespace agentkv::control
