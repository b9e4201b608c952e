// Scenario tests of SessionTable (session_table.h; SGLang's session radix cache), driven
// through KvCacheManager: CloseSession is
// idempotent, `release` frees only the blocks the closed session alone references (never a
// prefix another open session shares, a block another path extends, or a block a running
// request holds), a late request of a closed session references nothing, tombstones are
// bounded, and the eviction class puts blocks an open session references after all others
// (`dereference` ordering is observed through eviction order).
//
// The behaviour both close modes share runs as one contract suite parameterized by the mode;
// what only one mode does has its own tests. The randomized interleaving test of every
// agentic policy (scenario 35 of the reference list) lives in
// kv_cache_manager_agentic_stress_test.cc.
#include "agentkv/kv/session_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "block_cache_harness.h"
#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_internal::Concat;
using testing_internal::Ev;
using testing_internal::Matched;
using testing_internal::Opts;
using testing_internal::Tokens;

class KvCacheSessionTest : public KvCacheManagerTest {
 protected:
  static KvCacheOptions SessionOptions(int64_t device_blocks, int64_t host_blocks,
                                       SessionCloseMode mode) {
    KvCacheOptions o = Options(device_blocks, host_blocks);
    o.session_close_mode = mode;
    return o;
  }

  // Admits a request without a session that holds `tokens` tokens and commits nothing: it
  // makes room on the device (evicting as needed); later Reserve calls grow it.
  void Fill(int64_t id, int64_t tokens) {
    Admit(id, {}, 0);
    Reserve(id, tokens);
  }
};

// ---- The contract both close modes share --------------------------------------------------

class KvCacheSessionContractTest : public KvCacheSessionTest,
                                   public ::testing::WithParamInterface<SessionCloseMode> {
 protected:
  void BuildSessions(int64_t device_blocks, int64_t host_blocks) {
    Build(SessionOptions(device_blocks, host_blocks, GetParam()));
  }
  bool Releases() const { return GetParam() == SessionCloseMode::kRelease; }
};

TEST_P(KvCacheSessionContractTest, CloseIsIdempotentForUnknownAndRepeatedIds) {
  BuildSessions(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(100, 8));
  RunRequestWith(1, a, 8, Opts().Session(1));
  const KvCacheStats before = cache().stats();
  ASSERT_EQ(before.open_sessions, 1);
  ASSERT_EQ(before.device.cached, 2);

  EXPECT_EQ(CloseSession(99), 0);  // never seen: a no-op
  EXPECT_EQ(cache().stats(), before);

  KvCacheStats want = before;
  want.open_sessions = 0;
  want.closed_sessions = 1;
  if (Releases()) {  // both blocks are the session's alone
    want.tokens_freed_by_close = 8;
    want.device.free += 2;
    want.device.evictable -= 2;
    want.device.cached -= 2;
  }
  EXPECT_EQ(CloseSession(1), Releases() ? 8 : 0);
  EXPECT_EQ(cache().stats(), want);
  EXPECT_FALSE(cache().SessionOpen(SessionId(1)));

  Events();
  EXPECT_EQ(CloseSession(1), 0);
  EXPECT_EQ(CloseSession(99), 0);
  EXPECT_EQ(cache().stats(), want);
  EXPECT_THAT(Events(), IsEmpty());
}

TEST_P(KvCacheSessionContractTest, HeldBlocksSurviveClose) {
  BuildSessions(8, 0);
  const std::vector<BlockKey> a = Keys(Tokens(100, 12));
  RunRequestWith(1, a, 12, Opts().Session(1));
  // A running request (of no session) holds a0 and a1; a2 is the session's alone and unheld.
  EXPECT_EQ(Admit(2, std::vector<BlockKey>{a[0], a[1]}, 8), Matched(2, 0));
  Events();

  EXPECT_EQ(CloseSession(1), Releases() ? 4 : 0);
  if (Releases()) {
    // a1 is childless once a2 is gone and only the closed session referenced it: only the
    // hold keeps it.
    EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kReleased, a[2], Tier::kDevice)));
    EXPECT_EQ(cache().FindTier(a[2]), std::nullopt);
  } else {
    EXPECT_THAT(Events(), IsEmpty());
    EXPECT_EQ(cache().FindTier(a[2]), Tier::kDevice);
  }
  EXPECT_EQ(cache().FindTier(a[0]), Tier::kDevice);
  EXPECT_EQ(cache().FindTier(a[1]), Tier::kDevice);
  EXPECT_EQ(cache().stats().device.held, 2);
  EXPECT_EQ(cache().stats().tokens_freed_by_close, Releases() ? 4 : 0);

  Finish(2);
  EXPECT_EQ(cache().Match(a), Matched(Releases() ? 2 : 3, 0));
}

