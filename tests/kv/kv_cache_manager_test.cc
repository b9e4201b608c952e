// Scenario tests of KvCacheManager, ported from the peer engines' suites (vLLM
// test_prefix_caching.py, SGLang test_radix_cache_unit.py, TensorRT-LLM's retention and re-queue
// cases) as they apply to a paged, two-tier block cache. Every scenario checks CheckInvariants()
// after every mutation: the fixture's domain helpers (Admit, Reserve, Commit, Finish, RunRequest,
// SetPriority, Step, Reset) do it.
#include "agentkv/kv/kv_cache_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <vector>

namespace agentkv::kv {

// Readable failure messages for the value types this suite compares.
void PrintTo(const PrefixMatch& m, std::ostream* os) {
  *os << "{device_blocks=" << m.device_blocks << " host_blocks=" << m.host_blocks << "}";
}
void PrintTo(Tier t, std::ostream* os) { *os << (t == Tier::kDevice ? "device" : "host"); }
void PrintTo(KvEventKind k, std::ostream* os) { *os << KvEventKindName(k); }
void PrintTo(const KvEvent& e, std::ostream* os) {
  *os << "{" << KvEventKindName(e.kind) << " " << e.key << " "
      << (e.tier == Tier::kDevice ? "device" : "host") << " " << e.step << "}";
}

namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr PrefixMatch Matched(int64_t device, int64_t host) { return PrefixMatch{device, host}; }

KvEvent Ev(KvEventKind kind, BlockKey key, Tier tier, int64_t step = 0) {
  return KvEvent{kind, key, tier, Step(step)};
}

std::vector<int32_t> Tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::span<const BlockKey> From(const std::vector<BlockKey>& keys, int64_t first) {
  return std::span<const BlockKey>(keys).subspan(static_cast<size_t>(first));
}

RetentionConfig WholePrompt(Priority priority, std::optional<int64_t> duration = std::nullopt) {
  RetentionConfig config;
  TokenRangeRetention range;
  range.priority = priority;
  if (duration.has_value()) range.duration = Step(*duration);
  config.token_ranges.push_back(range);
  return config;
}

class KvCacheManagerTest : public ::testing::Test {
 protected:
  static constexpr int32_t kTokensPerBlock = 4;

  static KvCacheOptions Options(int64_t device_blocks, int64_t host_blocks,
                                int32_t tokens_per_block = kTokensPerBlock) {
    KvCacheOptions o;
    o.tokens_per_block = tokens_per_block;
    o.device_blocks = device_blocks;
    o.host_blocks = host_blocks;
    o.hash_seed = 1234;
    o.event_log_capacity = 256;
    return o;
  }

  void Build(const KvCacheOptions& options) {
    StatusOr<KvCacheManager> created = KvCacheManager::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    cache_.reset();
    cache_.emplace(std::move(created).value());
    CheckInvariants();
  }
  void Build(int64_t device_blocks, int64_t host_blocks) {
    Build(Options(device_blocks, host_blocks));
  }

  KvCacheManager& cache() { return *cache_; }

  // Every invariant of the manager, plus the gauge identities stats() promises.
  void CheckInvariants() {
    const Status s = cache_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
    const KvCacheStats st = cache_->stats();
    ASSERT_EQ(st.device.free + st.device.held + st.device.evictable, st.device.capacity) << st;
    ASSERT_EQ(st.host.free + st.host.held + st.host.evictable, st.host.capacity) << st;
    ASSERT_EQ(st.host.held, 0) << st;
    ASSERT_EQ(st.host.cached, st.host.evictable) << st;
    ASSERT_LE(st.device.cached, st.device.held + st.device.evictable) << st;
    ASSERT_GE(st.device.cached, st.device.evictable) << st;
  }

  std::vector<BlockKey> Keys(const std::vector<int32_t>& tokens, uint64_t extra_key = 0) {
    return cache().hasher().KeysFromTokens(tokens, cache().tokens_per_block(), extra_key);
  }

  // ---- Request lifecycle --------------------------------------------------------------

  StatusOr<PrefixMatch> TryAdmit(int64_t id, std::span<const BlockKey> keys,
                                 const RequestOptions& options = {}) {
    StatusOr<PrefixMatch> m = cache().AddRequest(RequestId(id), keys, options);
    CheckInvariants();
    return m;
  }
  // Admits request `id` whose prompt has `prompt_tokens` tokens and full-block keys `keys`.
  PrefixMatch Admit(int64_t id, std::span<const BlockKey> keys, int64_t prompt_tokens,
                    std::optional<RetentionConfig> retention = std::nullopt) {
    RequestOptions options;
    options.prompt_tokens = prompt_tokens;
    options.retention = std::move(retention);
    const StatusOr<PrefixMatch> m = TryAdmit(id, keys, options);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : PrefixMatch{};
  }
  Status TryReserve(int64_t id, int64_t total_tokens) {
    const Status s = cache().Reserve(RequestId(id), total_tokens);
    CheckInvariants();
    return s;
  }
  void Reserve(int64_t id, int64_t total_tokens) {
    const Status s = TryReserve(id, total_tokens);
    EXPECT_TRUE(s.ok()) << s;
  }
  Status TryCommit(int64_t id, std::span<const BlockKey> keys) {
    const Status s = cache().Commit(RequestId(id), keys);
    CheckInvariants();
    return s;
  }
  void Commit(int64_t id, std::span<const BlockKey> keys) {
    const Status s = TryCommit(id, keys);
    EXPECT_TRUE(s.ok()) << s;
  }
  Status TryFinish(int64_t id) {
    const Status s = cache().Release(RequestId(id));
    CheckInvariants();
    return s;
  }
  void Finish(int64_t id) {
    const Status s = TryFinish(id);
    EXPECT_TRUE(s.ok()) << s;
  }

  // A whole prefill-only request: admit the prompt, hold `tokens` tokens, commit the full
  // blocks after the matched prefix, release. Returns what the admission matched.
  PrefixMatch RunRequest(int64_t id, const std::vector<BlockKey>& keys, int64_t tokens,
                         std::optional<RetentionConfig> retention = std::nullopt) {
    const PrefixMatch m = Admit(id, keys, tokens, std::move(retention));
    Reserve(id, tokens);
    Commit(id, From(keys, m.total_blocks()));
    Finish(id);
    return m;
  }

  // ---- Priorities, time, reset ---------------------------------------------------------

  Status TrySetPriority(BlockKey key, Priority p, std::optional<int64_t> duration = std::nullopt,
                        bool evict_first = false) {
    std::optional<Step> d;
    if (duration.has_value()) d = Step(*duration);
    const Status s = cache().SetPriority(key, p, d, evict_first);
    CheckInvariants();
    return s;
  }
  void SetPriority(BlockKey key, Priority p, std::optional<int64_t> duration = std::nullopt,
                   bool evict_first = false) {
    const Status s = TrySetPriority(key, p, duration, evict_first);
    EXPECT_TRUE(s.ok()) << s;
  }
  Priority PriorityOf(BlockKey key) {
    const StatusOr<Priority> p = cache().GetPriority(key);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : -1;
  }
  void Advance(int steps = 1) {
    for (int i = 0; i < steps; ++i) {
      cache().Step();
      CheckInvariants();
    }
  }
  Status TryReset() {
    const Status s = cache().Reset();
    CheckInvariants();
    return s;
  }

