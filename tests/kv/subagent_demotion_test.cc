// Scenario tests of SubagentDemotion (subagent_demotion.h), driven through KvCacheManager:
// finished-sub-agent demotion (TensorRT-LLM PR #22182, seed
// 002): CommittedRetentionHandle planning and applying, demotion when the parent returns,
// option validation, and scenarios 25-34 of the peer engines' porting list (scenario 31's rank
// determinism is subagent_demotion_rank_test.cc; scenario 35, random interleavings, is
// kv_cache_manager_agentic_stress_test.cc).
#include "agentkv/kv/subagent_demotion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/kv/conversation_retention.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "block_cache_harness.h"
#include "kv_cache_manager_fixture.h"
#include "subagent_demotion_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::Matched;
using testing_internal::Opts;
using testing_internal::RequestOptionsBuilder;
using testing_internal::Tokens;
using testing_internal::WholePrompt;

using testing_internal::kChild;
using testing_internal::kDemoted;
using testing_internal::kParent;

// ---- CommittedRetentionHandle -------------------------------------------------------------

TEST_F(KvCacheSubagentTest, CommittedRetentionHandleDemotesOnlyOwnedBlocks) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  const CommittedRetentionHandle handle = Plan(kChild);
  EXPECT_EQ(handle.conversation(), ConversationId(kChild));
  EXPECT_THAT(handle.keys(), ElementsAre(c_[3], c_[2]));  // deepest first, never p0 p1

  EXPECT_EQ(ApplyRetention(handle, kDemoted), 2);
  EXPECT_EQ(PriorityOf(c_[2]), kDemoted);
  EXPECT_EQ(PriorityOf(c_[3]), kDemoted);
  EXPECT_EQ(PriorityOf(p_[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);

  // The parent computed p0 p1, but the child's path extends p1: its plan stops there.
  EXPECT_THAT(Plan(kParent).keys(), IsEmpty());
  EXPECT_TRUE(Plan(99).empty());  // unknown conversation
}

TEST_F(KvCacheSubagentTest, CommittedRetentionHandleCoversTurnsTheChildComputedEarlier) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  // The child's second turn reuses c2 c3, which it computed itself in its first turn.
  const std::vector<BlockKey> c2 = Chain(Concat(prefix_, Tokens(200, 12)));
  EXPECT_EQ(Turn(3, kChild, c2, 20, kParent), Matched(4, 0));
  EXPECT_THAT(Plan(kChild).keys(), ElementsAre(c2[4], c2[3], c2[2]));
}

TEST_F(KvCacheSubagentTest, CommittedRetentionHandleStopsAtAFork) {
  Build(AgenticOptions(32, 0));
  Turn(1, kParent, p_, 8);
  const std::vector<BlockKey> c = Chain(Concat(prefix_, Tokens(200, 12)));  // p0 p1 c2 c3 c4
  Turn(2, kChild, c, 20, kParent);
  const std::vector<BlockKey> g =
      Chain(Concat(Concat(prefix_, Tokens(200, 8)), Tokens(700, 4)));  // p0 p1 c2 c3 g4
  Turn(3, 3, g, 20, kChild);                                           // a grandchild
  EXPECT_THAT(Plan(kChild).keys(), ElementsAre(c[4]));
  EXPECT_THAT(Plan(3).keys(), ElementsAre(g[4]));

  // The fork rule is checked again when the handle is applied: e2 was extended after the plan.
  const std::vector<BlockKey> e = Chain(Concat(prefix_, Tokens(400, 8)));  // p0 p1 e2 e3
  Turn(4, 4, e, 16, kParent);
  const CommittedRetentionHandle handle = Plan(4);
  ASSERT_THAT(handle.keys(), ElementsAre(e[3], e[2]));
  RunRequest(5, Chain(Concat(Concat(prefix_, Tokens(400, 4)), Tokens(800, 4))), 16);
  EXPECT_EQ(ApplyRetention(handle, kDemoted), 1);
  EXPECT_EQ(PriorityOf(e[3]), kDemoted);
  EXPECT_EQ(PriorityOf(e[2]), kDefaultPriority);
}