TEST_P(KvCacheSessionContractTest, LateRequestOfAClosedSessionReferencesNothing) {
  BuildSessions(3, 0);
  const std::vector<BlockKey> x = Keys(Tokens(100, 4));
  const std::vector<BlockKey> late = Keys(Tokens(200, 4));
  RunRequestWith(1, x, 4, Opts().Session(2));  // older, referenced by the open session 2

  AdmitWith(2, late, Opts().Prompt(4).Session(1));
  EXPECT_TRUE(cache().SessionOpen(SessionId(1)));
  EXPECT_EQ(cache().stats().open_sessions, 2);
  Reserve(2, 4);
  Commit(2, late);
  EXPECT_EQ(CloseSession(1), 0);  // its only block is held by the running request
  Finish(2);
  EXPECT_EQ(cache().stats().late_session_requests, 1);
  EXPECT_FALSE(cache().SessionOpen(SessionId(1)));
  EXPECT_EQ(cache().stats().open_sessions, 1);

  // The late request's block is in the unreferenced eviction class: although it is the most
  // recently used, it goes before x, which the open session 2 references.
  Events();
  Fill(9, 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, late[0], Tier::kDevice)));
  EXPECT_EQ(cache().FindTier(x[0]), Tier::kDevice);
  Finish(9);

  // A request of the closed session admitted after the close does not reopen it either.
  AdmitWith(3, {}, Opts().Session(1));
  EXPECT_FALSE(cache().SessionOpen(SessionId(1)));
  EXPECT_EQ(cache().stats().open_sessions, 1);
  Finish(3);
  EXPECT_EQ(cache().stats().late_session_requests, 2);
  EXPECT_EQ(cache().stats().closed_sessions, 1);
}

TEST_P(KvCacheSessionContractTest, ClosingAnUnknownIdRemembersIt) {
  BuildSessions(4, 0);
  EXPECT_EQ(CloseSession(5), 0);
  EXPECT_EQ(cache().stats().closed_sessions, 0);  // nothing was open
  AdmitWith(1, {}, Opts().Session(5));
  EXPECT_FALSE(cache().SessionOpen(SessionId(5)));
  Finish(1);
  EXPECT_EQ(cache().stats().late_session_requests, 1);
}

TEST_P(KvCacheSessionContractTest, TombstonesAreBoundedAndAForgottenIdOpensAgain) {
  KvCacheOptions o = SessionOptions(8, 0, GetParam());
  o.closed_session_tombstones = 2;
  Build(o);
  for (int64_t s = 1; s <= 3; ++s) {
    RunRequestWith(s, Keys(Tokens(static_cast<int32_t>(100 * s), 4)), 4, Opts().Session(s));
  }
  for (int64_t s = 1; s <= 3; ++s) EXPECT_EQ(CloseSession(s), Releases() ? 4 : 0);
  EXPECT_EQ(cache().stats().closed_sessions, 3);
  EXPECT_EQ(cache().stats().open_sessions, 0);

  // Remembered: 2 and 3. Session 1, the oldest, was forgotten and opens again.
  AdmitWith(11, {}, Opts().Session(1));
  AdmitWith(12, {}, Opts().Session(2));
  EXPECT_TRUE(cache().SessionOpen(SessionId(1)));
  EXPECT_FALSE(cache().SessionOpen(SessionId(2)));
  EXPECT_EQ(cache().stats().open_sessions, 1);
  Finish(11);
  Finish(12);
  EXPECT_EQ(cache().stats().late_session_requests, 1);  // only session 2's

  // Closing session 1 again is a real close; it pushes session 2 out of the tombstones.
  EXPECT_EQ(CloseSession(1), 0);
  EXPECT_EQ(cache().stats().closed_sessions, 4);
  AdmitWith(13, {}, Opts().Session(2));
  AdmitWith(14, {}, Opts().Session(3));
  EXPECT_TRUE(cache().SessionOpen(SessionId(2)));
  EXPECT_FALSE(cache().SessionOpen(SessionId(3)));
  Finish(13);
  Finish(14);
  EXPECT_EQ(cache().stats().late_session_requests, 2);  // plus session 3's
}