  std::vector<KvEvent> Events() { return cache().TakeEvents(); }
  // Keys of the events of `kind`, in order.
  static std::vector<BlockKey> KeysOf(const std::vector<KvEvent>& events, KvEventKind kind) {
    std::vector<BlockKey> keys;
    for (const KvEvent& e : events) {
      if (e.kind == kind) keys.push_back(e.key);
    }
    return keys;
  }

  std::optional<KvCacheManager> cache_;
};

// ---- Matching -----------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, HitMissAndPartialPrefixMatch) {
  Build(16, 0);
  const std::vector<int32_t> a = Tokens(0, 12);
  const std::vector<BlockKey> ka = Keys(a);
  ASSERT_EQ(ka.size(), 3u);

  EXPECT_EQ(RunRequest(1, ka, 12), Matched(0, 0));  // cold miss
  EXPECT_EQ(cache().Match(ka), Matched(3, 0));      // full hit

  // Shares the first two blocks with `a`, then diverges.
  const std::vector<int32_t> b = Concat(Tokens(0, 8), Tokens(500, 12));
  const std::vector<BlockKey> kb = Keys(b);
  ASSERT_EQ(kb.size(), 5u);
  EXPECT_EQ(cache().Match(kb), Matched(2, 0));
  EXPECT_EQ(cache().Match(Keys(Tokens(1000, 12))), Matched(0, 0));

  // Match has no side effects.
  const KvCacheStats before = cache().stats();
  EXPECT_EQ(cache().Match(kb), Matched(2, 0));
  EXPECT_EQ(cache().stats(), before);

  EXPECT_EQ(Admit(2, kb, 20), Matched(2, 0));
  Reserve(2, 20);
  Commit(2, From(kb, 2));
  Finish(2);
  EXPECT_EQ(cache().Match(kb), Matched(5, 0));
  EXPECT_EQ(cache().Match(ka), Matched(3, 0));

  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.lookup_blocks, 3 + 5);
  EXPECT_EQ(s.matched_device_blocks, 2);
  EXPECT_EQ(s.matched_device_tokens, 8);
  EXPECT_EQ(s.matched_host_blocks, 0);
  EXPECT_EQ(s.uncached_tokens, 12 + (20 - 8));
  EXPECT_EQ(s.stored_blocks, 3 + 3);
  EXPECT_EQ(s.device.cached, 6);
  EXPECT_EQ(s.device.evictable, 6);
  EXPECT_EQ(s.device.free, 10);
}

TEST_F(KvCacheManagerTest, OnlyFullBlocksMatchSoMatchesArePageAligned) {
  // SGLang's page-aligned cases: (page size, tokens) -> matched tokens.
  struct Case {
    int32_t tokens_per_block;
    int32_t tokens;
    int64_t matched_tokens;
  };
  for (const Case c : {Case{1, 5, 5}, Case{2, 5, 4}, Case{4, 6, 4}}) {
    SCOPED_TRACE(testing::Message() << "page " << c.tokens_per_block << " tokens " << c.tokens);
    Build(Options(16, 0, c.tokens_per_block));
    const std::vector<int32_t> prompt = Tokens(0, c.tokens);
    RunRequest(1, Keys(prompt), c.tokens);
    EXPECT_EQ(cache().stats().stored_blocks, c.matched_tokens / c.tokens_per_block);
    EXPECT_EQ(cache().stats().device.cached, c.matched_tokens / c.tokens_per_block);

    // A longer prompt with the same first `tokens` tokens reuses only the full blocks: the
    // tokens of the trailing partial block are recomputed.
    const std::vector<int32_t> longer = Concat(prompt, Tokens(100, 3));
    const std::vector<BlockKey> keys = Keys(longer);
    EXPECT_EQ(cache().Match(keys).device_blocks * c.tokens_per_block, c.matched_tokens);
    const PrefixMatch m = Admit(2, keys, static_cast<int64_t>(longer.size()));
    EXPECT_EQ(m.device_blocks * c.tokens_per_block, c.matched_tokens);
    EXPECT_EQ(cache().stats().matched_device_tokens, c.matched_tokens);
    EXPECT_EQ(cache().stats().uncached_tokens,
              c.tokens + static_cast<int64_t>(longer.size()) - c.matched_tokens);
    Finish(2);
  }
}

TEST_F(KvCacheManagerTest, DifferentExtraKeysNeverShareBlocks) {
  Build(16, 0);
  const std::vector<int32_t> tokens = Tokens(0, 8);
  const std::vector<BlockKey> salted1 = Keys(tokens, /*extra_key=*/1);
  const std::vector<BlockKey> salted2 = Keys(tokens, /*extra_key=*/2);
  const std::vector<BlockKey> plain = Keys(tokens);

  RunRequest(1, salted1, 8);
  EXPECT_EQ(cache().Match(salted1), Matched(2, 0));
  EXPECT_EQ(cache().Match(salted2), Matched(0, 0));
  EXPECT_EQ(cache().Match(plain), Matched(0, 0));
  EXPECT_EQ(RunRequest(2, salted2, 8), Matched(0, 0));
  EXPECT_EQ(RunRequest(3, plain, 8), Matched(0, 0));
  EXPECT_EQ(cache().stats().device.cached, 6);
  EXPECT_EQ(cache().stats().stored_blocks, 6);

  // The salt enters through the chain's root only (vLLM: cache_salt in block 0 only); the
  // next block chains on its parent with the tokens alone.
  const std::vector<int32_t> second(tokens.begin() + 4, tokens.end());
  EXPECT_EQ(salted1[1], BlockKeyHasher::TokenBlockKey(salted1[0], second));
  EXPECT_NE(salted1[0], salted2[0]);
}

// ---- Eviction order -------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, EvictionOrderIsLowerPriorityFirstThenLeastRecentlyUsed) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  const std::vector<BlockKey> c = Keys(Tokens(300, 4));
  const std::vector<BlockKey> d = Keys(Tokens(400, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, c, 4);
  RunRequest(4, d, 4);
  // A hit makes `a` the most recently used: LRU order is now b, c, d, a.
  EXPECT_EQ(RunRequest(5, a, 4), Matched(1, 0));
  // Priority 20 for c then a: bucket 20 = (c, a), bucket 35 = (b, d).
  SetPriority(c[0], 20);
  SetPriority(a[0], 20);
  Events();

  // One block at a time, so each Reserve evicts exactly the next victim.
  Admit(6, {}, 0);
  const std::vector<BlockKey> expected = {c[0], a[0], b[0], d[0]};
  for (int64_t n = 1; n <= 4; ++n) {
    Reserve(6, n * kTokensPerBlock);
    const std::vector<KvEvent> events = Events();
    ASSERT_THAT(events, ElementsAre(Ev(KvEventKind::kDropped, expected[static_cast<size_t>(n - 1)],
                                       Tier::kDevice)))
        << "eviction " << n;
    EXPECT_EQ(cache().FindTier(expected[static_cast<size_t>(n - 1)]), std::nullopt);
    EXPECT_EQ(cache().stats().device_evictions, n);
  }
  Finish(6);
}

