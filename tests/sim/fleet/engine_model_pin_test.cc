// Tests of EngineModel's TTL pins (engine::Engine::PinPrefix paced on the event loop): priority
// until expiry, supersession, leaf-first re-queueing, and Continuum's lifecycle
// (config.continuum_pins): release on return and under memory pressure.
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

class EnginePinTest : public EngineModelTest {
 protected:
  // Runs a request of `content` (8 blocks) to completion; its blocks stay cached.
  void Warm(int64_t id, uint64_t content, std::optional<ConversationId> conversation = {}) {
    engine::SchedulerRequest request = MakeRequest(id, 8 * kTokensPerBlock, 1, content);
    request.kv_options.conversation = conversation;
    ASSERT_TRUE(engine_->Submit(std::move(request)).ok());
    loop_.RunUntilIdle();
  }
  kv::Priority PriorityOf(kv::BlockKey key) const {
    StatusOr<kv::Priority> priority = engine_->engine().cache().GetPriority(key);
    EXPECT_TRUE(priority.ok()) << priority.status();
    return priority.ok() ? *priority : -1;
  }
  // Every block of `keys` has `priority`.
  void ExpectPriority(const std::vector<kv::BlockKey>& keys, kv::Priority priority) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(PriorityOf(keys[i]), priority) << "block " << i << " at " << loop_.now();
    }
  }
};

TEST_F(EnginePinTest, PinHoldsTheMaxPriorityUntilTheTtlThenRestoresTheDefault) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  ExpectPriority(keys, kv::kDefaultPriority);
  const TimeNs pinned_at = loop_.now();
  EXPECT_EQ(engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10)), 8);
  ExpectPriority(keys, kv::kMaxPriority);
  EXPECT_EQ(engine_->pin_counters().pins, 1);
  loop_.RunUntil(pinned_at + TimeNs::Seconds(10) - TimeNs(1));
  ExpectPriority(keys, kv::kMaxPriority);
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), pinned_at + TimeNs::Seconds(10));
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->pin_counters().expired, 1);
  EXPECT_EQ(engine_->pin_counters().returned, 0);
}

TEST_F(EnginePinTest, PinCountsOnlyCachedBlocks) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  std::vector<kv::BlockKey> keys = ContentKeys(1000, 10);  // Two blocks were never computed.
  EXPECT_EQ(engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(1)), 8);
  EXPECT_EQ(engine_->PinPrefix(ConversationId(6), ContentKeys(9000, 4), TimeNs::Seconds(1)), 0);
  EXPECT_EQ(engine_->pin_counters().pins, 2);
}

TEST_F(EnginePinTest, ALaterPinOfTheConversationSupersedesTheEarlierExpiry) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  const TimeNs t0 = loop_.now();
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  loop_.RunUntil(t0 + TimeNs::Seconds(5));
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  loop_.RunUntil(t0 + TimeNs::Seconds(12));
  ExpectPriority(keys, kv::kMaxPriority);  // The first expiry did nothing.
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), t0 + TimeNs::Seconds(15));
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->pin_counters().pins, 2);
  EXPECT_EQ(engine_->pin_counters().expired, 1);
}

TEST_F(EnginePinTest, ConversationReturningBeforeExpiryCountsAsReturned) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000, ConversationId(5));
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  const TimeNs t0 = loop_.now();
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  // Another conversation's request does not count; the pinned one's does, once.
  SubmitAt(t0 + TimeNs::Seconds(1), [] {
    engine::SchedulerRequest r = MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/3000);
    r.kv_options.conversation = ConversationId(6);
    return r;
  }());
  for (int64_t id : {3, 4}) {
    engine::SchedulerRequest r = MakeRequest(id, 9 * kTokensPerBlock, 1, /*content=*/1000);
    r.kv_options.conversation = ConversationId(5);
    SubmitAt(t0 + TimeNs::Millis(1000 * (id - 1)), std::move(r));
  }
  loop_.RunUntilIdle();
  EXPECT_EQ(engine_->pin_counters().pins, 1);
  EXPECT_EQ(engine_->pin_counters().returned, 1);
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  EXPECT_EQ(engine_->FindRecord(RequestId(3))->report.cached_device_tokens, 8 * kTokensPerBlock);
  // The expiry still restores the default priority.
  EXPECT_EQ(loop_.now(), t0 + TimeNs::Seconds(10));
  ExpectPriority(keys, kv::kDefaultPriority);
}

// The point of a pin: under pressure the pinned prefix outlives a newer unpinned one.
TEST_F(EnginePinTest, PinnedPrefixSurvivesEvictionThatTakesANewerUnpinnedOne) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);  // A: 8 blocks, the oldest.
  engine::SchedulerRequest x = MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000);
  ASSERT_TRUE(engine_->Submit(std::move(x)).ok());
  loop_.RunUntilIdle();
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(10));
  // B needs 8 blocks with 4 free: 4 must go. LRU alone would take A's (older) blocks.
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 8 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 8);
  EXPECT_EQ(DeviceBlocks(*engine_, ContentKeys(2000, 4)), 0);
}