TEST_P(KvCacheSessionContractTest, GaugesCountOpenAndClosedSessions) {
  BuildSessions(4, 0);
  AdmitWith(1, {}, Opts().Session(1));
  EXPECT_EQ(cache().stats().open_sessions, 1);  // the first request opens its session
  AdmitWith(2, {}, Opts().Session(1));
  AdmitWith(3, {}, Opts().Session(2));
  AdmitWith(4, {}, Opts());
  EXPECT_EQ(cache().stats().open_sessions, 2);
  for (int64_t id = 1; id <= 4; ++id) Finish(id);
  EXPECT_EQ(cache().stats().open_sessions, 2);
  EXPECT_EQ(cache().stats().closed_sessions, 0);

  CloseSession(1);
  EXPECT_EQ(cache().stats().open_sessions, 1);
  EXPECT_EQ(cache().stats().closed_sessions, 1);
  CloseSession(1);
  EXPECT_EQ(cache().stats().closed_sessions, 1);
  CloseSession(2);
  EXPECT_EQ(cache().stats().open_sessions, 0);
  EXPECT_EQ(cache().stats().closed_sessions, 2);
  EXPECT_EQ(cache().stats().late_session_requests, 0);
}

TEST_P(KvCacheSessionContractTest, EvictionTakesUnreferencedBlocksBeforeReferencedOnes) {
  BuildSessions(4, 0);
  const std::vector<BlockKey> s = Keys(Tokens(100, 4));
  const std::vector<BlockKey> u = Keys(Tokens(200, 4));
  const std::vector<BlockKey> t = Keys(Tokens(300, 4));
  RunRequestWith(1, s, 4, Opts().Session(1));
  RunRequest(2, u, 4);
  RunRequestWith(3, t, 4, Opts().Session(2));
  // The class decides before the priority: u at the top priority still goes first, and s at
  // priority 0 goes before t only because both are referenced.
  SetPriority(u[0], 100);
  SetPriority(s[0], 0);
  Events();
  Fill(9, 8);
  Reserve(9, 12);
  Reserve(9, 16);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(u[0], s[0], t[0]));
  Finish(9);
}

TEST_P(KvCacheSessionContractTest, SessionReferencedChainIsEvictedLeafFirst) {
  // Under one priority plain LRU only ever picks leaves: a session's chain must lose its
  // deepest block first, not its root with every dependent.
  BuildSessions(4, 0);
  const std::vector<BlockKey> a = Keys(Tokens(100, 12));
  RunRequestWith(1, a, 12, Opts().Session(1));
  Events();
  Fill(9, 8);  // one free block plus one eviction
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, a[2], Tier::kDevice)));
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
  EXPECT_EQ(cache().stats().drops, 1);
  Finish(9);
}

TEST_P(KvCacheSessionContractTest, ChainExtendingAnotherSessionsPrefixIsEvictedLeafFirst) {
  BuildSessions(5, 0);
  const std::vector<int32_t> prefix = Tokens(100, 8);
  const std::vector<BlockKey> p = Keys(prefix);
  const std::vector<BlockKey> a = Keys(Concat(prefix, Tokens(500, 4)));
  RunRequestWith(1, p, 8, Opts().Session(1));
  RunRequestWith(2, a, 12, Opts().Session(2));  // references p0, p1 again and a2 anew
  Events();
  Fill(9, 12);  // two free blocks plus one eviction
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kDropped, a[2], Tier::kDevice)));
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
  Finish(9);
}

INSTANTIATE_TEST_SUITE_P(CloseModes, KvCacheSessionContractTest,
                         ::testing::Values(SessionCloseMode::kRelease,
                                           SessionCloseMode::kDereference),
                         [](const ::testing::TestParamInfo<SessionCloseMode>& mode) {
                           return std::string(SessionCloseModeName(mode.param));
                         });

// ---- Release ------------------------------------------------------------------------------