TEST_F(KvCacheManagerTest, HeldBlocksAreNeverEvicted) {
  Build(4, 0);
  const std::vector<BlockKey> held = Keys(Tokens(0, 8));
  const std::vector<BlockKey> idle = Keys(Tokens(100, 4));
  // Request 1 is still running and holds two committed blocks.
  Admit(1, held, 8);
  Reserve(1, 8);
  Commit(1, held);
  RunRequest(2, idle, 4);  // one evictable block; one block free

  // Three blocks would need a held one: refused, and nothing was evicted for it.
  Admit(3, {}, 0);
  const Status s = TryReserve(3, 12);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(cache().FindTier(idle[0]), Tier::kDevice);
  // Two fit: the free block and the idle one.
  Reserve(3, 8);
  EXPECT_EQ(cache().FindTier(idle[0]), std::nullopt);
  EXPECT_EQ(cache().stats().device.held, 4);

  Admit(4, {}, 0);
  EXPECT_EQ(TryReserve(4, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache().Match(held), Matched(2, 0));
  EXPECT_EQ(cache().FindTier(held[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(held[1]), Tier::kDevice);

  // Once request 1 ends its blocks become victims, leaf first.
  Finish(1);
  Reserve(4, 1);
  EXPECT_EQ(cache().FindTier(held[1]), std::nullopt);
  EXPECT_EQ(cache().FindTier(held[0]), Tier::kDevice);
  Finish(3);
  Finish(4);
}

TEST_F(KvCacheManagerTest, FailedAllocationLeavesEveryCountUnchanged) {
  Build(4, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> c = Keys(Tokens(100, 8));
  const std::vector<BlockKey> d = Keys(Tokens(200, 4));
  const std::vector<BlockKey> e = Keys(Tokens(300, 20));
  RunRequest(1, a, 8);
  RunRequest(2, c, 8);
  RunRequest(3, d, 4);  // offloads a[1]
  // Request 10 holds a[0] and onboards a[1] (offloading c[1]): two held, two evictable.
  EXPECT_EQ(Admit(10, a, 8), Matched(1, 1));
  SetPriority(c[0], 60, /*duration=*/5);
  EXPECT_EQ(Admit(11, e, 20), Matched(0, 0));
  Events();

  const KvCacheStats stats = cache().stats();
  ASSERT_EQ(stats.device.held, 2);
  ASSERT_EQ(stats.device.evictable, 2);
  ASSERT_EQ(stats.host.cached, 1);
  const std::vector<PrefixMatch> matches = {cache().Match(a), cache().Match(c), cache().Match(d),
                                            cache().Match(e)};

  // Five blocks are needed, two can be freed: refused, with nothing evicted or allocated.
  const Status s = TryReserve(11, 20);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("needs 5 more blocks"));
  // A held request asking for more is refused the same way.
  EXPECT_EQ(TryReserve(10, 28).code(), StatusCode::kResourceExhausted);

  EXPECT_EQ(cache().stats(), stats);
  EXPECT_THAT((std::vector<PrefixMatch>{cache().Match(a), cache().Match(c), cache().Match(d),
                                        cache().Match(e)}),
              ElementsAreArray(matches));
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(PriorityOf(c[0]), 60);
  EXPECT_EQ(cache().active_requests(), 2);

  // The cache is still usable: two blocks do fit, and the victims are c[0] and d[0].
  Reserve(11, 8);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kOffloaded), ElementsAre(d[0], c[0]));
  Finish(10);
  Finish(11);
}

TEST_F(KvCacheManagerTest, PriorityChangeRequeuesAndDemotionToZeroDropsEvenWithAHostTier) {
  // TensorRT-LLM issue #13080: a demotion must move the block to its new bucket, and at
  // priority 0 the block is below the offload threshold, so it is dropped, not offloaded.
  Build(4, 4);
  std::vector<std::vector<BlockKey>> chains;
  for (int32_t i = 0; i < 4; ++i) {
    chains.push_back(Keys(Tokens(100 * (i + 1), 4)));
    RunRequest(i + 1, chains.back(), 4);
  }
  const BlockKey a = chains[0][0], b = chains[1][0], d = chains[3][0];
  SetPriority(b, 0);                                      // back of bucket 0
  SetPriority(d, 0, std::nullopt, /*evict_first=*/true);  // front of bucket 0
  EXPECT_EQ(PriorityOf(d), 0);
  Events();

  Admit(9, {}, 0);
  Reserve(9, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, d, Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(d), std::nullopt);
  Reserve(9, 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, b, Tier::kDevice)));
  // The next victim, `a` at the default priority 35, does go to the host.
  Reserve(9, 12);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, a, Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(a), Tier::kHost);

  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 3);
  EXPECT_EQ(s.host.cached, 1);
  Finish(9);
}

TEST_F(KvCacheManagerTest, PriorityChangeOfAHostBlockRequeuesItOnTheHost) {
  Build(2, 2);
  const std::vector<BlockKey> a = Keys(Tokens(100, 4));
  const std::vector<BlockKey> b = Keys(Tokens(200, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, Keys(Tokens(300, 8)), 8);  // offloads a then b; host LRU order a, b
  ASSERT_EQ(cache().FindTier(a[0]), Tier::kHost);
  ASSERT_EQ(cache().FindTier(b[0]), Tier::kHost);
  SetPriority(b[0], 10);  // b becomes the host tier's victim
  Events();
  RunRequest(4, Keys(Tokens(400, 4)), 4);
  const std::vector<KvEvent> events = Events();
  EXPECT_THAT(KeysOf(events, KvEventKind::kEvicted), ElementsAre(b[0]));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(b[0]), std::nullopt);
}

TEST_F(KvCacheManagerTest, UnderEqualPriorityLruEvictsLeavesFirst) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 12);
  RunRequest(2, b, 4);
  // Reusing a's first two blocks refreshes them, deepest released first, so each parent stays
  // more recent than its child: LRU order a[2], b[0], a[1], a[0].
  EXPECT_EQ(RunRequest(3, std::vector<BlockKey>(a.begin(), a.begin() + 2), 8), Matched(2, 0));
  Admit(4, {}, 0);
  const std::vector<PrefixMatch> a_after = {Matched(2, 0), Matched(2, 0), Matched(1, 0),
                                            Matched(0, 0)};
  for (int64_t n = 1; n <= 4; ++n) {
    Reserve(4, n * kTokensPerBlock);
    EXPECT_EQ(cache().Match(a), a_after[static_cast<size_t>(n - 1)]) << "after " << n;
    EXPECT_EQ(cache().Match(b), n < 2 ? Matched(1, 0) : Matched(0, 0)) << "after " << n;
    EXPECT_EQ(cache().stats().drops, n) << "a leaf eviction never cascades";
  }
  Finish(4);
}

