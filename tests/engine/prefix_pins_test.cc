// Tests of PrefixPins on a real KV cache: a pin raises the cached blocks of its keys to the
// highest priority until it expires, a later pin supersedes an earlier one, and Continuum's
// lifecycle ends a pin when its conversation's request is admitted or ends, and releases pins,
// oldest first, under pressure.
#include "agentkv/engine/prefix_pins.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/retention.h"

namespace agentkv::engine {
namespace {

constexpr int32_t kTokensPerBlock = 16;

class PrefixPinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv::KvCacheOptions options;
    options.tokens_per_block = kTokensPerBlock;
    options.device_blocks = 32;
    StatusOr<kv::KvCacheManager> cache = kv::KvCacheManager::Create(options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    cache_.emplace(*std::move(cache));
  }

  // Caches a chain of `blocks` blocks for `conversation` (a finished request) and returns
  // its keys.
  std::vector<kv::BlockKey> CacheChain(int64_t conversation, int64_t blocks) {
    std::vector<uint64_t> ids;
    for (int64_t b = 0; b < blocks; ++b)
      ids.push_back(static_cast<uint64_t>(conversation * 100 + b));
    const std::vector<kv::BlockKey> keys = cache().hasher().KeysFromBlockIds(ids);
    const RequestId id(next_request_++);
    EXPECT_TRUE(cache().AddRequest(id, {}).ok());
    EXPECT_TRUE(cache().Reserve(id, blocks * kTokensPerBlock).ok());
    EXPECT_TRUE(cache().Commit(id, keys).ok());
    EXPECT_TRUE(cache().Release(id).ok());
    return keys;
  }

  // The priorities of `keys`' blocks, in order.
  std::vector<kv::Priority> Priorities(const std::vector<kv::BlockKey>& keys) const {
    std::vector<kv::Priority> out;
    for (const kv::BlockKey key : keys) out.push_back(*cache_->GetPriority(key));
    return out;
  }

  kv::KvCacheManager& cache() { return *cache_; }
  kv::Priority Default() const { return cache_->options().default_priority; }

  std::optional<kv::KvCacheManager> cache_;
  int64_t next_request_ = 1;
};

TEST_F(PrefixPinsTest, PinRaisesCachedBlocksUntilItExpires) {
  PrefixPins pins(/*continuum=*/false);
  const std::vector<kv::BlockKey> keys = CacheChain(1, 3);
  const PinTicket ticket = pins.Pin(ConversationId(1), keys, cache());
  EXPECT_EQ(ticket.pinned_blocks, 3);
  EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(3, kv::kMaxPriority));
  EXPECT_EQ(pins.pinned_tokens(), 3 * kTokensPerBlock);
  EXPECT_EQ(pins.counters().pins, 1);
  pins.Expire(ConversationId(1), ticket.generation, cache());
  EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(3, Default()));
  EXPECT_EQ(pins.counters().expired, 1);
  EXPECT_EQ(pins.pinned_tokens(), 0);
  EXPECT_TRUE(pins.empty());
  EXPECT_TRUE(cache().CheckInvariants().ok());
}

TEST_F(PrefixPinsTest, ALaterPinSupersedesAndTheEarlierExpiryDoesNothing) {
  PrefixPins pins(/*continuum=*/false);
  const std::vector<kv::BlockKey> keys = CacheChain(1, 2);
  const PinTicket first = pins.Pin(ConversationId(1), keys, cache());
  const PinTicket second = pins.Pin(ConversationId(1), keys, cache());
  EXPECT_NE(first.generation, second.generation);
  EXPECT_EQ(pins.pinned_tokens(), 2 * kTokensPerBlock);
  pins.Expire(ConversationId(1), first.generation, cache());
  EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(2, kv::kMaxPriority));
  EXPECT_EQ(pins.counters().expired, 0);
  pins.Expire(ConversationId(1), second.generation, cache());
  EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(2, Default()));
  EXPECT_EQ(pins.counters().expired, 1);
}