TEST_F(KvCacheSessionTest, ReleaseCloseFreesOnlySessionUniqueBlocks) {
  Build(SessionOptions(10, 0, SessionCloseMode::kRelease));
  const std::vector<int32_t> prefix = Tokens(100, 8);
  const std::vector<BlockKey> a = Keys(Concat(prefix, Tokens(200, 8)));  // p0 p1 a2 a3
  const std::vector<BlockKey> b = Keys(Concat(prefix, Tokens(300, 4)));  // p0 p1 b2
  RunRequestWith(1, a, 16, Opts().Session(1));
  RunRequestWith(2, b, 12, Opts().Session(2));
  Events();

  // The shared prefix stays: session 2 still references it.
  EXPECT_EQ(CloseSession(1), 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kReleased, a[3], Tier::kDevice),
                                    Ev(KvEventKind::kReleased, a[2], Tier::kDevice)));
  EXPECT_EQ(cache().Match(b), Matched(3, 0));
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
  KvCacheStats s = cache().stats();
  EXPECT_EQ(s.tokens_freed_by_close, 8);
  EXPECT_EQ(s.device.cached, 3);
  EXPECT_EQ(s.device.free, 7);
  EXPECT_EQ(s.drops, 0);  // a release is no eviction
  EXPECT_EQ(s.device_evictions, 0);

  // Once session 1 is closed the prefix is session 2's alone, and goes with it.
  EXPECT_EQ(CloseSession(2), 12);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kReleased), ElementsAre(b[2], b[1], b[0]));
  s = cache().stats();
  EXPECT_EQ(s.tokens_freed_by_close, 20);
  EXPECT_EQ(s.device.cached, 0);
  EXPECT_EQ(s.device.free, 10);
}

TEST_F(KvCacheSessionTest, ReleaseCloseKeepsALeafAnotherOpenSessionReferences) {
  Build(SessionOptions(8, 0, SessionCloseMode::kRelease));
  const std::vector<BlockKey> a = Keys(Tokens(100, 8));
  RunRequestWith(1, a, 8, Opts().Session(1));
  RunRequestWith(2, a, 8, Opts().Session(2));  // the same chain: a1 is an unheld leaf
  Events();
  EXPECT_EQ(CloseSession(1), 0);
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().Match(a), Matched(2, 0));
  EXPECT_EQ(CloseSession(2), 8);  // now the chain is session 2's alone
  EXPECT_EQ(cache().Match(a), Matched(0, 0));
}

TEST_F(KvCacheSessionTest, ReleaseCloseKeepsABlockAnotherPathExtends) {
  Build(SessionOptions(8, 0, SessionCloseMode::kRelease));
  const std::vector<int32_t> tokens = Tokens(100, 12);
  const std::vector<BlockKey> a = Keys(tokens);
  const std::vector<BlockKey> x = Keys(Concat(tokens, Tokens(900, 4)));  // a0 a1 a2 x3
  RunRequestWith(1, a, 12, Opts().Session(1));
  RunRequest(2, x, 16);  // no session: extends a2
  Events();

  EXPECT_EQ(CloseSession(1), 0);
  EXPECT_THAT(Events(), IsEmpty());
  EXPECT_EQ(cache().Match(x), Matched(4, 0));
  EXPECT_EQ(cache().stats().tokens_freed_by_close, 0);
  EXPECT_EQ(cache().stats().closed_sessions, 1);
}

TEST_F(KvCacheSessionTest, ReleaseCloseFreesTheSessionsHostBlocks) {
  Build(SessionOptions(2, 4, SessionCloseMode::kRelease));
  const std::vector<BlockKey> a = Keys(Tokens(100, 8));
  const std::vector<BlockKey> f = Keys(Tokens(900, 8));
  RunRequestWith(1, a, 8, Opts().Session(1));
  RunRequest(2, f, 8);  // offloads a1, then a0
  ASSERT_EQ(cache().Match(a), Matched(0, 2));
  Events();

  EXPECT_EQ(CloseSession(1), 8);
  EXPECT_THAT(Events(), ElementsAre(Ev(KvEventKind::kReleased, a[1], Tier::kHost),
                                    Ev(KvEventKind::kReleased, a[0], Tier::kHost)));
  EXPECT_EQ(cache().stats().host.cached, 0);
  EXPECT_EQ(cache().stats().host.free, 4);
  EXPECT_EQ(cache().Match(f), Matched(2, 0));  // the device is untouched
}

// ---- Dereference --------------------------------------------------------------------------