// ---- Retention priorities and durations ------------------------------------------------------

TEST_F(KvCacheManagerTest, RetentionDurationRevertsAtExactlyStartPlusDuration) {
  Build(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  Advance(2);
  ASSERT_EQ(cache().current_step(), Step(2));
  RunRequest(1, a, 8, WholePrompt(90, /*duration=*/3));  // retained from step 2 to step 5
  for (int64_t step = 2; step < 5; ++step) {
    EXPECT_EQ(cache().current_step(), Step(step));
    EXPECT_EQ(PriorityOf(a[0]), 90) << "step " << step;
    EXPECT_EQ(PriorityOf(a[1]), 90) << "step " << step;
    EXPECT_EQ(cache().stats().expirations, 0);
    Advance();
  }
  EXPECT_EQ(cache().current_step(), Step(5));
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(a[1]), kDefaultPriority);
  EXPECT_EQ(cache().stats().expirations, 2);
  Advance(10);
  EXPECT_EQ(cache().stats().expirations, 2);
}

TEST_F(KvCacheManagerTest, SetPriorityDurationRevertsAtExactlyStartPlusDuration) {
  Build(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  Advance();
  SetPriority(a[0], 70, /*duration=*/4);  // step 1 -> reverts at step 5
  SetPriority(b[0], 80, /*duration=*/2);
  SetPriority(b[0], 60);  // no duration: cancels b's pending expiry
  Advance(3);
  EXPECT_EQ(cache().current_step(), Step(4));
  EXPECT_EQ(PriorityOf(a[0]), 70);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(b[0]), 60);
  EXPECT_EQ(cache().stats().expirations, 1);

  // Setting a duration again restarts the count from the current step.
  SetPriority(a[0], 90, 2);  // step 5 -> 7
  Advance();
  SetPriority(a[0], 95, 2);  // step 6 -> 8
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), 95);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority);
  EXPECT_EQ(cache().stats().expirations, 2);
}

TEST_F(KvCacheManagerTest, ExpiredPriorityRequeuesTheBlockForEviction) {
  Build(2, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4, WholePrompt(90, /*duration=*/1));
  RunRequest(2, b, 4);
  SetPriority(b[0], 40);
  // Retained at 90, `a` would outlive `b` at 40; back at 35 after its step, it goes first.
  Advance();
  Events();
  RunRequest(3, Keys(Tokens(200, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
}

TEST_F(KvCacheManagerTest, DurationRevertsToTheConfiguredDefaultPriority) {
  KvCacheOptions o = Options(4, 0);
  o.default_priority = 50;
  Build(o);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  RunRequest(1, a, 8);
  EXPECT_EQ(PriorityOf(a[0]), 50);  // new blocks get the configured default
  SetPriority(a[0], 10, 1);
  Advance();
  EXPECT_EQ(PriorityOf(a[0]), 50);
}

TEST_F(KvCacheManagerTest, DecodeBlocksGetTheDecodePriority) {
  Build(8, 0);
  const std::vector<int32_t> sequence = Tokens(0, 16);  // 8 prompt + 8 generated tokens
  const std::vector<BlockKey> keys = Keys(sequence);
  RetentionConfig retention = WholePrompt(50);
  retention.decode_priority = 80;
  const std::vector<BlockKey> prompt_keys(keys.begin(), keys.begin() + 2);
  Admit(1, prompt_keys, 8, retention);
  Reserve(1, 16);
  Commit(1, keys);
  Finish(1);
  EXPECT_EQ(PriorityOf(keys[0]), 50);
  EXPECT_EQ(PriorityOf(keys[1]), 50);
  EXPECT_EQ(PriorityOf(keys[2]), 80);
  EXPECT_EQ(PriorityOf(keys[3]), 80);
}

TEST_F(KvCacheManagerTest, RetentionRangeAppliesToTheBlockWhoseFirstTokenIsInIt) {
  Build(8, 0);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 16));
  RetentionConfig retention;
  TokenRangeRetention range;
  range.token_start = 2;  // tokens 2 and 3 are in block 0, whose first token is not
  range.token_end = 9;    // token 8 starts block 2
  range.priority = 60;
  retention.token_ranges.push_back(range);
  RunRequest(1, keys, 16, retention);
  EXPECT_EQ(PriorityOf(keys[0]), kDefaultPriority);
  EXPECT_EQ(PriorityOf(keys[1]), 60);
  EXPECT_EQ(PriorityOf(keys[2]), 60);
  EXPECT_EQ(PriorityOf(keys[3]), kDefaultPriority);
}

TEST_F(KvCacheManagerTest, RequestWithoutRetentionLeavesReusedBlocksPrioritiesUnchanged) {
  Build(8, 0);
  const std::vector<int32_t> prompt = Tokens(0, 8);
  const std::vector<BlockKey> first = Keys(prompt);
  RunRequest(1, first, 8, WholePrompt(70));
  const std::vector<BlockKey> longer = Keys(Concat(prompt, Tokens(100, 4)));
  EXPECT_EQ(RunRequest(2, longer, 12), Matched(2, 0));
  EXPECT_EQ(PriorityOf(longer[0]), 70);
  EXPECT_EQ(PriorityOf(longer[1]), 70);
  EXPECT_EQ(PriorityOf(longer[2]), kDefaultPriority);  // new block: the cache default

  // A config that does not cover the reused blocks leaves them alone as well.
  RetentionConfig tail;
  TokenRangeRetention range;
  range.token_start = 8;
  range.priority = 20;
  tail.token_ranges.push_back(range);
  EXPECT_EQ(RunRequest(3, longer, 12, tail), Matched(3, 0));
  EXPECT_EQ(PriorityOf(longer[0]), 70);
  EXPECT_EQ(PriorityOf(longer[1]), 70);
  EXPECT_EQ(PriorityOf(longer[2]), 20);
}

// ---- Offload, drop and onboard --------------------------------------------------------------

TEST_F(KvCacheManagerTest, OffloadsAtOrAboveTheThresholdAndDropsBelowIt) {
  Build(2, 4);
  const std::vector<BlockKey> at29 = Keys(Tokens(100, 4));
  const std::vector<BlockKey> at30 = Keys(Tokens(200, 4));
  RunRequest(1, at29, 4);
  RunRequest(2, at30, 4);
  SetPriority(at29[0], 29);
  SetPriority(at30[0], 30);
  Events();

  Admit(3, {}, 0);
  Reserve(3, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, at29[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(at29[0]), std::nullopt);
  EXPECT_EQ(cache().stats().drops, 1);
  EXPECT_EQ(cache().stats().offloads, 0);

  Reserve(3, 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, at30[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(at30[0]), Tier::kHost);
  EXPECT_EQ(PriorityOf(at30[0]), 30);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 1);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 2);
  EXPECT_EQ(s.host.cached, 1);
  EXPECT_EQ(s.host.free, 3);
  EXPECT_EQ(cache().Match(at30), Matched(0, 1));
  Finish(3);
}

TEST_F(KvCacheManagerTest, ThresholdAboveTheMaximumPriorityNeverOffloads) {
  KvCacheOptions o = Options(1, 4);
  o.offload_threshold = 101;
  Build(o);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  RunRequest(1, a, 4);
  SetPriority(a[0], kMaxPriority);
  RunRequest(2, Keys(Tokens(100, 4)), 4);
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().stats().offloads, 0);
  EXPECT_EQ(cache().stats().drops, 1);
}