TEST_F(KvCacheSubagentTest, CommittedRetentionHandleSteersEviction) {
  Build(AgenticOptions(7, 4));
  const std::vector<BlockKey> u = Chain(Tokens(900, 8));
  RunRequest(9, u, 8);  // the least recently used blocks
  ParentAndChild();
  ASSERT_EQ(ApplyRetention(Plan(kChild), kDemoted), 2);
  Events();

  // The demoted blocks go first, and below the offload threshold they are dropped although
  // a host tier has room; the next victim, u1 at the default priority, is offloaded.
  Fill(10, 12);  // one free block plus two evictions
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, c_[3], Tier::kDevice),
                                    Ev(KvEventKind::kDropped, c_[2], Tier::kDevice)));
  Reserve(10, 16);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, u[1], Tier::kDevice)));
  EXPECT_EQ(cache().Match(p_), Matched(2, 0));
  Finish(10);
}

// ---- Demotion when the parent returns -------------------------------------------------------

TEST_F(KvCacheSubagentTest, PerConversationPolicyDemotesFinishedSubagentWhenParentReturns) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  Advance(32);
  EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);  // nothing happens until the parent returns

  EXPECT_EQ(AdmitWith(3, q_, Opts().Prompt(12).Conversation(kParent)), Matched(2, 0));
  EXPECT_EQ(PriorityOf(c_[2]), kDemoted);
  EXPECT_EQ(PriorityOf(c_[3]), kDemoted);
  EXPECT_EQ(PriorityOf(p_[0]), kDefaultPriority);  // the prefix the child reused
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.demoted_children, 1);
  EXPECT_EQ(s.demoted_blocks, 2);
  EXPECT_EQ(s.restored_children, 0);
  Reserve(3, 12);
  Commit(3, std::vector<BlockKey>{q_[2]});
  Finish(3);
  EXPECT_EQ(PriorityOf(q_[2]), kDefaultPriority);
}

// Scenario 25.
TEST_F(KvCacheSubagentTest, ChildIsDemotedOnlyOnceIdleForTheBoundOfThirtyTwoSteps) {
  Build(AgenticOptions(16, 0));
  ASSERT_EQ(cache().options().finished_subagent_min_idle_iterations, 32);
  ParentAndChild();  // the child's context ends at step 0
  Advance(31);
  ParentReturns(3);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
  EXPECT_EQ(cache().stats().demoted_children, 0);
  Advance(1);
  ParentReturns(4);
  EXPECT_EQ(PriorityOf(c_[3]), kDemoted);
  EXPECT_EQ(cache().stats().demoted_children, 1);
}

TEST_F(KvCacheSubagentTest, IdleBoundIsTheConfiguredNumberOfSteps) {
  KvCacheOptions o = AgenticOptions(16, 0);
  o.finished_subagent_min_idle_iterations = 3;
  Build(o);
  ParentAndChild();
  Advance(2);
  ParentReturns(3);
  EXPECT_EQ(cache().stats().demoted_children, 0);
  Advance(1);
  ParentReturns(4);
  EXPECT_EQ(cache().stats().demoted_children, 1);
}

// Scenario 26.
TEST_F(KvCacheSubagentTest, ChildWithARequestInFlightIsNeverDemoted) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  const std::vector<BlockKey> c2 = Chain(Concat(prefix_, Tokens(200, 12)));
  EXPECT_EQ(AdmitWith(3, c2, Opts().Prompt(20).Conversation(kChild)), Matched(4, 0));
  Advance(100);
  ParentReturns(4);
  EXPECT_EQ(cache().stats().demoted_children, 0);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);

  // Its context ends now, at step 100: the idle bound counts from here.
  Reserve(3, 20);
  Commit(3, std::vector<BlockKey>{c2[4]});
  Finish(3);
  ParentReturns(5);
  EXPECT_EQ(cache().stats().demoted_children, 0);
  Advance(32);
  ParentReturns(6);
  EXPECT_EQ(cache().stats().demoted_children, 1);
  EXPECT_EQ(PriorityOf(c2[4]), kDemoted);
}