TEST_F(KvCacheSessionTest, DereferenceCloseSendsTheClosedSessionsBlocksFirst) {
  Build(SessionOptions(6, 0, SessionCloseMode::kDereference));
  const std::vector<BlockKey> u = Keys(Tokens(100, 4));
  const std::vector<BlockKey> a = Keys(Tokens(200, 8));
  const std::vector<BlockKey> b = Keys(Tokens(300, 4));
  RunRequest(1, u, 4);  // the least recently used block, referenced by no session
  RunRequestWith(2, a, 8, Opts().Session(1));
  RunRequestWith(3, b, 4, Opts().Session(2));

  EXPECT_EQ(CloseSession(1), 0);
  EXPECT_EQ(cache().Match(a), Matched(2, 0));  // dereference frees nothing
  EXPECT_EQ(cache().stats().tokens_freed_by_close, 0);
  EXPECT_EQ(cache().stats().device.cached, 4);
  Events();

  // The closed session's blocks go first (deepest first), ahead of the older unreferenced u;
  // the open session's b goes last.
  Fill(9, 12);  // two free blocks plus one eviction
  Reserve(9, 16);
  Reserve(9, 20);
  Reserve(9, 24);
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(a[1], a[0], u[0], b[0]));
  Finish(9);
}

TEST_F(KvCacheSessionTest, DereferencedBlocksStayReusableUntilPressure) {
  Build(SessionOptions(4, 0, SessionCloseMode::kDereference));
  const std::vector<BlockKey> a = Keys(Tokens(200, 8));
  RunRequestWith(1, a, 8, Opts().Session(1));
  CloseSession(1);
  // A new session reuses the closed session's KV and references it again.
  EXPECT_EQ(RunRequestWith(2, a, 8, Opts().Session(2)), Matched(2, 0));
  const std::vector<BlockKey> u = Keys(Tokens(300, 4));
  RunRequest(3, u, 4);
  Events();
  Fill(9, 8);  // one free block plus one eviction: u, not the referenced a
  EXPECT_THAT(KeysOf(Events(), KvEventKind::kDropped), ElementsAre(u[0]));
  Finish(9);
}

// ---- SessionTable directly over a BlockCache ---------------------------------------------

using testing_internal::BlockCacheHarness;

// Runs request `id` of `session` over `keys` the way KvCacheManager does: admitted to the
// session, its chain referenced while still held.
void RunInSession(BlockCacheHarness& h, SessionTable& sessions, int64_t id, SessionId session,
                  const std::vector<BlockKey>& keys) {
  sessions.Admit(session);
  h.Start(id, keys);
  sessions.ReferenceChain(session, h.ChainOf(id).keys, h.cache());
  h.Finish(id);
  const Status s = sessions.CheckInvariants(h.cache());
  ASSERT_TRUE(s.ok()) << s;
}

TEST(SessionTableUnitTest, EachOpenSessionReferencesAKeyOnce) {
  const KvCacheOptions o = BlockCacheHarness::Options(8);
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  const std::vector<BlockKey> keys = h.Chain(1, 2);
  RunInSession(h, sessions, 1, SessionId(1), keys);
  RunInSession(h, sessions, 2, SessionId(1), keys);
  EXPECT_EQ(h.cache().KeyReferences(keys[0]), 1);
  RunInSession(h, sessions, 3, SessionId(2), {keys[0]});
  EXPECT_EQ(h.cache().KeyReferences(keys[0]), 2);
  EXPECT_EQ(h.cache().KeyReferences(keys[1]), 1);
  EXPECT_EQ(sessions.open_sessions(), 2);
}