TEST_F(KvCacheManagerTest, HostHitOnboardsTheBlocks) {
  Build(2, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> b = Keys(Tokens(100, 8));
  RunRequest(1, a, 8);
  RunRequest(2, b, 8);  // offloads a[1], then a[0]
  EXPECT_EQ(cache().Match(a), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kHost);
  Events();

  EXPECT_EQ(Admit(3, a, 10), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kDevice);
  // Each onboarded block took the device slot of one of b's blocks, which went to the host.
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, b[1], Tier::kDevice),
                                    Ev(KvEventKind::kOnboarded, a[0], Tier::kHost),
                                    Ev(KvEventKind::kOffloaded, b[0], Tier::kDevice),
                                    Ev(KvEventKind::kOnboarded, a[1], Tier::kHost)));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.onboards, 2);
  EXPECT_EQ(s.matched_host_blocks, 2);
  EXPECT_EQ(s.matched_host_tokens, 8);
  EXPECT_EQ(s.uncached_tokens, 8 + 8 + 2);
  EXPECT_EQ(s.device.held, 2);
  EXPECT_EQ(s.host.cached, 2);
  EXPECT_EQ(cache().Match(b), Matched(0, 2));

  // The onboarded blocks are held, so the request cannot evict them for its own tail.
  EXPECT_EQ(TryReserve(3, 10).code(), StatusCode::kResourceExhausted);
  Finish(3);
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
}

TEST_F(KvCacheManagerTest, OnboardingStopsWhenTheDeviceCannotMakeRoom) {
  Build(4, 8);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> x = Keys(Tokens(50, 4));
  const std::vector<BlockKey> y = Keys(Tokens(100, 12));
  RunRequest(1, a, 12);
  RunRequest(2, x, 4);
  Admit(3, y, 12);
  Reserve(3, 12);  // evicts a[2], a[1], a[0] to the host
  Commit(3, y);
  ASSERT_EQ(cache().Match(a), Matched(0, 3));

  // Only x can make room: a[0] is onboarded in its place, a[1] and a[2] stay on the host.
  EXPECT_EQ(Admit(4, a, 12), Matched(0, 1));
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(a[2]), Tier::kHost);
  EXPECT_EQ(cache().FindTier(x[0]), Tier::kHost);
  EXPECT_EQ(cache().stats().onboards, 1);
  EXPECT_EQ(cache().stats().uncached_tokens, 12 + 4 + 12 + 8);
  EXPECT_EQ(TryReserve(4, 12).code(), StatusCode::kResourceExhausted);
  Finish(3);
  Finish(4);
}

TEST_F(KvCacheManagerTest, CommitOfAKeyCachedOnTheHostPromotesTheHostCopy) {
  Build(4, 8);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> x = Keys(Tokens(50, 4));
  const std::vector<BlockKey> y = Keys(Tokens(100, 12));
  RunRequest(1, a, 12);
  RunRequest(2, x, 4);
  Admit(3, y, 12);
  Reserve(3, 12);
  Commit(3, y);
  EXPECT_EQ(Admit(4, a, 12), Matched(0, 1));  // a[1], a[2] stay on the host
  Finish(3);
  // Request 4 computes blocks 1 and 2 itself (it could not onboard them) and commits them:
  // their keys are cached on the host under its block 0, so the host copies are promoted
  // into the slots its own blocks occupied.
  Reserve(4, 12);
  ASSERT_EQ(cache().FindTier(a[1]), Tier::kHost);
  ASSERT_EQ(cache().FindTier(a[2]), Tier::kHost);
  const int64_t stored = cache().stats().stored_blocks;
  const int64_t onboards = cache().stats().onboards;
  const int64_t free_before = cache().stats().device.free;
  Events();
  Commit(4, From(a, 1));
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOnboarded, a[1], Tier::kHost),
                                    Ev(KvEventKind::kOnboarded, a[2], Tier::kHost)));
  EXPECT_EQ(cache().stats().stored_blocks, stored);
  EXPECT_EQ(cache().stats().onboards, onboards + 2);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[2]), Tier::kDevice);
  EXPECT_EQ(cache().stats().device.held, 3);
  EXPECT_EQ(cache().stats().device.free, free_before);
  Finish(4);
  EXPECT_EQ(cache().Match(a), Matched(3, 0));
}

// ---- Tier sizes of zero ---------------------------------------------------------------------

TEST_F(KvCacheManagerTest, NoDeviceBlocksRefusesEveryReserveCleanly) {
  Build(0, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  EXPECT_EQ(Admit(1, a, 8), Matched(0, 0));
  Reserve(1, 0);  // holding nothing more is fine
  const Status s = TryReserve(1, 1);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(TryCommit(1, a).code(), StatusCode::kFailedPrecondition);
  Commit(1, {});
  Finish(1);
  const KvCacheStats st = cache().stats();
  EXPECT_EQ(st.device.capacity, 0);
  EXPECT_EQ(st.device.free, 0);
  EXPECT_EQ(st.stored_blocks, 0);
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_TRUE(TryReset().ok());
}

TEST_F(KvCacheManagerTest, NoHostBlocksDropsEveryEvictedBlock) {
  Build(1, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  RunRequest(1, a, 4);
  SetPriority(a[0], kMaxPriority);
  Events();
  RunRequest(2, Keys(Tokens(100, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.offloads, 0);
  EXPECT_EQ(s.drops, 1);
  EXPECT_EQ(s.host.capacity, 0);
  EXPECT_EQ(s.host.cached, 0);
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
}

// ---- Reset ---------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, ResetIsRefusedWhileBlocksAreHeldAndThenEmptiesEverything) {
  Build(2, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  const std::vector<BlockKey> b = Keys(Tokens(100, 8));
  RunRequest(1, a, 8, WholePrompt(60, /*duration=*/3));
  Admit(2, b, 8);
  Reserve(2, 8);
  Commit(2, b);  // offloads a
  Events();

  const KvCacheStats before = cache().stats();
  const Status refused = TryReset();
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(cache().stats(), before);
  EXPECT_EQ(cache().Match(a), Matched(0, 2));
  EXPECT_EQ(cache().Match(b), Matched(2, 0));
  EXPECT_THAT(Events(), IsEmpty());

  Finish(2);
  ASSERT_TRUE(TryReset().ok());
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kCleared, BlockKey(), Tier::kDevice)));
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_EQ(cache().Match(b), Matched(0, 0));
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().GetPriority(b[0]).status().code(), StatusCode::kNotFound);
  const KvCacheStats after = cache().stats();
  EXPECT_EQ(after.device, (TierGauges{2, 2, 0, 0, 0}));
  EXPECT_EQ(after.host, (TierGauges{4, 4, 0, 0, 0}));
  // Counters are cumulative and survive a reset.
  EXPECT_EQ(after.stored_blocks, 4);
  EXPECT_EQ(after.lookups, 2);
  EXPECT_EQ(after.offloads, 2);
  // The pending retention expiry went with the blocks.
  Advance(5);
  EXPECT_EQ(cache().stats().expirations, 0);
  // And the cache fills again from scratch.
  EXPECT_EQ(RunRequest(3, a, 8), Matched(0, 0));
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
}