// Pinning re-queues a chain leaf first: the root stays the most recently used of the chain, so
// an eviction that reaches the pinned chain takes its leaf, not its root (which would drop the
// whole chain). B needs 9 blocks with 8 free: 1 of A's 8 goes, 7 stay.
TEST_F(EnginePinTest, PinnedChainLosesItsLeafNotItsRootUnderEviction) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(100));
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->report.output_tokens, 1);
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
}

// The same at expiry: the blocks return to the default priority leaf first.
TEST_F(EnginePinTest, ExpiredChainLosesItsLeafNotItsRootUnderEviction) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(1));
  loop_.RunUntilIdle();
  ExpectPriority(a_keys, kv::kDefaultPriority);
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
}

// At expiry a pin returns its blocks to the most recently used end (leaf first), with or
// without continuum_pins: under LRU the program that outlived its TTL usually still returns.
// A is older than C; both idle; B's one eviction takes C's leaf.
TEST_F(EnginePinTest, ExpiryReturnsTheChainToTheMostRecentlyUsedEnd) {
  for (const bool continuum : {false, true}) {
    SCOPED_TRACE(continuum ? "continuum" : "fixed");
    EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
    options.config.continuum_pins = continuum;
    Build(options);
    Warm(1, 1000);
    ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000)).ok());
    loop_.RunUntilIdle();
    const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
    const std::vector<kv::BlockKey> c_keys = ContentKeys(2000, 4);
    engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(1));
    loop_.RunUntilIdle();
    // B needs 5 blocks with 4 free: one block goes.
    ASSERT_TRUE(engine_->Submit(MakeRequest(3, 5 * kTokensPerBlock, 1, /*content=*/3000)).ok());
    loop_.RunUntilIdle();
    EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 8);
    EXPECT_EQ(DeviceBlocks(*engine_, c_keys), 3);
  }
}

// continuum_pins: a returning request ends its conversation's pin when it is admitted.
TEST_F(EnginePinTest, ContinuumPinEndsWhenItsConversationIsAdmittedAgain) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/64);
  options.config.continuum_pins = true;
  Build(options);
  Warm(1, 1000, ConversationId(5));
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(100));
  EXPECT_EQ(engine_->pinned_tokens(), 8 * kTokensPerBlock);
  engine::SchedulerRequest next = MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/1000);
  next.kv_options.conversation = ConversationId(5);
  ASSERT_TRUE(engine_->Submit(std::move(next)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->pin_counters().returned, 1);
  EXPECT_EQ(engine_->pinned_tokens(), 0);
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->report.cached_device_tokens, 8 * kTokensPerBlock);
}

// continuum_pins: when waiting work would have to evict pinned blocks to get one prefill
// chunk, pins are released oldest first until it would not, and the released chain becomes
// the first victim (from its leaf), before older unpinned blocks.
TEST_F(EnginePinTest, ContinuumReleasesTheOldestPinUnderPressure) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
  options.config.continuum_pins = true;
  options.config.scheduler.chunked_prefill_size = 8 * kTokensPerBlock;
  Build(options);
  ASSERT_TRUE(engine_->Submit(MakeRequest(4, 2 * kTokensPerBlock, 1, /*content=*/4000)).ok());
  loop_.RunUntilIdle();  // D: 2 unpinned blocks, the oldest.
  Warm(1, 1000, ConversationId(5));
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  const std::vector<kv::BlockKey> c_keys = ContentKeys(2000, 4);
  const std::vector<kv::BlockKey> d_keys = ContentKeys(4000, 2);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(100));
  engine_->PinPrefix(ConversationId(6), c_keys, TimeNs::Seconds(100));
  EXPECT_DOUBLE_EQ(engine_->kv_pressure(), 12.0 / 16.0);
  // 2 free blocks and 2 unpinned evictable ones: fewer than one chunk of 8 blocks. Releasing
  // A (the oldest pin) is enough. The request needs 3 blocks: one eviction, A's leaf.
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 3 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->pin_counters().unpinned_under_pressure, 1);
  EXPECT_EQ(engine_->pinned_tokens(), 4 * kTokensPerBlock);
  ExpectPriority(c_keys, kv::kMaxPriority);
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
  EXPECT_EQ(DeviceBlocks(*engine_, d_keys), 2);
  ExpectPriority({a_keys.begin(), a_keys.begin() + 7}, kv::kDefaultPriority);
}

}  // namespace
}  // namespace agentkv::sim