TEST_F(PrefixPinsTest, UncachedKeysArePinnedOnlyInTheAccount) {
  PrefixPins pins(/*continuum=*/false);
  const std::vector<uint64_t> ids = {900, 901};
  const std::vector<kv::BlockKey> keys = cache().hasher().KeysFromBlockIds(ids);
  const PinTicket ticket = pins.Pin(ConversationId(9), keys, cache());
  EXPECT_EQ(ticket.pinned_blocks, 0);
  EXPECT_EQ(pins.pinned_tokens(), 2 * kTokensPerBlock);
}

TEST_F(PrefixPinsTest, AReturnCountsOnceAndEndsThePinOnlyUnderContinuum) {
  for (const bool continuum : {false, true}) {
    SCOPED_TRACE(continuum ? "continuum" : "ttl only");
    SetUp();
    PrefixPins pins(continuum);
    const std::vector<kv::BlockKey> keys = CacheChain(1, 2);
    const PinTicket ticket = pins.Pin(ConversationId(1), keys, cache());
    pins.NoteSubmitted(RequestId(50), ConversationId(1));
    pins.NoteSubmitted(RequestId(51), ConversationId(1));
    EXPECT_EQ(pins.counters().returned, 1);
    // The second request found the pin returned already: it ends nothing.
    pins.EndReturned(RequestId(51), cache());
    EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(2, kv::kMaxPriority));
    pins.EndReturned(RequestId(50), cache());
    EXPECT_EQ(Priorities(keys),
              std::vector<kv::Priority>(2, continuum ? Default() : kv::kMaxPriority));
    EXPECT_EQ(pins.empty(), continuum);
    // Expiry after the return: not counted as expired, a no-op once ended.
    pins.Expire(ConversationId(1), ticket.generation, cache());
    EXPECT_EQ(pins.counters().expired, 0);
    EXPECT_TRUE(pins.empty());
  }
}

TEST_F(PrefixPinsTest, PressureReleasesOldestPinsUntilAChunkFits) {
  PrefixPins pins(/*continuum=*/true);
  const std::vector<kv::BlockKey> a = CacheChain(1, 2);
  const std::vector<kv::BlockKey> b = CacheChain(2, 2);
  const std::vector<kv::BlockKey> c = CacheChain(3, 2);
  pins.Pin(ConversationId(1), a, cache());
  pins.Pin(ConversationId(2), b, cache());
  pins.Pin(ConversationId(3), c, cache());
  pins.NoteSubmitted(RequestId(7), ConversationId(2));
  // Room of 8 blocks, 6 pinned: a 5-block chunk needs two pins released, oldest first.
  pins.ReleaseUnderPressure(8 * kTokensPerBlock, 5 * kTokensPerBlock, cache());
  EXPECT_EQ(Priorities(a), std::vector<kv::Priority>(2, Default()));
  EXPECT_EQ(Priorities(b), std::vector<kv::Priority>(2, Default()));
  EXPECT_EQ(Priorities(c), std::vector<kv::Priority>(2, kv::kMaxPriority));
  // The returned pin (conversation 2) counts as returned, not as released.
  EXPECT_EQ(pins.counters().unpinned_under_pressure, 1);
  EXPECT_EQ(pins.pinned_tokens(), 2 * kTokensPerBlock);
  EXPECT_TRUE(cache().CheckInvariants().ok());
}

TEST_F(PrefixPinsTest, PressureReleasesNothingWithoutContinuum) {
  PrefixPins pins(/*continuum=*/false);
  const std::vector<kv::BlockKey> keys = CacheChain(1, 2);
  pins.Pin(ConversationId(1), keys, cache());
  pins.ReleaseUnderPressure(0, 5 * kTokensPerBlock, cache());
  EXPECT_EQ(Priorities(keys), std::vector<kv::Priority>(2, kv::kMaxPriority));
  EXPECT_EQ(pins.counters().unpinned_under_pressure, 0);
}

}  // namespace
}  // namespace agentkv::engine