// ---- Cascades -------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, LowPriorityParentIsEvictedWithItsDeviceDependents) {
  // A parent demoted below its children is the victim; its dependents cannot stay without it,
  // and the dependents of a dropped block are dropped too, whatever their own priority.
  Build(4, 4);
  const std::vector<BlockKey> a = Keys(Tokens(0, 12));
  const std::vector<BlockKey> c = Keys(Tokens(100, 4));
  RunRequest(1, a, 12);
  RunRequest(2, c, 4);
  SetPriority(a[0], 10);
  Events();

  RunRequest(3, Keys(Tokens(200, 4)), 4);  // needs one block, frees three
  const std::vector<KvEvent> events = Events();
  EXPECT_THAT(KeysOf(events, KvEventKind::kDropped), ElementsAre(a[0], a[1], a[2]));
  EXPECT_THAT(KeysOf(events, KvEventKind::kOffloaded), IsEmpty());
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  EXPECT_EQ(cache().FindTier(c[0]), Tier::kDevice);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.device_evictions, 3);
  EXPECT_EQ(s.drops, 3);
  EXPECT_EQ(s.offloads, 0);
  EXPECT_EQ(s.device.free, 2);
  EXPECT_EQ(s.host.cached, 0);
}

TEST_F(KvCacheManagerTest, DroppingAParentAlsoDropsItsHostDependents) {
  Build(2, 4);
  const std::vector<BlockKey> d = Keys(Tokens(0, 8));
  const std::vector<BlockKey> e = Keys(Tokens(100, 4));
  const std::vector<BlockKey> f = Keys(Tokens(200, 4));
  RunRequest(1, d, 8);
  RunRequest(2, e, 4);  // offloads the leaf d[1]
  ASSERT_EQ(cache().FindTier(d[0]), Tier::kDevice);
  ASSERT_EQ(cache().FindTier(d[1]), Tier::kHost);
  SetPriority(d[0], 5);
  Events();

  RunRequest(3, f, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, d[0], Tier::kDevice),
                                    Ev(KvEventKind::kDropped, d[1], Tier::kHost),
                                    Ev(KvEventKind::kStored, f[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(d[1]), std::nullopt);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.offloads, 1);
  EXPECT_EQ(s.device_evictions, 2);  // d[1] offloaded earlier, d[0] dropped now
  EXPECT_EQ(s.host.cached, 0);
  EXPECT_EQ(s.host.free, 4);
}

TEST_F(KvCacheManagerTest, OffloadableParentTakesItsDeviceSubtreeToTheHostPostOrder) {
  // Tree: r with children x (older) and z (newer). Demoted to 31 (still >= 30), r is the
  // victim and its device descendants follow it to the host, children before parents and
  // newer children first, so the host tier stays closed under prefixes at every moment.
  Build(4, 8);
  const std::vector<int32_t> root = Tokens(0, 4);
  const std::vector<BlockKey> rx = Keys(Concat(root, Tokens(100, 4)));
  const std::vector<BlockKey> rz = Keys(Concat(root, Tokens(200, 4)));
  const std::vector<BlockKey> other = Keys(Tokens(300, 4));
  RunRequest(1, rx, 8);
  EXPECT_EQ(RunRequest(2, rz, 8), Matched(1, 0));
  RunRequest(3, other, 4);
  SetPriority(rx[0], 31);
  Events();

  const std::vector<BlockKey> w = Keys(Tokens(400, 4));
  RunRequest(4, w, 4);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kOffloaded, rz[1], Tier::kDevice),
                                    Ev(KvEventKind::kOffloaded, rx[1], Tier::kDevice),
                                    Ev(KvEventKind::kOffloaded, rx[0], Tier::kDevice),
                                    Ev(KvEventKind::kStored, w[0], Tier::kDevice)));
  EXPECT_EQ(cache().Match(rx), Matched(0, 2));
  EXPECT_EQ(cache().Match(rz), Matched(0, 2));
  EXPECT_EQ(cache().FindTier(other[0]), Tier::kDevice);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.offloads, 3);
  EXPECT_EQ(s.drops, 0);
  EXPECT_EQ(s.device.free, 2);
  EXPECT_EQ(s.host.cached, 3);
  // The subtree comes back whole on the next hit.
  EXPECT_EQ(RunRequest(5, rz, 8), Matched(0, 2));
}

TEST_F(KvCacheManagerTest, OffloadIntoAFullHostEvictsTheHostTiersOwnVictim) {
  Build(2, 1);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, a, 4);
  RunRequest(2, b, 4);
  RunRequest(3, Keys(Tokens(200, 4)), 4);  // a -> host
  Events();
  RunRequest(4, Keys(Tokens(300, 4)), 4);  // b -> host, evicting a from it
  const std::vector<KvEvent> events = Events();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], Ev(KvEventKind::kEvicted, a[0], Tier::kHost));
  EXPECT_EQ(events[1], Ev(KvEventKind::kOffloaded, b[0], Tier::kDevice));
  EXPECT_EQ(cache().FindTier(a[0]), std::nullopt);
  EXPECT_EQ(cache().FindTier(b[0]), Tier::kHost);
  EXPECT_EQ(cache().stats().drops, 1);
  EXPECT_EQ(cache().stats().offloads, 2);
}

TEST_F(KvCacheManagerTest, HostEvictionOfAParentDropsItsHostDependents) {
  Build(2, 2);
  const std::vector<BlockKey> pq = Keys(Tokens(0, 8));
  const std::vector<BlockKey> x = Keys(Tokens(100, 8));
  const std::vector<BlockKey> y = Keys(Tokens(200, 4));
  RunRequest(1, pq, 8);
  RunRequest(2, x, 8);  // pq[1] then pq[0] to the host, which is now full
  ASSERT_EQ(cache().Match(pq), Matched(0, 2));
  SetPriority(pq[0], 31);  // the host tier's next victim, ahead of its child
  Events();

  RunRequest(3, y, 4);  // x[1] must go to the host: pq[0] leaves it, and pq[1] with it
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kEvicted, pq[0], Tier::kHost),
                                    Ev(KvEventKind::kDropped, pq[1], Tier::kHost),
                                    Ev(KvEventKind::kOffloaded, x[1], Tier::kDevice),
                                    Ev(KvEventKind::kStored, y[0], Tier::kDevice)));
  EXPECT_EQ(cache().Match(pq), Matched(0, 0));
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.drops, 2);
  EXPECT_EQ(s.device_evictions, 3) << "host-tier drops are not device evictions";
  EXPECT_EQ(s.host.cached, 1);
  EXPECT_EQ(s.host.free, 1);
}