// Scenarios 27 and 28.
TEST_F(KvCacheSubagentTest, BlocksASiblingOrGrandchildExtendsAreNotDemoted) {
  Build(AgenticOptions(32, 0));
  Turn(1, kParent, p_, 8);
  const std::vector<BlockKey> c = Chain(Concat(prefix_, Tokens(200, 12)));  // p0 p1 c2 c3 c4
  const std::vector<BlockKey> g =
      Chain(Concat(Concat(prefix_, Tokens(200, 8)), Tokens(700, 4)));  // p0 p1 c2 c3 g4
  const std::vector<BlockKey> s =
      Chain(Concat(Concat(prefix_, Tokens(200, 4)), Tokens(800, 4)));  // p0 p1 c2 s3
  Turn(2, kChild, c, 20, kParent);
  Turn(3, 3, g, 20, kChild);   // a grandchild: the child's child
  Turn(4, 4, s, 16, kParent);  // a sibling
  Advance(32);
  ParentReturns(5);

  EXPECT_EQ(PriorityOf(c[4]), kDemoted);
  EXPECT_EQ(PriorityOf(s[3]), kDemoted);
  EXPECT_EQ(PriorityOf(c[3]), kDefaultPriority);  // extended by the grandchild
  EXPECT_EQ(PriorityOf(c[2]), kDefaultPriority);  // extended by the sibling
  EXPECT_EQ(PriorityOf(g[4]), kDefaultPriority);  // not the returning parent's child
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
  EXPECT_EQ(cache().stats().demoted_children, 2);
  EXPECT_EQ(cache().stats().demoted_blocks, 2);
}

// Scenario 29.
TEST_F(KvCacheSubagentTest, DemotedBlocksAreDroppedBelowTheOffloadThresholdAndOffloadedAtIt) {
  for (const Priority demote : {29, 30}) {
    SCOPED_TRACE("finished_subagent_priority " + std::to_string(demote));
    Build(AgenticOptions(5, 8, demote));
    ParentAndChild();
    Advance(32);
    ParentReturns(3);  // the device now holds p0 p1 c2 c3 q2 and nothing else
    ASSERT_EQ(cache().stats().device.free, 0);
    Events();
    Fill(9, 8);  // two evictions: the demoted blocks, deepest first
    const KvEventKind kind = demote < 30 ? KvEventKind::kDropped : KvEventKind::kOffloaded;
    EXPECT_THAT(Events(), ElementsAre(Ev(kind, c_[3], Tier::kDevice, 32),
                                      Ev(kind, c_[2], Tier::kDevice, 32)));
    const std::optional<Tier> where = demote < 30 ? std::nullopt : std::optional(Tier::kHost);
    EXPECT_EQ(cache().FindTier(c_[2]), where);
    EXPECT_EQ(cache().FindTier(c_[3]), where);
    EXPECT_EQ(cache().stats().drops, demote < 30 ? 2 : 0);
    // A default-priority victim is offloaded either way: the host tier works.
    Reserve(9, 12);
    EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, q_[2], Tier::kDevice, 32)));
    Finish(9);
  }
}

// finished_subagent_offloadable: with a host tier a demoted block gets the offload threshold,
// so it is still the first victim (30 < the default 35) but is offloaded, not dropped.
TEST_F(KvCacheSubagentTest, OffloadableDemotionKeepsDemotedBlocksOnTheHost) {
  KvCacheOptions o = AgenticOptions(5, 8, kDemoted);
  o.finished_subagent_offloadable = true;
  Build(o);
  ParentAndChild();
  Advance(32);
  ParentReturns(3);
  EXPECT_EQ(PriorityOf(c_[2]), 30);
  EXPECT_EQ(PriorityOf(c_[3]), 30);
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
  ASSERT_EQ(cache().stats().device.free, 0);
  Events();
  Fill(9, 8);  // the demoted blocks are still the first victims, deepest first
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, c_[3], Tier::kDevice, 32),
                                    Ev(KvEventKind::kOffloaded, c_[2], Tier::kDevice, 32)));
  EXPECT_EQ(cache().FindTier(c_[3]), Tier::kHost);
  EXPECT_EQ(cache().stats().drops, 0);
  Finish(9);
  // The child comes back: its blocks are onboarded, not recomputed, and restored.
  EXPECT_EQ(Turn(10, kChild, c_, 16), Matched(2, 2));
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
  EXPECT_EQ(cache().stats().restored_children, 1);
}

TEST_F(KvCacheSubagentTest, OffloadableDemotionChangesNothingWithoutAHostTierOrAboveTheThreshold) {
  struct Case {
    int64_t host_blocks;
    Priority demote;
    Priority offload_threshold;
    Priority expected;
  };
  for (const Case c : {Case{0, kDemoted, 30, kDemoted}, Case{8, 31, 30, 31},
                       Case{8, kDemoted, 101, kDemoted}, Case{8, kDemoted, 0, kDemoted}}) {
    SCOPED_TRACE("host " + std::to_string(c.host_blocks) + " demote " + std::to_string(c.demote) +
                 " threshold " + std::to_string(c.offload_threshold));
    KvCacheOptions o = AgenticOptions(16, c.host_blocks, c.demote);
    o.finished_subagent_offloadable = true;
    o.offload_threshold = c.offload_threshold;
    Build(o);
    ParentAndChild();
    Advance(32);
    ParentReturns(3);
    EXPECT_EQ(PriorityOf(c_[3]), c.expected);
  }
}

