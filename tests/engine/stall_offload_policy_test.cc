// Unit tests of the stall offload decision (stall_offload_policy.h) over a real KV cache: no
// offload without pressure or for short pauses, the farthest return first, the prefetch
// timed before the predicted return and held back while requests wait, and conservation
// (every offloaded session is prefetched or found offloaded by its return; the policy keeps
// nothing once every session returned).
#include "agentkv/engine/stall_offload_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int32_t kTokensPerBlock = 4;

class StallOffloadPolicyTest : public ::testing::Test {
 protected:
  StallOffloadPolicyTest()
      : cache_(MustCache()),
        cost_(std::move(CostModel::Create(ModelPresetId::kLlama31_8b, GpuPresetId::kH100, 1))
                  .value()),
        policy_(MustPolicy(Options())) {}

  static StallOffloadOptions Options() {
    StallOffloadOptions o;
    o.pressure_threshold = 0.5;
    o.return_quantile = 0.25;
    o.min_stall = TimeNs::Seconds(2);
    return o;
  }
  static kv::KvCacheManager MustCache() {
    kv::KvCacheOptions o;
    o.tokens_per_block = kTokensPerBlock;
    o.device_blocks = 16;
    o.host_blocks = 32;
    o.event_log_capacity = 1024;
    return std::move(kv::KvCacheManager::Create(o)).value();
  }
  static StallOffloadPolicy MustPolicy(const StallOffloadOptions& o) {
    StatusOr<StallOffloadPolicy> p = StallOffloadPolicy::Create(o);
    AGENTKV_CHECK(p.ok()) << p.status();
    return *std::move(p);
  }