// ---- Sharing and partial blocks -----------------------------------------------------------

TEST_F(KvCacheManagerTest, CommittingAKeyAnotherRequestCommittedSharesTheBlock) {
  Build(6, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  // Both requests start before either has computed the prompt: both miss.
  EXPECT_EQ(Admit(1, a, 8), Matched(0, 0));
  EXPECT_EQ(Admit(2, a, 8), Matched(0, 0));
  Reserve(1, 8);
  Reserve(2, 8);
  EXPECT_EQ(cache().stats().device.held, 4);
  Commit(1, a);
  Commit(2, a);  // switches to request 1's blocks and frees its own
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(a[0], a[1]));
  KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stored_blocks, 2);
  EXPECT_EQ(s.device.held, 2);
  EXPECT_EQ(s.device.cached, 2);
  EXPECT_EQ(s.device.free, 4);

  // Still held by request 2 after request 1 ends: six blocks cannot be found.
  Finish(1);
  EXPECT_EQ(cache().stats().device.held, 2);
  EXPECT_EQ(cache().stats().device.evictable, 0);
  Admit(3, {}, 0);
  EXPECT_EQ(TryReserve(3, 24).code(), StatusCode::kResourceExhausted);
  Finish(2);
  EXPECT_EQ(cache().stats().device.evictable, 2);
  Reserve(3, 24);
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
  Finish(3);
}

TEST_F(KvCacheManagerTest, CommittingAKeyThatBecameEvictableRevivesTheCachedBlock) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  Admit(1, a, 4);
  Admit(2, a, 4);
  Reserve(1, 4);
  Reserve(2, 4);
  Commit(1, a);
  Finish(1);
  EXPECT_EQ(cache().stats().device.evictable, 1);
  Commit(2, a);
  EXPECT_EQ(cache().stats().device.evictable, 0);
  EXPECT_EQ(cache().stats().device.held, 1);
  EXPECT_EQ(cache().stats().device.free, 3);
  Finish(2);
  EXPECT_EQ(cache().Match(a), Matched(1, 0));
}

TEST_F(KvCacheManagerTest, PartialLastBlockIsNotCommittedAndIsFreedOnRelease) {
  Build(8, 0);
  const std::vector<int32_t> tokens = Tokens(0, 10);  // two full blocks and 2 tokens
  const std::vector<BlockKey> keys = Keys(tokens);
  ASSERT_EQ(keys.size(), 2u);
  Admit(1, keys, 10);
  Reserve(1, 10);
  EXPECT_EQ(cache().stats().device.held, 3);
  EXPECT_EQ(cache().stats().device.free, 5);
  // Decode fills the partial block without allocating until it is full.
  Reserve(1, 12);
  EXPECT_EQ(cache().stats().device.free, 5);
  Reserve(1, 13);
  EXPECT_EQ(cache().stats().device.free, 4);
  Commit(1, keys);
  EXPECT_EQ(cache().stats().device.cached, 2);
  EXPECT_EQ(cache().stats().device.held, 4);
  Finish(1);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.device.held, 0);
  EXPECT_EQ(s.device.cached, 2);
  EXPECT_EQ(s.device.evictable, 2);
  EXPECT_EQ(s.device.free, 6);
  // The next turn reuses the full blocks and recomputes the rest.
  EXPECT_EQ(cache().Match(Keys(Concat(tokens, Tokens(50, 2)))), Matched(2, 0));
}

TEST_F(KvCacheManagerTest, CommitInOrderAfterTheMatchedPrefix) {
  Build(8, 0);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 16));
  RunRequest(1, std::vector<BlockKey>(keys.begin(), keys.begin() + 1), 4);
  EXPECT_EQ(Admit(2, keys, 16), Matched(1, 0));
  Reserve(2, 16);
  // Commits may come in pieces; each continues after the previous one.
  Commit(2, From(keys, 1).first(1));
  EXPECT_EQ(cache().Match(keys), Matched(2, 0));
  Commit(2, From(keys, 2));
  EXPECT_EQ(cache().Match(keys), Matched(4, 0));
  // Nothing left to commit: one more key exceeds what the request holds.
  const std::vector<BlockKey> more = {BlockKey(42)};
  EXPECT_EQ(TryCommit(2, more).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache().FindTier(BlockKey(42)), std::nullopt);
  Finish(2);
}

TEST_F(KvCacheManagerTest, CommitOfAKeyCachedUnderAnotherParentIsRefused) {
  // Keys are opaque: a caller that reuses a key under a different prefix must not corrupt
  // the index. The block stays uncommitted and is freed on release.
  Build(8, 0);
  const std::vector<BlockKey> first = {BlockKey(1), BlockKey(2)};
  const std::vector<BlockKey> second = {BlockKey(3), BlockKey(2)};
  RunRequest(1, first, 8);
  Admit(2, second, 8);
  Reserve(2, 8);
  const Status s = TryCommit(2, second);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s;
  EXPECT_EQ(cache().FindTier(BlockKey(3)), Tier::kDevice);
  EXPECT_EQ(cache().Match(second), Matched(1, 0));
  EXPECT_EQ(cache().Match(first), Matched(2, 0));
  Finish(2);
  EXPECT_EQ(cache().stats().device.cached, 3);
  EXPECT_EQ(cache().stats().device.free, 5);
}

// ---- Events --------------------------------------------------------------------------------

TEST_F(KvCacheManagerTest, EventsAreRecordedInOrderWithKeysTiersAndSteps) {
  Build(2, 1);
  const std::vector<BlockKey> ab = Keys(Tokens(0, 8));
  const std::vector<BlockKey> c = Keys(Tokens(100, 4));
  const std::vector<BlockKey> d = Keys(Tokens(200, 4));
  const std::vector<BlockKey> e = Keys(Tokens(300, 4));
  const BlockKey a = ab[0], b = ab[1];

  RunRequest(1, ab, 8);
  RunRequest(2, c, 4);  // b -> host
  Advance();
  RunRequest(3, ab, 8);  // b back, c -> host
  RunRequest(4, d, 4);   // b -> host, evicting c from it
  SetPriority(a, 10);
  Advance();
  RunRequest(5, e, 4);  // a dropped, and with it b from the host
  ASSERT_TRUE(TryReset().ok());

  using K = KvEventKind;
  const Tier kDev = Tier::kDevice, kHost = Tier::kHost;
  EXPECT_THAT(Events(),
              ElementsAre(Ev(K::kStored, a, kDev, 0), Ev(K::kStored, b, kDev, 0),
                          Ev(K::kOffloaded, b, kDev, 0), Ev(K::kStored, c[0], kDev, 0),
                          Ev(K::kOffloaded, c[0], kDev, 1), Ev(K::kOnboarded, b, kHost, 1),
                          Ev(K::kEvicted, c[0], kHost, 1), Ev(K::kOffloaded, b, kDev, 1),
                          Ev(K::kStored, d[0], kDev, 1), Ev(K::kDropped, a, kDev, 2),
                          Ev(K::kDropped, b, kHost, 2), Ev(K::kStored, e[0], kDev, 2),
                          Ev(K::kCleared, BlockKey(), kDev, 2)));
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().dropped_events(), 0);
  const KvCacheStats s = cache().stats();
  EXPECT_EQ(s.stored_blocks, 5);
  EXPECT_EQ(s.offloads, 3);
  EXPECT_EQ(s.onboards, 1);
  EXPECT_EQ(s.drops, 3);  // c evicted from the host, a and b dropped
  EXPECT_EQ(s.device_evictions, 4);
}