// finished_subagent_min_idle_s: the idle bound on the caller's clock. When set it replaces the
// step bound: a child idle for the seconds but not the steps is demoted, and one idle for the
// steps but not the seconds is not.
TEST_F(KvCacheSubagentTest, IdleBoundInSecondsReplacesTheStepBound) {
  KvCacheOptions o = AgenticOptions(16, 0);
  o.finished_subagent_min_idle_s = 2.0;
  Build(o);
  cache().SetClock(TimeNs::Seconds(10));
  ParentAndChild();  // the child's context ends at 10 s, step 0
  Advance(100);      // far past the 32 steps
  cache().SetClock(TimeNs::Seconds(11.5));
  ParentReturns(3);
  EXPECT_EQ(cache().stats().demoted_children, 0);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
  cache().SetClock(TimeNs::Seconds(12));  // exactly the bound: idle long enough
  ParentReturns(4);
  EXPECT_EQ(cache().stats().demoted_children, 1);
  EXPECT_EQ(PriorityOf(c_[3]), kDemoted);
}

TEST_F(KvCacheSubagentTest, IdleBoundInSecondsNeedsNoSteps) {
  KvCacheOptions o = AgenticOptions(16, 0);
  o.finished_subagent_min_idle_s = 0.5;
  Build(o);
  ParentAndChild();
  cache().SetClock(TimeNs::Seconds(1));  // no step at all: an idle engine
  ParentReturns(3);
  EXPECT_EQ(cache().stats().demoted_children, 1);
}

TEST_F(KvCacheSubagentTest, TheClockNeverGoesBack) {
  Build(AgenticOptions(16, 0));
  cache().SetClock(TimeNs::Seconds(2));
  cache().SetClock(TimeNs::Seconds(2));
  EXPECT_EQ(cache().clock(), TimeNs::Seconds(2));
  EXPECT_DEATH(cache().SetClock(TimeNs::Seconds(1)), "clock went back");
}

// DemoteFinishedSubagents: the parent's return delivered to an engine its request does not
// reach demotes the children registered here, as the parent's own request would.
TEST_F(KvCacheSubagentTest, ADeliveredParentReturnDemotesChildrenWithoutAParentRequest) {
  Build(AgenticOptions(16, 0));
  // Only the child ran here (the parent's requests go to another engine).
  EXPECT_EQ(Turn(1, kChild, c_, 16, kParent), Matched(0, 0));
  EXPECT_EQ(cache().DemoteFinishedSubagents(ConversationId(kParent)), 0);  // not idle yet
  Advance(32);
  EXPECT_EQ(cache().DemoteFinishedSubagents(ConversationId(99)), 0);  // no child of 99 here
  EXPECT_EQ(cache().DemoteFinishedSubagents(ConversationId(kParent)), 1);
  // The child computed every block of its chain here, the prefix included.
  for (const BlockKey key : c_) EXPECT_EQ(PriorityOf(key), kDemoted);
  EXPECT_EQ(cache().DemoteFinishedSubagents(ConversationId(kParent)), 0);  // once
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.demoted_children, 1);
  EXPECT_EQ(s.demoted_blocks, 4);
  EXPECT_EQ(cache().active_requests(), 0);
  CheckInvariants();
  // The child comes back on this engine: restored as usual.
  Turn(2, kChild, c_, 16, kParent);
  EXPECT_EQ(cache().stats().restored_children, 1);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
}

TEST_F(KvCacheSubagentTest, ADeliveredParentReturnIsANoOpWhenDemotionIsOff) {
  KvCacheOptions o = AgenticOptions(16, 0, std::nullopt);
  Build(o);
  Turn(1, kChild, c_, 16, kParent);
  Advance(32);
  EXPECT_EQ(cache().DemoteFinishedSubagents(ConversationId(kParent)), 0);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
}

