// Tests of EngineModel's miss accounting: a request's uncached prompt tokens split at its first
// admission into cold tokens and eviction regret (evicted_recompute_tokens), and retired keys
// forgotten.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/retention.h"
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "engine_model_fixture.h"

namespace agentkv::sim {
namespace {

using namespace engine_model_testing;

TEST_F(EngineModelTest, FirstRequestIsAllCold) {
  Build(DefaultOptions(/*device_blocks=*/64));
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock + 5, 2, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* record = engine_->FindRecord(RequestId(1));
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->report.uncached_tokens, 8 * kTokensPerBlock + 5);
  EXPECT_EQ(record->cold_tokens, 8 * kTokensPerBlock + 5);
  EXPECT_EQ(record->evicted_recompute_tokens, 0);
}

TEST_F(EngineModelTest, RecomputedLastBlockOfAStillCachedPromptIsCold) {
  Build(DefaultOptions(/*device_blocks=*/64));
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  // Nothing was ever lost: the last block (recomputed for the last prompt token) is cold.
  EXPECT_EQ(second->report.uncached_tokens, kTokensPerBlock);
  EXPECT_EQ(second->cold_tokens, kTokensPerBlock);
  EXPECT_EQ(second->evicted_recompute_tokens, 0);
}

// A computes 8 blocks; B (disjoint, 12 blocks) evicts some of them from a 16-block device;
// C repeats A's 8 blocks and adds 2 new ones: the evicted ones are eviction regret, the 2 new
// ones cold.
TEST_F(EngineModelTest, MissSplitsIntoColdAndEvictedRecompute) {
  Build(DefaultOptions(/*device_blocks=*/16));
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(DeviceBlocks(*engine_, a_keys), 8);
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  const int64_t kept = DeviceBlocks(*engine_, a_keys);
  ASSERT_GT(kept, 0) << "the scenario needs a partial eviction of A";
  ASSERT_LT(kept, 8) << "the scenario needs B to evict some of A";
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 10 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();

  const EngineRequestRecord* a = engine_->FindRecord(RequestId(1));
  const EngineRequestRecord* b = engine_->FindRecord(RequestId(2));
  const EngineRequestRecord* c = engine_->FindRecord(RequestId(3));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a->cold_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(b->cold_tokens, 12 * kTokensPerBlock);
  EXPECT_EQ(b->evicted_recompute_tokens, 0);
  EXPECT_EQ(c->report.cached_device_tokens, kept * kTokensPerBlock);
  EXPECT_EQ(c->evicted_recompute_tokens, (8 - kept) * kTokensPerBlock);
  EXPECT_EQ(c->cold_tokens, 2 * kTokensPerBlock);
  for (const EngineRequestRecord* r : {a, b, c}) ExpectSplitAddsUp(*r);
}

TEST_F(EngineModelTest, BlocksOffloadedToTheHostAreNotLost) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
  options.config.kv_pool.hicache_tokens = 64 * kTokensPerBlock;
  Build(options);
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  ASSERT_LT(DeviceBlocks(*engine_, ContentKeys(1000, 8)), 8) << "B must push A off the device";
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 10 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* c = engine_->FindRecord(RequestId(3));
  ASSERT_NE(c, nullptr);
  EXPECT_GT(c->report.cached_host_tokens, 0) << "A's blocks came back from the host";
  EXPECT_EQ(c->cached_tokens(), 8 * kTokensPerBlock);
  EXPECT_EQ(c->evicted_recompute_tokens, 0);
  EXPECT_EQ(c->cold_tokens, 2 * kTokensPerBlock);
}

TEST_F(EngineModelTest, BlocksReleasedBySessionCloseCountAsEvictedRecompute) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/64);
  options.config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  Build(options);
  engine::SchedulerRequest first = MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000);
  first.kv_options.session = SessionId(7);
  ASSERT_TRUE(engine_->Submit(std::move(first)).ok());
  loop_.RunUntilIdle();
  ASSERT_GT(engine_->CloseSession(SessionId(7)), 0);
  ASSERT_EQ(DeviceBlocks(*engine_, ContentKeys(1000, 8)), 0);
  // The close happened between steps: the next admission must still see its releases.
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->report.uncached_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(second->evicted_recompute_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(second->cold_tokens, 0);
}

