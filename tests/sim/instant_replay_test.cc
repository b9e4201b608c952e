// Tests of the instant single cache: the grid of arms and capacities (arm-major, a fresh cache
// per point, the change column per capacity), long requests truncated or refused,
// infinite-cache, +lifecycle closing sessions where they end, arms that need the fleet, the
// step counter, progress, and option errors. The views (cache_curve_test, agentic_replay_test)
// check the counts against independent references.
#include "agentkv/sim/instant_replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "arm_names.h"

namespace agentkv::sim {
namespace {

using testing_support::Arms;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kBlockTokens = 16;

InstantRequest Request(std::vector<uint64_t> ids, TimeNs time = TimeNs(0),
                       std::optional<int64_t> session = std::nullopt, bool ends = false) {
  InstantRequest r;
  r.time = time;
  r.keys = kv::BlockKeyHasher(0).KeysFromBlockIds(ids);
  r.options.prompt_tokens = static_cast<int64_t>(ids.size()) * kBlockTokens;
  if (session.has_value()) {
    r.options.session = SessionId(*session);
    r.options.conversation = ConversationId(*session);
  }
  r.ends_session = ends;
  return r;
}

InstantWorkload Workload(std::vector<InstantRequest> requests) {
  InstantWorkload w;
  w.tokens_per_block = kBlockTokens;
  w.requests = std::move(requests);
  return w;
}

// [1 2], [3 4], [1 2]: 4 unique blocks. At 2 blocks every request misses (4 evictions); at 4
// the third hits both of its blocks.
InstantWorkload ThreeRequests() {
  return Workload({Request({1, 2}), Request({3, 4}), Request({1, 2})});
}

Status RunError(const InstantWorkload& w, const InstantReplayOptions& options) {
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Status() : r.status();
}

TEST(InstantReplayTest, PointsAreArmMajorWithAFreshCacheEach) {
  InstantReplayOptions options;
  options.arms = Arms({"+per-conversation", "baseline"});
  options.capacity_fractions = {0.5, 1.0};
  StatusOr<InstantReplayResult> r = RunInstantReplay(ThreeRequests(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 3);
  EXPECT_EQ(r->unique_blocks, 4);
  EXPECT_EQ(r->tokens_per_block, kBlockTokens);
  ASSERT_EQ(r->points.size(), 4u);
  std::vector<std::pair<std::string, int64_t>> grid;
  for (const InstantPoint& p : r->points) grid.emplace_back(p.arm, p.capacity_blocks);
  EXPECT_THAT(grid, ElementsAre(std::pair<std::string, int64_t>{"+per-conversation", 2},
                                std::pair<std::string, int64_t>{"+per-conversation", 4},
                                std::pair<std::string, int64_t>{"baseline", 2},
                                std::pair<std::string, int64_t>{"baseline", 4}));
  for (const InstantPoint& p : r->points) {
    SCOPED_TRACE(p.arm + " at " + std::to_string(p.capacity_blocks));
    EXPECT_EQ(p.total_blocks, 6);
    EXPECT_EQ(p.stats.lookup_blocks, 6);
    const bool small = p.capacity_blocks == 2;
    EXPECT_EQ(p.fraction, small ? 0.5 : 1.0);
    EXPECT_EQ(p.hits, small ? 0 : 2);
    EXPECT_DOUBLE_EQ(p.hit_ratio, small ? 0.0 : 2.0 / 6.0);
    EXPECT_EQ(p.stats.device_evictions, small ? 4 : 0);
    EXPECT_EQ(p.stats.uncached_tokens, (small ? 6 : 4) * kBlockTokens);
    // Against the baseline at the same capacity (a different capacity would give -33% or +50%).
    EXPECT_EQ(p.uncached_change_vs_baseline_percent, 0.0);
  }
  EXPECT_TRUE(r->points[2].spec.IsBaseline());
  EXPECT_TRUE(r->points[0].spec.per_conversation);
}

TEST(InstantReplayTest, AbsoluteCapacityReportsItsShareOfTheUniqueBlocks) {
  InstantReplayOptions options;
  options.capacity_blocks = 8;
  StatusOr<InstantReplayResult> r = RunInstantReplay(ThreeRequests(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 1u);
  EXPECT_EQ(r->points[0].capacity_blocks, 8);
  EXPECT_DOUBLE_EQ(r->points[0].fraction, 2.0);
  EXPECT_EQ(r->points[0].hits, 2);
}

TEST(InstantReplayTest, LongRequestsAreTruncatedOrRefused) {
  const InstantWorkload w = Workload({Request({1, 2, 3}), Request({1, 2, 3})});
  InstantReplayOptions options;
  options.capacity_blocks = 2;
  options.truncate_long_requests = true;
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  // Each request caches its first two blocks; the second finds both; all 3 count in the total.
  EXPECT_EQ(r->points[0].hits, 2);
  EXPECT_EQ(r->points[0].total_blocks, 6);
  EXPECT_EQ(r->points[0].stats.lookup_blocks, 4);

  options.truncate_long_requests = false;
  const Status refused = RunError(w, options);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "the device capacity of 2 blocks is below the longest request (request 0: 3 "
            "blocks); raise the capacity");
}

TEST(InstantReplayTest, OutputKeysAreCommittedForTheNextTurn) {
  // Turn 0 [1 2] answers blocks 3 and 4; turn 1 [1 2 3 4 5] finds all four cached.
  InstantRequest first = Request({1, 2});
  const std::vector<kv::BlockKey> chain =
      kv::BlockKeyHasher(0).KeysFromBlockIds(std::vector<uint64_t>{1, 2, 3, 4, 5});
  first.output_keys.assign(chain.begin() + 2, chain.begin() + 4);
  const InstantWorkload w = Workload({first, Request({1, 2, 3, 4, 5})});
  InstantReplayOptions options;
  options.capacity_blocks = 8;
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->unique_blocks, 5);
  // Output blocks are committed, not looked up: hits and totals count prompt blocks.
  EXPECT_EQ(r->points[0].hits, 4);
  EXPECT_EQ(r->points[0].total_blocks, 7);

  // Without the output keys the second turn recomputes the answer.
  const InstantWorkload plain = Workload({Request({1, 2}), Request({1, 2, 3, 4, 5})});
  r = RunInstantReplay(plain, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->points[0].hits, 2);

  // At 3 blocks the answer is committed only as far as the device holds it (block 3), and the
  // second turn, truncated to 3 blocks, finds those.
  options.capacity_blocks = 3;
  options.truncate_long_requests = true;
  r = RunInstantReplay(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->points[0].hits, 3);
  EXPECT_EQ(r->points[0].stats.stored_blocks, 3);
}

TEST(InstantReplayTest, InfiniteCacheHoldsEveryBlock) {
  InstantReplayOptions options;
  options.arms = Arms({"baseline", "infinite-cache"});
  options.capacity_fractions = {0.5};
  StatusOr<InstantReplayResult> r = RunInstantReplay(ThreeRequests(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  const InstantPoint& infinite = r->points[1];
  EXPECT_EQ(infinite.capacity_blocks, 4);
  EXPECT_EQ(infinite.fraction, 1.0);
  EXPECT_EQ(infinite.stats.device_evictions, 0);
  EXPECT_EQ(infinite.hits, 2);
  ASSERT_TRUE(infinite.uncached_change_vs_baseline_percent.has_value());
  EXPECT_DOUBLE_EQ(*infinite.uncached_change_vs_baseline_percent, 100.0 * (4.0 - 6.0) / 6.0);
}

TEST(InstantReplayTest, GapRetentionEvictsAnEndedConversationBeforeAPausedOne) {
  // B [2] pauses for a tool, A [1] ends, C [3] needs room, B returns for [2].
  auto hinted = [](std::vector<uint64_t> ids, double t_s, int64_t conversation, PauseKind next) {
    InstantRequest r = Request(std::move(ids), TimeNs::Seconds(t_s));
    r.options.conversation = ConversationId(conversation);
    r.options.next_pause = next;
    return r;
  };
  const InstantWorkload w = Workload(
      {hinted({2}, 0, 2, PauseKind::kToolCall), hinted({1}, 1, 1, PauseKind::kSessionEnd),
       hinted({3}, 2, 3, PauseKind::kSessionEnd), hinted({2}, 3, 2, PauseKind::kSessionEnd)});
  InstantReplayOptions options;
  options.arms = Arms({"baseline", "+gap-retention"});
  options.capacity_blocks = 2;
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  EXPECT_EQ(r->points[0].hits, 0);  // LRU evicted B's block, the oldest.
  EXPECT_EQ(r->points[1].hits, 1);
  EXPECT_TRUE(r->points[1].spec.gap_retention);
}

TEST(InstantReplayTest, LifecycleClosesEachSessionAfterItsLastRequest) {
  // Session 1: [1 2] then [1 2 3], which ends it; session 2: [7] (ends it).
  const InstantWorkload w =
      Workload({Request({1, 2}, TimeNs(0), 1), Request({7}, TimeNs(0), 2, true),
                Request({1, 2, 3}, TimeNs(0), 1, true)});
  InstantReplayOptions options;
  options.arms = Arms({"baseline", "+lifecycle"});
  options.capacity_blocks = 8;
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  ASSERT_TRUE(r.ok()) << r.status();
  const kv::KvCacheStats& kept = r->points[0].stats;
  const kv::KvCacheStats& closed = r->points[1].stats;
  EXPECT_EQ(kept.closed_sessions, 0);
  EXPECT_EQ(kept.open_sessions, 2);
  EXPECT_EQ(closed.closed_sessions, 2);
  EXPECT_EQ(closed.open_sessions, 0);
  // Release mode frees the 3 + 1 blocks only those sessions used.
  EXPECT_EQ(closed.tokens_freed_by_close, 4 * kBlockTokens);
  EXPECT_EQ(r->points[1].hits, 2);

  options.session_close_mode = kv::SessionCloseMode::kDereference;
  StatusOr<InstantReplayResult> dereferenced = RunInstantReplay(w, options);
  ASSERT_TRUE(dereferenced.ok()) << dereferenced.status();
  EXPECT_EQ(dereferenced->points[1].stats.closed_sessions, 2);
  EXPECT_EQ(dereferenced->points[1].stats.tokens_freed_by_close, 0);
}

TEST(InstantReplayTest, ArmsThatNeedTheFleetAreRefused) {
  for (const char* arm : {"+admission", "+host-tier", "fixed-ttl", "continuum", "all"}) {
    SCOPED_TRACE(arm);
    InstantReplayOptions options;
    options.arms = Arms({"baseline", arm});
    const Status s = RunError(ThreeRequests(), options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("needs the simulated fleet"));
    EXPECT_THAT(s.message(), HasSubstr(std::string("arm \"") + arm + "\""));
  }
}

TEST(InstantReplayTest, StepsFollowTimeOnlyWithAStepInterval) {
  const InstantWorkload w = Workload({Request({1}, TimeNs(0)), Request({1}, TimeNs::Seconds(2))});
  InstantReplayOptions options;
  StatusOr<InstantReplayResult> fixed = RunInstantReplay(w, options);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->span, TimeNs::Seconds(2));
  EXPECT_EQ(fixed->steps, 0);

  options.step_interval = TimeNs::Millis(25);
  StatusOr<InstantReplayResult> stepped = RunInstantReplay(w, options);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  EXPECT_EQ(stepped->steps, 80);

  options.step_interval = TimeNs(1000);
  const InstantWorkload long_span =
      Workload({Request({1}, TimeNs(0)), Request({1}, TimeNs::Seconds(2000))});
  EXPECT_THAT(RunError(long_span, options).message(), HasSubstr("steps are supported"));
}

TEST(InstantReplayTest, ProgressEvery4096RequestsAndOncePerPointAtItsEnd) {
  std::vector<InstantRequest> requests;
  for (uint64_t i = 0; i < 5000; ++i) requests.push_back(Request({i % 7}));
  InstantReplayOptions options;
  options.capacity_fractions = {0.5, 1.0};
  std::vector<std::pair<size_t, int64_t>> progress;
  std::vector<std::pair<size_t, int64_t>> done;
  options.progress = [&](size_t point, int64_t n) { progress.emplace_back(point, n); };
  options.on_point_done = [&](size_t point, const InstantPoint& p) {
    done.emplace_back(point, p.capacity_blocks);
    EXPECT_FALSE(p.uncached_change_vs_baseline_percent.has_value());
  };
  StatusOr<InstantReplayResult> r = RunInstantReplay(Workload(std::move(requests)), options);
  ASSERT_TRUE(r.ok()) << r.status();
  using P = std::pair<size_t, int64_t>;
  EXPECT_THAT(progress, ElementsAre(P{0, 4096}, P{0, 5000}, P{1, 4096}, P{1, 5000}));
  EXPECT_THAT(done, ElementsAre(P{0, 3}, P{1, 7}));
}

TEST(InstantReplayTest, InvalidOptionsNameTheOption) {
  const auto error = [](auto mutate) {
    InstantReplayOptions options;
    mutate(options);
    const Status s = RunError(ThreeRequests(), options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    return s.message();
  };
  EXPECT_EQ(error([](InstantReplayOptions& o) { o.arms.clear(); }), "arms must not be empty");
  EXPECT_EQ(error([](InstantReplayOptions& o) {
              o.arms = Arms({"lru", "lru"});
            }),
            "arm \"lru\" is named twice");
  EXPECT_EQ(error([](InstantReplayOptions& o) {
              o.capacity_fractions = {0.5, 0};
            }),
            "capacity_fractions[1] must be in (0, 1], got 0");
  EXPECT_EQ(error([](InstantReplayOptions& o) { o.capacity_fractions.clear(); }),
            "capacity_fractions must not be empty");
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.capacity_blocks = 0; }),
              HasSubstr("capacity_blocks must be in [1, "));
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.host_blocks = -1; }),
              HasSubstr("host_blocks must be in [0, "));
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.step_interval = TimeNs(0); }),
              HasSubstr("step_interval must be in"));
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.max_num_turns = 0; }),
              HasSubstr("max_num_turns must be in [1, "));
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.min_idle_steps = -1; }),
              HasSubstr("min_idle_steps must be in"));
  EXPECT_THAT(error([](InstantReplayOptions& o) { o.finished_subagent_priority = 101; }),
              HasSubstr("finished_subagent_priority must be in [0, 100], got 101"));

  InstantWorkload zero = ThreeRequests();
  zero.tokens_per_block = 0;
  EXPECT_THAT(RunError(zero, InstantReplayOptions()).message(),
              HasSubstr("tokens_per_block must be in [1, "));
}

TEST(InstantReplayTest, TwoRunsAreIdentical) {
  InstantReplayOptions options;
  options.arms = Arms({"lru", "+subagent-demotion=20", "+lifecycle"});
  options.capacity_fractions = {0.5, 1.0};
  StatusOr<InstantReplayResult> a = RunInstantReplay(ThreeRequests(), options);
  StatusOr<InstantReplayResult> b = RunInstantReplay(ThreeRequests(), options);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->points.size(), 6u);
  for (size_t i = 0; i < a->points.size(); ++i) {
    EXPECT_EQ(a->points[i].stats, b->points[i].stats) << a->points[i].arm;
    EXPECT_EQ(a->points[i].hits, b->points[i].hits);
  }
}

}  // namespace
}  // namespace agentkv::sim