TEST_F(KvCacheSubagentTest, HeldDemotedBlocksAreNeverDropped) {
  Build(AgenticOptions(6, 8, 0));
  ParentAndChild();
  Advance(32);
  ParentReturns(3);
  ASSERT_EQ(PriorityOf(c_[3]), 0);
  EXPECT_EQ(Admit(4, c_, 16), Matched(4, 0));  // no conversation: holds the child's chain
  Fill(9, 8);                                  // one free block, then q2 is the only victim
  EXPECT_EQ(TryReserve(9, 12).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache().Match(c_), Matched(4, 0));
  EXPECT_EQ(cache().stats().drops, 0);
  Events();
  Finish(4);
  Reserve(9, 12);  // once unheld, the demoted blocks are the first victims
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, c_[3], Tier::kDevice, 32)));
  Finish(9);
}

// Scenario 30.
TEST_F(KvCacheSubagentTest, ReturningChildGetsTheDefaultPriorityBackUntilIdleAgain) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  Advance(32);
  ParentReturns(3);
  ASSERT_EQ(PriorityOf(c_[2]), kDemoted);

  const std::vector<BlockKey> c2 = Chain(Concat(prefix_, Tokens(200, 12)));
  EXPECT_EQ(AdmitWith(4, c2, Opts().Prompt(20).Conversation(kChild)), Matched(4, 0));
  EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
  EXPECT_EQ(cache().stats().restored_children, 1);
  Reserve(4, 20);
  Commit(4, std::vector<BlockKey>{c2[4]});
  Finish(4);

  ParentReturns(5);  // the child has just finished: not idle
  Advance(31);
  ParentReturns(6);
  EXPECT_EQ(cache().stats().demoted_children, 1);
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ(PriorityOf(c2[i]), kDefaultPriority) << i;
  Advance(1);
  ParentReturns(7);
  EXPECT_EQ(cache().stats().demoted_children, 2);
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ(PriorityOf(c2[i]), kDemoted) << i;
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
}

TEST_F(KvCacheSubagentTest, RestoreReachesABlockAnotherPathExtendedAfterTheDemotion) {
  Build(AgenticOptions(16, 0));
  ParentAndChild();
  Advance(32);
  ParentReturns(3);
  ASSERT_EQ(PriorityOf(c_[2]), kDemoted);
  // Another request reuses the demoted c2 and extends it: c2 is now a fork.
  RunRequest(4, Chain(Concat(Concat(prefix_, Tokens(200, 4)), Tokens(900, 4))), 16);
  ASSERT_EQ(PriorityOf(c_[2]), kDemoted);

  Turn(5, kChild, c_, 16);  // the child comes back
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);
}

// Scenario 31.
TEST_F(KvCacheSubagentTest, ChildrenAreDemotedInArrivalOrder) {
  Build(AgenticOptions(9, 0));
  Turn(1, kParent, p_, 8);
  // Children arrive as 30, 10, 20 (neither id order nor the order they finish in).
  const std::map<int64_t, std::vector<BlockKey>> child_keys = {
      {30, Chain(Tokens(3000, 8))}, {10, Chain(Tokens(1000, 8))}, {20, Chain(Tokens(2000, 8))}};
  for (const int64_t child : {30, 10, 20}) {
    AdmitWith(child, child_keys.at(child), Opts().Prompt(8).Conversation(child).Parent(kParent));
  }
  for (const int64_t child : {20, 10, 30}) {
    Reserve(child, 8);
    Commit(child, child_keys.at(child));
    Finish(child);
  }
  Advance(32);
  ParentReturns(2);
  EXPECT_EQ(cache().stats().demoted_children, 3);
  EXPECT_EQ(cache().stats().demoted_blocks, 6);
  ASSERT_EQ(cache().stats().device.free, 0);

  Events();
  Fill(9, 4);
  for (int64_t tokens = 8; tokens <= 24; tokens += 4) Reserve(9, tokens);
  const std::vector<BlockKey>& x = child_keys.at(30);
  const std::vector<BlockKey>& y = child_keys.at(10);
  const std::vector<BlockKey>& z = child_keys.at(20);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped),
              ElementsAre(x[1], x[0], y[1], y[0], z[1], z[0]));
  EXPECT_EQ(cache().Match(q_), Matched(3, 0));
  Finish(9);
}