  // `blocks` keys of conversation `conversation`'s own content.
  std::vector<kv::BlockKey> Keys(int64_t conversation, int32_t blocks) const {
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < blocks * kTokensPerBlock; ++i) {
      tokens.push_back(static_cast<int32_t>(conversation * 1000 + i));
    }
    return cache_.hasher().KeysFromTokens(tokens, kTokensPerBlock);
  }
  // The options of a request of `conversation` (a sub-agent of conversation 1 when
  // `subagent`) followed by the pause `hint`.
  static kv::RequestOptions Of(int64_t conversation, bool subagent = false,
                               PauseKind hint = PauseKind::kUnknown) {
    kv::RequestOptions o;
    o.conversation = ConversationId(conversation);
    if (subagent) o.parent_conversation = ConversationId(1);
    o.next_pause = hint;
    return o;
  }

  // Request `id` of `conversation` arrives at `arrive`, runs through the cache, and ends at
  // `end`, announcing `hint`.
  void Turn(int64_t id, int64_t conversation, PauseKind hint, const std::vector<kv::BlockKey>& keys,
            TimeNs arrive, TimeNs end, bool subagent = false) {
    policy_.OnSubmit(RequestId(id), Of(conversation, subagent, hint), keys, arrive);
    const RequestId rid(id);
    StatusOr<kv::PrefixMatch> m = cache_.AddRequest(rid, keys, Of(conversation, subagent));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(cache_.Reserve(rid, static_cast<int64_t>(keys.size()) * kTokensPerBlock).ok());
    ASSERT_TRUE(cache_
                    .Commit(rid, std::span<const kv::BlockKey>(keys).subspan(
                                     static_cast<size_t>(m->total_blocks())))
                    .ok());
    ASSERT_TRUE(cache_.Release(rid).ok());
    policy_.OnFinish(RequestId(id), /*completed=*/true, end);
    ASSERT_TRUE(cache_.CheckInvariants().ok());
  }

  // Teaches the policy `n` pauses of `pause` after a turn with `hint` (no KV involved).
  void Learn(PauseKind hint, bool subagent, TimeNs pause, int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t conversation = 10'000 + next_learn_;
      const TimeNs t = TimeNs::Seconds(static_cast<double>(next_learn_));
      policy_.OnSubmit(RequestId(50'000 + 2 * next_learn_), Of(conversation, subagent, hint), {},
                       t);
      policy_.OnFinish(RequestId(50'000 + 2 * next_learn_), true, t);
      policy_.OnSubmit(RequestId(50'001 + 2 * next_learn_), Of(conversation, subagent), {},
                       t + pause);
      policy_.OnFinish(RequestId(50'001 + 2 * next_learn_), true, t + pause);
      ++next_learn_;
    }
  }

  // Applies `plan` as Engine::RunStallOffload does; returns the blocks offloaded.
  int64_t Apply(const StallPlan& plan) {
    for (const StallMove& move : plan.prefetches) {
      policy_.OnPrefetched(
          move, cache_.PrefetchChain(policy_.KeysOf(move.conversation), move.max_blocks));
    }
    int64_t freed = 0;
    for (const StallMove& move : plan.offloads) {
      if (freed >= plan.blocks_to_free) break;
      const int64_t moved = cache_.OffloadChain(policy_.KeysOf(move.conversation));
      policy_.OnOffloaded(move, moved, cost_.HostTransferTime(moved * kTokensPerBlock));
      freed += moved;
    }
    EXPECT_TRUE(cache_.CheckInvariants().ok());
    return freed;
  }

  StallPlan Plan(TimeNs now, int64_t waiting = 0) const {
    return policy_.Plan(now, cache_, waiting, cost_);
  }

  kv::KvCacheManager cache_;
  CostModel cost_;
  StallOffloadPolicy policy_;
  int64_t next_learn_ = 0;
};

TEST(StallOffloadOptionsTest, ValidateNamesTheField) {
  EXPECT_TRUE(StallOffloadOptions{}.Validate().ok());
  StallOffloadOptions o;
  o.pressure_threshold = 0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("pressure_threshold"));
  o = {};
  o.return_quantile = 1.0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("return_quantile"));
  o = {};
  o.min_stall = TimeNs(-1);
  EXPECT_THAT(o.Validate().message(), HasSubstr("min_stall"));
  o = {};
  o.pauses.max_samples = 0;
  EXPECT_THAT(StallOffloadPolicy::Create(o).status().message(),
              HasSubstr("StallOffloadOptions.pauses.max_samples"));
}

TEST(StallOffloadOptionsTest, PausesMapToClasses) {
  // An unknown pause and an ended session have no class: nothing is offloaded for them.
  EXPECT_EQ(StallPauseClass(PauseKind::kUnknown, false), std::nullopt);
  EXPECT_EQ(StallPauseClass(PauseKind::kSessionEnd, false), std::nullopt);
  EXPECT_EQ(StallPauseClass(PauseKind::kSessionEnd, true), std::nullopt);
  EXPECT_EQ(StallPauseClass(PauseKind::kToolCall, false), kStallToolCallClass);
  EXPECT_EQ(StallPauseClass(PauseKind::kToolCall, true), kStallSubagentToolCallClass);
  EXPECT_EQ(StallPauseClass(PauseKind::kSubagentWait, false), kStallSubagentWaitClass);
  EXPECT_EQ(StallPauseClass(PauseKind::kHumanTurn, true), kStallHumanTurnClass);
}

TEST_F(StallOffloadPolicyTest, NoOffloadWithoutPressure) {
  Learn(PauseKind::kToolCall, false, TimeNs::Seconds(100), 20);
  // 6 of 16 device blocks used: below the 0.5 threshold.
  Turn(1, 1, PauseKind::kToolCall, Keys(1, 6), TimeNs::Seconds(1000), TimeNs::Seconds(1001));
  EXPECT_EQ(policy_.paused_sessions(), 1);
  const StallPlan plan = Plan(TimeNs::Seconds(1002));
  EXPECT_THAT(plan.offloads, IsEmpty());
  EXPECT_EQ(plan.blocks_to_free, 0);
}

TEST_F(StallOffloadPolicyTest, NoOffloadForShortPausesOrWithoutAHint) {
  Learn(PauseKind::kToolCall, true, TimeNs::Millis(500), 20);  // Sub-agent tool calls: short.
  Turn(1, 1, PauseKind::kToolCall, Keys(1, 6), TimeNs::Seconds(1000), TimeNs::Seconds(1001),
       /*subagent=*/true);
  Turn(2, 2, PauseKind::kUnknown, Keys(2, 6), TimeNs::Seconds(1000), TimeNs::Seconds(1001));
  // 12 of 16 blocks used: under pressure, but the only paused session returns within a second
  // and the other announced no pause.
  EXPECT_EQ(policy_.paused_sessions(), 1);
  EXPECT_THAT(Plan(TimeNs::Seconds(1001)).offloads, IsEmpty());
}

TEST_F(StallOffloadPolicyTest, UnderPressureTheFarthestReturnGoesFirstUntilTheThreshold) {
  Learn(PauseKind::kToolCall, false, TimeNs::Seconds(10), 20);
  Learn(PauseKind::kHumanTurn, false, TimeNs::Seconds(600), 20);
  Turn(1, 1, PauseKind::kToolCall, Keys(1, 5), TimeNs::Seconds(1000), TimeNs::Seconds(1001));
  Turn(2, 2, PauseKind::kHumanTurn, Keys(2, 5), TimeNs::Seconds(1000), TimeNs::Seconds(1001));
  // 10 of 16 used, threshold 8: two blocks to free.
  const StallPlan plan = Plan(TimeNs::Seconds(1001));
  ASSERT_EQ(plan.offloads.size(), 2u);
  EXPECT_EQ(plan.offloads[0].conversation, ConversationId(2));
  EXPECT_EQ(plan.offloads[1].conversation, ConversationId(1));
  EXPECT_GT(plan.offloads[0].predicted_return, plan.offloads[1].predicted_return);
  EXPECT_EQ(plan.blocks_to_free, 2);
  // The human turn's whole chain goes; that is enough.
  EXPECT_EQ(Apply(plan), 5);
  EXPECT_EQ(cache_.Match(Keys(2, 5)), (kv::PrefixMatch{0, 5}));
  EXPECT_EQ(cache_.Match(Keys(1, 5)), (kv::PrefixMatch{5, 0}));
  EXPECT_EQ(policy_.offloaded_sessions(), 1);
  EXPECT_EQ(cache_.stats().stall_offloaded_blocks, 5);
  // Below the threshold now: nothing more.
  EXPECT_THAT(Plan(TimeNs::Seconds(1001)).offloads, IsEmpty());
}

TEST_F(StallOffloadPolicyTest, PrefetchIsTimedBeforeThePredictedReturn) {
  Learn(PauseKind::kHumanTurn, false, TimeNs::Seconds(100), 20);  // Edge 128 s.
  Turn(1, 1, PauseKind::kHumanTurn, Keys(1, 10), TimeNs::Seconds(1000), TimeNs::Seconds(1000));
  const StallPlan plan = Plan(TimeNs::Seconds(1000));
  ASSERT_EQ(plan.offloads.size(), 1u);
  const TimeNs predicted = plan.offloads[0].predicted_return;
  EXPECT_EQ(predicted, TimeNs::Seconds(1000 + 128));
  ASSERT_EQ(Apply(plan), 10);
  const TimeNs transfer = cost_.HostTransferTime(10 * kTokensPerBlock);
  ASSERT_GT(transfer, TimeNs(0));
  const std::optional<TimeNs> wake = policy_.NextWake(TimeNs::Seconds(1000));
  ASSERT_TRUE(wake.has_value());
  EXPECT_EQ(*wake, predicted - transfer);
  EXPECT_LT(*wake, predicted);
  // Not before it is due.
  EXPECT_THAT(Plan(*wake - TimeNs(1)).prefetches, IsEmpty());
  // Due: the chain comes back as far as the threshold allows (8 of 16 blocks; nothing is
  // held), and the session is resident again; the request onboards the rest.
  const StallPlan due = Plan(*wake);
  ASSERT_EQ(due.prefetches.size(), 1u);
  EXPECT_EQ(due.prefetches[0].max_blocks, 8);
  Apply(due);
  EXPECT_EQ(cache_.Match(Keys(1, 10)), (kv::PrefixMatch{8, 2}));
  EXPECT_EQ(policy_.offloaded_sessions(), 0);
  EXPECT_EQ(policy_.NextWake(*wake), std::nullopt);
  EXPECT_EQ(policy_.counters().prefetched_blocks, 8);
  // The return finds it on the device.
  policy_.OnSubmit(RequestId(2), Of(1), {}, predicted);
  EXPECT_EQ(policy_.counters().returned_prefetched, 1);
  EXPECT_EQ(policy_.paused_sessions(), 0);
}

TEST_F(StallOffloadPolicyTest, NoPrefetchWhileRequestsWait) {
  Learn(PauseKind::kHumanTurn, false, TimeNs::Seconds(100), 20);
  Turn(1, 1, PauseKind::kHumanTurn, Keys(1, 10), TimeNs::Seconds(1000), TimeNs::Seconds(1000));
  ASSERT_EQ(Apply(Plan(TimeNs::Seconds(1000))), 10);
  const TimeNs wake = *policy_.NextWake(TimeNs::Seconds(1000));
  EXPECT_THAT(Plan(wake, /*waiting=*/1).prefetches, IsEmpty());
  // Overdue prefetches go once the queue is empty; the wake is not repeated meanwhile.
  EXPECT_EQ(policy_.NextWake(wake), std::nullopt);
  EXPECT_EQ(Plan(wake + TimeNs::Seconds(5)).prefetches.size(), 1u);
}

TEST_F(StallOffloadPolicyTest, AnAbortedTurnStartsNoPause) {
  Learn(PauseKind::kHumanTurn, false, TimeNs::Seconds(100), 20);
  policy_.OnSubmit(RequestId(1), Of(1, false, PauseKind::kHumanTurn), Keys(1, 4), TimeNs(0));
  EXPECT_EQ(policy_.turns_in_flight(), 1);
  policy_.OnFinish(RequestId(1), /*completed=*/false, TimeNs::Seconds(1));
  EXPECT_EQ(policy_.turns_in_flight(), 0);
  EXPECT_EQ(policy_.paused_sessions(), 0);
}

TEST_F(StallOffloadPolicyTest, ConservationEveryOffloadIsPrefetchedOrFoundByItsReturn) {
  Learn(PauseKind::kHumanTurn, false, TimeNs::Seconds(100), 20);
  // Three sessions pause; two get offloaded (the device pressure stays high).
  Turn(1, 1, PauseKind::kHumanTurn, Keys(1, 5), TimeNs::Seconds(1000), TimeNs::Seconds(1000));
  Turn(2, 2, PauseKind::kHumanTurn, Keys(2, 5), TimeNs::Seconds(1000), TimeNs::Seconds(1000));
  Turn(3, 3, PauseKind::kHumanTurn, Keys(3, 5), TimeNs::Seconds(1000), TimeNs::Seconds(1000));
  Apply(Plan(TimeNs::Seconds(1000)));
  EXPECT_EQ(policy_.offloaded_sessions(), 2);
  // Session 1 returns early, its KV still on the host: the request onboards it.
  const int64_t early = policy_.offloaded_sessions();
  policy_.OnSubmit(RequestId(11), Of(1), Keys(1, 5), TimeNs::Seconds(1010));
  StatusOr<kv::PrefixMatch> m = cache_.AddRequest(RequestId(11), Keys(1, 5), Of(1));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(cache_.Release(RequestId(11)).ok());
  policy_.OnFinish(RequestId(11), true, TimeNs::Seconds(1011));
  // The rest: prefetched at their time, then they return.
  for (TimeNs t = TimeNs::Seconds(1011); policy_.NextWake(t).has_value();) {
    t = *policy_.NextWake(t);
    Apply(Plan(t));
  }
  policy_.OnSubmit(RequestId(12), Of(2), {}, TimeNs::Seconds(1200));
  policy_.OnSubmit(RequestId(13), Of(3), {}, TimeNs::Seconds(1200));
  const StallOffloadCounters& c = policy_.counters();
  EXPECT_EQ(c.offloads, early);
  EXPECT_EQ(c.offloads, c.returned_offloaded + c.prefetches);
  EXPECT_EQ(c.returns, c.pauses);
  EXPECT_GT(c.returned_offloaded, 0);
  // Every block moved out came back (prefetched or onboarded); nothing is held or pinned.
  const kv::KvCacheStats s = cache_.stats();
  EXPECT_EQ(s.stall_offloaded_blocks, s.prefetched_blocks + s.onboards);
  EXPECT_EQ(s.device.held, 0);
  EXPECT_EQ(s.host.cached, 0);
  EXPECT_EQ(policy_.paused_sessions(), 0);
  EXPECT_EQ(policy_.turns_in_flight(), 0);
}

}  // namespace
}  // namespace agentkv::engine