// A session's chains take every shape a turn gives them: an extension of the agent's previous
// chain, a prefix of it, one that diverges from it midway, the same chain again, and another
// agent's chain in between. After each ReferenceChain the references are what a model of each
// session's key set says: every key of every chain a session gave, counted once per session.
// (ReferenceChain skips the probes of the keys a chain shares with the session's last one.)
TEST(SessionTableUnitTest, ReferencesMatchAModelOfEveryChainASessionGave) {
  const KvCacheOptions o = BlockCacheHarness::Options(8);
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  constexpr size_t kSessions = 3;
  constexpr size_t kAgents = 2;
  constexpr size_t kBlock = static_cast<size_t>(BlockCacheHarness::kTokensPerBlock);
  std::mt19937_64 rng(20261206);
  const auto draw = [&rng](size_t n) { return static_cast<size_t>(rng() % n); };
  // The tokens of each session's agents' current chains; tokens from a small alphabet, so that
  // chains of different sessions and agents share prefixes.
  std::vector<std::vector<std::vector<int32_t>>> tokens(kSessions,
                                                        std::vector<std::vector<int32_t>>(kAgents));
  std::vector<std::set<uint64_t>> members(kSessions);
  std::map<uint64_t, int32_t> references;
  for (int call = 0; call < 600; ++call) {
    const size_t session = draw(kSessions);
    std::vector<int32_t>& chain = tokens[session][draw(kAgents)];
    const size_t shape = draw(4);  // 0 extend, 1 cut, 2 cut and diverge, 3 repeat
    if (shape == 1 || shape == 2) chain.resize(draw(chain.size() / kBlock + 1) * kBlock);
    if (shape == 0 || shape == 2) {
      for (size_t i = 0; i < (1 + draw(3)) * kBlock; ++i) {
        chain.push_back(static_cast<int32_t>(draw(2)));
      }
    }
    const std::vector<BlockKey> keys =
        h.cache().hasher().KeysFromTokens(chain, BlockCacheHarness::kTokensPerBlock);
    sessions.Admit(SessionId(static_cast<int64_t>(session)));
    sessions.ReferenceChain(SessionId(static_cast<int64_t>(session)), keys, h.cache());
    for (const BlockKey key : keys) {
      if (members[session].insert(key.value()).second) ++references[key.value()];
    }
    ASSERT_EQ(h.cache().referenced_keys(), static_cast<int64_t>(references.size()))
        << "after call " << call;
    for (const auto& [key, count] : references) {
      ASSERT_EQ(h.cache().KeyReferences(BlockKey(key)), count) << "after call " << call;
    }
    const Status s = sessions.CheckInvariants(h.cache());
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_GT(references.size(), 20U);  // The chains grew beyond a handful of keys.
}

TEST(SessionTableUnitTest, CloseInReleaseModeFreesOnlyWhatNoOtherSessionReferences) {
  KvCacheOptions o = BlockCacheHarness::Options(8);
  o.session_close_mode = SessionCloseMode::kRelease;
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  const std::vector<BlockKey> keys = h.Chain(1, 2);
  RunInSession(h, sessions, 1, SessionId(1), keys);
  RunInSession(h, sessions, 2, SessionId(2), {keys[0]});
  EXPECT_EQ(sessions.Close(SessionId(1), h.cache()), BlockCacheHarness::kTokensPerBlock);
  EXPECT_FALSE(h.cache().Find(keys[1]).has_value());
  EXPECT_TRUE(h.cache().Find(keys[0]).has_value());
  EXPECT_EQ(h.cache().KeyReferences(keys[0]), 1);
  EXPECT_EQ(h.cache().referenced_keys(), 1);
  EXPECT_EQ(sessions.counters().closed_sessions, 1);
  EXPECT_EQ(sessions.counters().tokens_freed_by_close, BlockCacheHarness::kTokensPerBlock);
  EXPECT_EQ(sessions.Close(SessionId(1), h.cache()), 0);  // Idempotent.
  EXPECT_EQ(sessions.counters().closed_sessions, 1);
  EXPECT_TRUE(sessions.CheckInvariants(h.cache()).ok());
  h.CheckInvariants();
}

TEST(SessionTableUnitTest, ALateRequestOfAClosedSessionReferencesNothing) {
  const KvCacheOptions o = BlockCacheHarness::Options(8);
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  EXPECT_EQ(sessions.Close(SessionId(5), h.cache()), 0);  // Unknown: remembered closed.
  RunInSession(h, sessions, 1, SessionId(5), h.Chain(1, 1));
  EXPECT_FALSE(sessions.open(SessionId(5)));
  EXPECT_EQ(sessions.counters().late_session_requests, 1);
  EXPECT_EQ(h.cache().referenced_keys(), 0);
}

TEST(SessionTableUnitTest, TombstonesForgetTheOldestBeyondTheirBound) {
  KvCacheOptions o = BlockCacheHarness::Options(8);
  o.closed_session_tombstones = 2;
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  for (int64_t id = 1; id <= 3; ++id) sessions.Close(SessionId(id), h.cache());
  sessions.Admit(SessionId(1));  // Forgotten: opens again.
  sessions.Admit(SessionId(3));  // Still remembered closed.
  EXPECT_TRUE(sessions.open(SessionId(1)));
  EXPECT_FALSE(sessions.open(SessionId(3)));
  EXPECT_TRUE(sessions.CheckInvariants(h.cache()).ok());
}

TEST(SessionTableUnitTest, CheckInvariantsCatchesAReferenceNoOpenSessionHolds) {
  const KvCacheOptions o = BlockCacheHarness::Options(8);
  BlockCacheHarness h(o);
  SessionTable sessions(o);
  RunInSession(h, sessions, 1, SessionId(1), h.Chain(1, 1));
  h.cache().ReferenceKey(h.Chain(100, 1)[0]);
  const Status s = sessions.CheckInvariants(h.cache());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("no open session"));
}

}  // namespace
}  // namespace agentkv::kv