// Scenario 32.
TEST_F(KvCacheSubagentTest, HandleAppliedAfterItsBlocksWereEvictedIsSafe) {
  Build(AgenticOptions(6, 0));
  ParentAndChild();  // p0 p1 c2 c3: two blocks free
  {
    const CommittedRetentionHandle handle = Plan(kChild);
    ASSERT_THAT(handle.keys(), ElementsAre(c_[3], c_[2]));
    SetPriority(c_[3], 0);
    Fill(9, 12);  // evicts c3
    ASSERT_EQ(cache().FindTier(c_[3]), std::nullopt);
    EXPECT_EQ(ApplyRetention(handle, kDemoted), 1);  // c2 only: a leaf now
    EXPECT_EQ(PriorityOf(c_[2]), kDemoted);
    Reserve(9, 16);  // evicts c2
    ASSERT_EQ(cache().FindTier(c_[2]), std::nullopt);
    EXPECT_EQ(ApplyRetention(handle, kDemoted), 0);
    EXPECT_EQ(ApplyRetention(handle, kDefaultPriority), 0);
    Finish(9);
  }  // destroyed after its blocks are gone
  EXPECT_EQ(cache().Match(p_), Matched(2, 0));
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
}

TEST_F(KvCacheSubagentTest, DemotedChildWhoseBlocksWereEvictedReturnsSafely) {
  Build(AgenticOptions(5, 0));
  ParentAndChild();
  Advance(32);
  ParentReturns(3);
  Fill(9, 8);  // the two demoted blocks go
  ASSERT_EQ(cache().Match(c_), Matched(2, 0));
  Finish(9);

  EXPECT_EQ(Turn(4, kChild, c_, 16), Matched(2, 0));  // recomputes c2 c3
  EXPECT_EQ(cache().stats().restored_children, 1);
  EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
}

// Scenario 33.
TEST_F(KvCacheSubagentTest, DemotionIsANoOpUnlessConfigured) {
  struct Case {
    const char* name;
    KvCacheOptions options;
    size_t planned;  // per_conversation keeps records, so the child's plan is not empty
  };
  KvCacheOptions per_conversation_only = AgenticOptions(16, 0, std::nullopt);
  const Case cases[] = {{"policy default", Options(16, 0), 0},
                        {"per_conversation, no priority", per_conversation_only, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Build(c.options);
    ParentAndChild();
    Advance(32);
    ParentReturns(3);
    EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);
    EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);
    EXPECT_EQ(cache().stats().demoted_children, 0);
    EXPECT_EQ(cache().stats().demoted_blocks, 0);
    EXPECT_EQ(Plan(kChild).keys().size(), c.planned);
  }
}