TEST_F(KvCacheManagerTest, EventLogIsBoundedAndCountsWhatItDropped) {
  KvCacheOptions o = Options(8, 0);
  o.event_log_capacity = 3;
  Build(o);
  const std::vector<BlockKey> keys = Keys(Tokens(0, 20));
  RunRequest(1, keys, 20);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(keys[2], keys[3], keys[4]));
  EXPECT_EQ(cache().dropped_events(), 2);
  const std::vector<BlockKey> more = Keys(Tokens(100, 4));
  RunRequest(2, more, 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kStored), ElementsAre(more[0]));
  EXPECT_EQ(cache().dropped_events(), 2);
}

TEST_F(KvCacheManagerTest, DisabledEventLogRecordsNothing) {
  KvCacheOptions o = Options(8, 0);
  o.event_log_capacity = 0;
  Build(o);
  RunRequest(1, Keys(Tokens(0, 8)), 8);
  ASSERT_TRUE(TryReset().ok());
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().dropped_events(), 0);
  EXPECT_EQ(cache().stats().stored_blocks, 2);
}

// ---- Errors and determinism -------------------------------------------------------------------

TEST_F(KvCacheManagerTest, UnknownRequestsAreNotFound) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  EXPECT_EQ(TryReserve(7, 4).code(), StatusCode::kNotFound);
  EXPECT_EQ(TryCommit(7, a).code(), StatusCode::kNotFound);
  EXPECT_EQ(TryFinish(7).code(), StatusCode::kNotFound);
  RunRequest(7, a, 4);
  EXPECT_EQ(TryFinish(7).code(), StatusCode::kNotFound) << "a released request is gone";
  EXPECT_EQ(cache().stats().device.free, 3);
}

TEST_F(KvCacheManagerTest, AddRequestRejectsDuplicatesAndBadOptionsWithoutSideEffects) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 8));
  RunRequest(1, a, 8);
  EXPECT_EQ(Admit(2, a, 8), Matched(2, 0));
  const KvCacheStats before = cache().stats();

  const StatusOr<PrefixMatch> duplicate = TryAdmit(2, a);
  EXPECT_EQ(duplicate.status().code(), StatusCode::kAlreadyExists);
  RequestOptions negative;
  negative.prompt_tokens = -1;
  const StatusOr<PrefixMatch> bad_tokens = TryAdmit(3, a, negative);
  EXPECT_EQ(bad_tokens.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_tokens.status().message(), HasSubstr("prompt_tokens"));
  RequestOptions bad_retention;
  bad_retention.retention = WholePrompt(101);
  const StatusOr<PrefixMatch> bad_priority = TryAdmit(3, a, bad_retention);
  EXPECT_EQ(bad_priority.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_priority.status().message(), HasSubstr("token_ranges[0].priority"));

  EXPECT_EQ(cache().stats(), before);
  EXPECT_EQ(cache().active_requests(), 1);
  EXPECT_EQ(TryFinish(3).code(), StatusCode::kNotFound);
  Finish(2);
  EXPECT_EQ(cache().stats().device.held, 0);
}

TEST_F(KvCacheManagerTest, SetPriorityValidatesItsArguments) {
  Build(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  EXPECT_EQ(TrySetPriority(a[0], 50).code(), StatusCode::kNotFound);
  EXPECT_EQ(cache().GetPriority(a[0]).status().code(), StatusCode::kNotFound);
  RunRequest(1, a, 4);
  const Status high = TrySetPriority(a[0], 101);
  EXPECT_EQ(high.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(high.message(), HasSubstr("101"));
  EXPECT_EQ(TrySetPriority(a[0], -1).code(), StatusCode::kInvalidArgument);
  const Status zero = TrySetPriority(a[0], 50, 0);
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.message(), HasSubstr("duration"));
  EXPECT_EQ(PriorityOf(a[0]), kDefaultPriority) << "a refused change changes nothing";
  SetPriority(a[0], 0);
  EXPECT_EQ(PriorityOf(a[0]), 0);
  SetPriority(a[0], kMaxPriority);
  EXPECT_EQ(PriorityOf(a[0]), kMaxPriority);
}

TEST_F(KvCacheManagerTest, SetPriorityOfAHeldBlockAppliesWhenItIsReleased) {
  Build(2, 0);
  const std::vector<BlockKey> a = Keys(Tokens(0, 4));
  const std::vector<BlockKey> b = Keys(Tokens(100, 4));
  RunRequest(1, b, 4);
  Admit(2, a, 4);
  Reserve(2, 4);
  Commit(2, a);
  SetPriority(a[0], 5);  // held: not evictable now, but first once released
  EXPECT_EQ(PriorityOf(a[0]), 5);
  Finish(2);
  Events();
  RunRequest(3, Keys(Tokens(200, 4)), 4);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[0]));
}

TEST_F(KvCacheManagerTest, EqualCallsGiveEqualEventsAndStats) {
  // Two ranks with the same options and calls must agree exactly.
  auto run = [this] {
    Build(3, 2);
    for (int32_t i = 0; i < 6; ++i) {
      const std::vector<BlockKey> keys = Keys(Tokens(i % 3 * 100, 4 + 4 * (i % 2)));
      std::optional<RetentionConfig> retention;
      if (i == 2) retention = WholePrompt(20);
      RunRequest(i + 1, keys, 4 + 4 * (i % 2), retention);
      Advance();
    }
    return std::make_pair(Events(), cache().stats());
  };
  const auto first = run();
  const auto second = run();
  EXPECT_FALSE(first.first.empty());
  EXPECT_EQ(first.first, second.first);
  EXPECT_EQ(first.second, second.second);
}

TEST_F(KvCacheManagerTest, MetadataStaysWithinSixtyFourBytesPerBlock) {
  Build(60'000, 40'000);
  EXPECT_LE(cache().MetadataBytes(), 64 * 100'000) << cache().MetadataBytes();
  EXPECT_GE(cache().MetadataBytes(), 40 * 100'000) << "the arena alone is 40 bytes per block";
}

}  // namespace
}  // namespace agentkv::kv