// RetireKeys forgets keys already lost (a request naming them again finds them cold), and keys
// still cached are not recorded when they leave afterwards; keys it was not given keep their
// account. (The driver retires only keys no later request names; naming them here makes the
// forgetting observable.)
TEST_F(EngineModelTest, RetiredKeysAreForgottenLostAlreadyOrWhenTheyLeave) {
  Build(DefaultOptions(/*device_blocks=*/16));
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  const std::vector<kv::BlockKey> b_keys = ContentKeys(2000, 12);
  ASSERT_NE(RunAlone(1, 8, /*content=*/1000), nullptr);
  ASSERT_NE(RunAlone(2, 12, /*content=*/2000), nullptr);
  const int64_t a_kept = DeviceBlocks(*engine_, a_keys);
  ASSERT_LT(a_kept, 8) << "the scenario needs B to evict some of A";
  const int64_t b_cached = DeviceBlocks(*engine_, b_keys);
  ASSERT_GT(b_cached, 0);
  EXPECT_EQ(engine_->remembered_keys(), static_cast<size_t>(8 - a_kept));

  // A's lost keys go at once; the retired keys still cached are noted, not lost.
  engine_->RetireKeys(a_keys);
  engine_->RetireKeys(b_keys);
  EXPECT_EQ(engine_->remembered_keys(), static_cast<size_t>(a_kept + b_cached));

  // C (new content) pushes A and B out: their losses are not recorded, and what is remembered
  // is only the retired blocks still cached.
  ASSERT_NE(RunAlone(3, 14, /*content=*/3000), nullptr);
  ASSERT_LT(DeviceBlocks(*engine_, b_keys), b_cached) << "C must push B out";
  EXPECT_EQ(engine_->remembered_keys(),
            static_cast<size_t>(DeviceBlocks(*engine_, a_keys) + DeviceBlocks(*engine_, b_keys)));

  // A named again: its lost blocks count as cold now.
  const EngineRequestRecord* again = RunAlone(4, 8, /*content=*/1000);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->evicted_recompute_tokens, 0);
  EXPECT_EQ(again->cold_tokens, again->report.uncached_tokens);
  ExpectSplitAddsUp(*again);

  // C's keys were not retired: once lost, a request naming them is eviction regret again.
  ASSERT_NE(RunAlone(5, 12, /*content=*/2000), nullptr);
  ASSERT_LT(DeviceBlocks(*engine_, ContentKeys(3000, 14)), 14) << "C must be pushed out";
  const EngineRequestRecord* c_again = RunAlone(6, 14, /*content=*/3000);
  ASSERT_NE(c_again, nullptr);
  EXPECT_GT(c_again->evicted_recompute_tokens, 0);
  ExpectSplitAddsUp(*c_again);
}

// Randomized: on a small cache with preemption and eviction, every request's split adds up,
// and its evicted-recompute blocks are exactly the uncached blocks of its prompt that the kept
// event log shows this engine stored and then lost by the step that admitted it.
TEST(EngineModelMissSplitTest, MatchesAReferenceOverTheKeptEventLog) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EventLoop loop;
    EngineModelOptions options = DefaultOptions(/*device_blocks=*/96);
    options.keep_events = true;
    options.config.scheduler.max_running_requests = 6;
    options.config.scheduler.chunked_prefill_size = 256;
    StatusOr<std::unique_ptr<EngineModel>> made = EngineModel::Create(&loop, options);
    ASSERT_TRUE(made.ok()) << made.status();
    EngineModel& engine = **made;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> gap_us(0, 30'000);
    std::uniform_int_distribution<int64_t> prompt(16, 640);
    std::uniform_int_distribution<int64_t> output(1, 24);
    std::uniform_int_distribution<uint64_t> prefix(1, 5);
    constexpr int64_t kRequests = 150;
    std::unordered_map<int64_t, std::vector<kv::BlockKey>> keys_of;
    TimeNs at(0);
    for (int64_t id = 0; id < kRequests; ++id) {
      at += TimeNs(gap_us(rng) * 1000);
      engine::SchedulerRequest request =
          MakeRequest(id, prompt(rng), output(rng), /*content=*/prefix(rng) * 1'000'000);
      keys_of[id] = request.prompt_keys;
      loop.Schedule(at, [&engine, request = std::move(request)]() mutable {
        Status status = engine.Submit(std::move(request));
        EXPECT_TRUE(status.ok()) << status;
      });
    }
    loop.RunUntilIdle();
    ASSERT_EQ(engine.gauges().num_finished_reqs, kRequests);

    int64_t total_cold = 0;
    int64_t total_evicted = 0;
    for (int64_t id = 0; id < kRequests; ++id) {
      const EngineRequestRecord* record = engine.FindRecord(RequestId(id));
      ASSERT_NE(record, nullptr);
      ExpectSplitAddsUp(*record);
      ASSERT_TRUE(record->report.first_scheduled.has_value());
      ASSERT_TRUE(record->first_scheduled.has_value());
      EXPECT_LE(record->arrival, *record->first_scheduled);
      EXPECT_LT(*record->first_scheduled, record->first_token.value_or(TimeNs(-1)));
      const Step admitted = *record->report.first_scheduled;
      // Reference: keys stored, and keys lost, by the end of the admitting step.
      std::unordered_set<kv::BlockKey> stored;
      std::unordered_set<kv::BlockKey> lost;
      for (const kv::KvEvent& event : engine.events()) {
        if (event.step > admitted) break;
        if (event.kind == kv::KvEventKind::kStored) stored.insert(event.key);
        if (event.kind == kv::KvEventKind::kDropped || event.kind == kv::KvEventKind::kEvicted ||
            event.kind == kv::KvEventKind::kReleased) {
          lost.insert(event.key);
        }
      }
      const std::vector<kv::BlockKey>& keys = keys_of[id];
      const int64_t cached_blocks = record->cached_tokens() / kTokensPerBlock;
      int64_t expected_lost = 0;
      for (size_t i = static_cast<size_t>(cached_blocks); i < keys.size(); ++i) {
        if (!lost.contains(keys[i])) continue;
        EXPECT_TRUE(stored.contains(keys[i]))
            << "request " << id << " block " << i << " was lost without ever being computed";
        ++expected_lost;
      }
      EXPECT_EQ(record->evicted_recompute_tokens,
                std::min(record->report.uncached_tokens, expected_lost * kTokensPerBlock))
          << "request " << id;
      total_cold += record->cold_tokens;
      total_evicted += record->evicted_recompute_tokens;
    }
    EXPECT_GT(total_evicted, 0) << "the workload should make the engine recompute lost blocks";
    EXPECT_GT(total_cold, 0);
    EXPECT_TRUE(engine.engine().CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace agentkv::sim