// Scenario 34.
TEST_F(KvCacheSubagentTest, ParentWithoutChildrenAndChildWhoseParentNeverReturns) {
  Build(AgenticOptions(16, 0));
  Turn(1, kParent, p_, 8);
  Advance(40);
  ParentReturns(2);  // no children: nothing to do
  EXPECT_EQ(PriorityOf(p_[1]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(q_[2]), kDefaultPriority);

  // Conversation 7 never sends a request: its child stays at the default priority however
  // long it idles and whoever else comes and goes, the child itself included.
  const std::vector<BlockKey> orphan = Chain(Tokens(500, 8));
  Turn(3, 8, orphan, 8, /*parent=*/7);
  Advance(100);
  ParentReturns(4);
  Turn(5, 8, orphan, 8);
  Advance(100);
  ParentReturns(6);
  EXPECT_EQ(PriorityOf(orphan[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(orphan[1]), kDefaultPriority);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.demoted_children, 0);
  EXPECT_EQ(s.restored_children, 0);
}

TEST_F(KvCacheSubagentTest, UnauthenticatedParentHintIsIgnoredAndCounted) {
  Build(AgenticOptions(16, 0));
  Turn(1, kParent, p_, 8);
  Turn(2, kChild, c_, 16, kParent, /*authenticated=*/false);
  EXPECT_EQ(cache().stats().unauthenticated_parent_hints, 1);
  const std::vector<BlockKey> d = Chain(Concat(prefix_, Tokens(400, 4)));
  Turn(3, 3, d, 12, kParent, /*authenticated=*/true);
  Advance(32);
  ParentReturns(4);
  EXPECT_EQ(PriorityOf(c_[3]), kDefaultPriority);  // never registered
  EXPECT_EQ(PriorityOf(c_[2]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(d[2]), kDemoted);  // the authenticated sibling was
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.demoted_children, 1);
  EXPECT_EQ(s.unauthenticated_parent_hints, 1);
}

// ---- Options ------------------------------------------------------------------------------

TEST_F(KvCacheSubagentTest, FinishedSubagentPriorityRequiresPerConversation) {
  KvCacheOptions o = Options(16, 0);
  o.finished_subagent_priority = kDemoted;
  const StatusOr<KvCacheManager> refused = KvCacheManager::Create(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("finished_subagent_priority"));
  EXPECT_THAT(refused.status().message(), HasSubstr("policy"));
  EXPECT_THAT(refused.status().message(), HasSubstr("per_conversation"));

  o.block_reuse_policy = BlockReusePolicy::kPerConversation;
  EXPECT_TRUE(KvCacheManager::Create(o).ok());
  o.finished_subagent_priority.reset();
  o.block_reuse_policy = BlockReusePolicy::kDefault;
  EXPECT_TRUE(KvCacheManager::Create(o).ok());
}

// ---- SubagentDemotion directly over ConversationRetention and a BlockCache ---------------

using testing_internal::BlockCacheHarness;

class SubagentDemotionUnitTest : public ::testing::Test {
 protected:
  static KvCacheOptions DemotionOptions() {
    KvCacheOptions o = BlockCacheHarness::Options(16);
    o.block_reuse_policy = BlockReusePolicy::kPerConversation;
    o.max_num_turns = 2;  // The child's first turn stays recorded after it returns.
    o.finished_subagent_priority = 5;
    o.finished_subagent_min_idle_iterations = 2;
    return o;
  }

  // Runs one turn of `conversation` over `keys`, routed as KvCacheManager routes it.
  void RunTurn(int64_t id, int64_t conversation, std::optional<int64_t> parent,
               const std::vector<BlockKey>& keys, bool authenticated = true) {
    std::optional<ConversationId> hint;
    if (parent.has_value()) hint = ConversationId(*parent);
    demotion_.Admit(ConversationId(conversation), hint, authenticated, h_.cache().current_step(),
                    TimeNs(0), records_, h_.cache());
    h_.Start(id, keys);
    const CommittedChain chain = h_.ChainOf(id);
    h_.Finish(id);
    demotion_.EndTurn(ConversationId(conversation), h_.cache().current_step(), TimeNs(0));
    records_.RecordTurn(ConversationId(conversation), chain, h_.cache());
    const Status s = demotion_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }

  BlockCacheHarness h_{DemotionOptions()};
  ConversationRetention records_{DemotionOptions()};
  SubagentDemotion demotion_{DemotionOptions()};
};

TEST_F(SubagentDemotionUnitTest, AnIdleChildIsDemotedWhenItsParentReturnsAndRestoredLater) {
  const std::vector<BlockKey> child_keys = h_.Chain(1, 2);
  RunTurn(1, 1, std::nullopt, h_.Chain(100, 1));
  RunTurn(2, 2, 1, child_keys);
  h_.cache().AdvanceSteps(1);
  RunTurn(3, 1, std::nullopt, h_.Chain(100, 1));  // Idle for 1 step only: kept.
  EXPECT_EQ(demotion_.counters().demoted_children, 0);
  h_.cache().AdvanceSteps(1);
  RunTurn(4, 1, std::nullopt, h_.Chain(100, 1));
  EXPECT_EQ(demotion_.counters().demoted_children, 1);
  EXPECT_EQ(demotion_.counters().demoted_blocks, 2);
  EXPECT_EQ(*h_.cache().GetPriority(child_keys[1]), 5);
  RunTurn(5, 2, 1, h_.Chain(200, 1));  // The child comes back.
  EXPECT_EQ(demotion_.counters().restored_children, 1);
  EXPECT_EQ(*h_.cache().GetPriority(child_keys[1]), kDefaultPriority);
}

TEST_F(SubagentDemotionUnitTest, UnauthenticatedOrSelfNamingHintsLinkNothing) {
  RunTurn(1, 2, 1, h_.Chain(1, 1), /*authenticated=*/false);
  RunTurn(2, 3, 3, h_.Chain(50, 1));
  EXPECT_EQ(demotion_.counters().unauthenticated_parent_hints, 1);
  h_.cache().AdvanceSteps(10);
  RunTurn(3, 1, std::nullopt, h_.Chain(100, 1));
  RunTurn(4, 3, std::nullopt, h_.Chain(100, 1));
  EXPECT_EQ(demotion_.counters().demoted_children, 0);
}

}  // namespace
}  // namespace agentkv::kv
