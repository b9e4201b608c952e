// Rank determinism of finished-sub-agent demotion (scenario 31 of the peer engines' porting
// list): two caches under different hash seeds and allocation histories, driven through the
// same calls, make the same decisions (events and tiers, with keys replaced by names).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "kv_cache_manager_fixture.h"
#include "subagent_demotion_fixture.h"

namespace agentkv::kv {
namespace {

using testing_internal::Concat;
using testing_internal::Opts;
using testing_internal::Tokens;
using testing_internal::WholePrompt;

// One event with its key replaced by a name both ranks agree on.
using CanonicalEvent = std::tuple<KvEventKind, Tier, int64_t, std::string>;
// Named token sequences; a block is named (first sequence listing it, index).
using NamedSequences = std::vector<std::pair<std::string, std::vector<int32_t>>>;

// One rank's cache, driven by name: the calls of the scenario, checked after each.
class Rank {
 public:
  Rank(const KvCacheOptions& options, const NamedSequences& seqs) : seqs_(seqs) {
    StatusOr<KvCacheManager> created = KvCacheManager::Create(options);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return;
    cache_.emplace(std::move(created).value());
    for (const auto& [name, tokens] : seqs_) {
      const std::vector<BlockKey> keys = Keys(name);
      for (size_t i = 0; i < keys.size(); ++i) {
        names_.try_emplace(keys[i].value(), name + "#" + std::to_string(i));
      }
    }
  }

  KvCacheManager& cache() { return *cache_; }

  void Check() {
    const Status s = cache_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }
  std::vector<BlockKey> Keys(const std::string& name) {
    for (const auto& [n, tokens] : seqs_) {
      if (n == name) return cache_->hasher().KeysFromTokens(tokens, cache_->tokens_per_block());
    }
    ADD_FAILURE() << "no sequence " << name;
    return {};
  }
  // One whole turn over the sequence `name`.
  void Turn(int64_t id, const std::string& name, RequestOptions options) {
    KvCacheManager& c = *cache_;
    const std::vector<BlockKey> keys = Keys(name);
    const int64_t tokens = c.tokens_per_block() * static_cast<int64_t>(keys.size());
    options.prompt_tokens = tokens;
    const StatusOr<PrefixMatch> m = c.AddRequest(RequestId(id), keys, options);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(c.Reserve(RequestId(id), tokens).ok());
    ASSERT_TRUE(
        c.Commit(RequestId(id), std::span<const BlockKey>(keys).subspan(m->total_blocks())).ok());
    ASSERT_TRUE(c.Release(RequestId(id)).ok());
    Check();
  }
  // A request that holds `tokens` tokens without committing, then ends.
  void Fill(int64_t id, int64_t tokens) {
    ASSERT_TRUE(cache_->AddRequest(RequestId(id), {}).ok());
    ASSERT_TRUE(cache_->Reserve(RequestId(id), tokens).ok());
    ASSERT_TRUE(cache_->Release(RequestId(id)).ok());
    Check();
  }
  void Steps(int n) {
    for (int i = 0; i < n; ++i) cache_->Step();
    Check();
  }
  // Every named block's tier and priority, in name order: the decisions themselves.
  void Snapshot() {
    for (const auto& [name, tokens] : seqs_) {
      const std::vector<BlockKey> keys = Keys(name);
      for (size_t i = 0; i < keys.size(); ++i) {
        std::string entry = name + "#" + std::to_string(i);
        if (const std::optional<Tier> tier = cache_->FindTier(keys[i])) {
          entry += *tier == Tier::kDevice ? " device " : " host ";
          entry += std::to_string(*cache_->GetPriority(keys[i]));
        }
        snapshots_.push_back(entry);
      }
    }
  }
  // The events since the last call, keys replaced by names.
  void TakeCanonicalEvents() {
    raw_ = cache_->TakeEvents();
    for (const KvEvent& e : raw_) {
      auto it = names_.find(e.key.value());
      ASSERT_NE(it, names_.end()) << "unnamed block " << e.key;
      log_.emplace_back(e.kind, e.tier, e.step.value(), it->second);
    }
  }

  const std::vector<std::string>& snapshots() const { return snapshots_; }
  const std::vector<CanonicalEvent>& log() const { return log_; }
  const std::vector<KvEvent>& raw() const { return raw_; }

 private:
  const NamedSequences& seqs_;
  std::optional<KvCacheManager> cache_;
  std::unordered_map<uint64_t, std::string> names_;
  std::vector<std::string> snapshots_;
  std::vector<CanonicalEvent> log_;
  std::vector<KvEvent> raw_;
};

// child_b and child_c run concurrently and finish in the opposite order they arrived in.
void RunConcurrentChildren(Rank& r) {
  KvCacheManager& c = r.cache();
  const std::vector<BlockKey> kb = r.Keys("child_b"), kc = r.Keys("child_c");
  ASSERT_TRUE(c.AddRequest(RequestId(3), kb, Opts().Prompt(16).Conversation(3).Parent(1)).ok());
  ASSERT_TRUE(c.AddRequest(RequestId(4), kc, Opts().Prompt(12).Conversation(4).Parent(1)).ok());
  ASSERT_TRUE(c.Reserve(RequestId(4), 12).ok());
  ASSERT_TRUE(c.Reserve(RequestId(3), 16).ok());
  ASSERT_TRUE(c.Commit(RequestId(4), kc).ok());
  ASSERT_TRUE(c.Commit(RequestId(3), std::span<const BlockKey>(kb).subspan(2)).ok());
  ASSERT_TRUE(c.Release(RequestId(4)).ok());
  ASSERT_TRUE(c.Release(RequestId(3)).ok());
  r.Check();
}

// The same calls on both ranks.
void RunScenario(Rank& r) {
  r.Turn(1, "parent", Opts().Conversation(1).Session(1));
  r.Turn(2, "child_a", Opts().Conversation(2).Parent(1).Session(2));
  RunConcurrentChildren(r);
  r.Turn(5, "grandchild", Opts().Conversation(5).Parent(3));
  r.Steps(4);
  r.Turn(6, "parent2", Opts().Conversation(1).Session(1));  // demotes a, b, c
  r.Snapshot();
  r.Turn(7, "other", Opts().Retention(WholePrompt(50, 3)));
  r.Fill(8, 28);                // evictions: drops of demoted blocks, offloads of the rest
  r.Steps(3);                   // other's retention expires
  r.Turn(14, "other", Opts());  // onboards it from the host
  r.Snapshot();
  r.Turn(9, "child_a2", Opts().Conversation(2).Session(2));  // restores child a, onboards
  ASSERT_GE(r.cache().CloseSession(SessionId(2)), 0);
  r.Turn(10, "parent3", Opts().Conversation(1));
  r.Steps(5);
  r.Turn(11, "parent", Opts().Conversation(1));  // demotes child a again
  r.Snapshot();
  r.Fill(12, 40);
  ASSERT_GE(r.cache().CloseSession(SessionId(1)), 0);
  r.Turn(13, "other", Opts());
  r.Snapshot();
}

// Rank 0's allocation history: unrelated requests that never commit.
void AllocateWithoutCommitting(KvCacheManager& c) {
  ASSERT_TRUE(c.AddRequest(RequestId(1000), {}).ok());
  ASSERT_TRUE(c.Reserve(RequestId(1000), 20).ok());
  ASSERT_TRUE(c.AddRequest(RequestId(1001), {}).ok());
  ASSERT_TRUE(c.Reserve(RequestId(1001), 12).ok());
  ASSERT_TRUE(c.Release(RequestId(1000)).ok());
  ASSERT_TRUE(c.Release(RequestId(1001)).ok());
}

// Rank 1's: junk committed, then dropped, leaving nothing cached.
void CommitAndDropJunk(KvCacheManager& c) {
  const std::vector<BlockKey> junk =
      c.hasher().KeysFromTokens(Tokens(7000, 12), c.tokens_per_block());
  ASSERT_TRUE(c.AddRequest(RequestId(1000), junk).ok());
  ASSERT_TRUE(c.Reserve(RequestId(1000), 14).ok());
  ASSERT_TRUE(c.Commit(RequestId(1000), junk).ok());
  ASSERT_TRUE(c.AddRequest(RequestId(1001), {}).ok());
  ASSERT_TRUE(c.Reserve(RequestId(1001), 8).ok());
  ASSERT_TRUE(c.Release(RequestId(1000)).ok());
  for (const BlockKey k : junk) ASSERT_TRUE(c.SetPriority(k, 0).ok());
  ASSERT_TRUE(c.AddRequest(RequestId(1002), {}).ok());
  ASSERT_TRUE(c.Reserve(RequestId(1002), 4 * 10).ok());  // drops the junk
  ASSERT_TRUE(c.Release(RequestId(1002)).ok());
  ASSERT_TRUE(c.Release(RequestId(1001)).ok());
}

void ExpectSameAgenticStats(const KvCacheStats& s0, const KvCacheStats& s1) {
  EXPECT_EQ(s0.demoted_children, 4);
  EXPECT_GT(s0.demoted_blocks, 0);
  EXPECT_EQ(s0.restored_children, 1);
  EXPECT_EQ(s0.demoted_blocks, s1.demoted_blocks);
  EXPECT_EQ(s0.demoted_children, s1.demoted_children);
  EXPECT_EQ(s0.retention_dropped_blocks, s1.retention_dropped_blocks);
  EXPECT_EQ(s0.tokens_freed_by_close, s1.tokens_freed_by_close);
  EXPECT_EQ(s0.device, s1.device);
  EXPECT_EQ(s0.host, s1.host);
}

TEST_F(KvCacheSubagentTest, FinishedSubagentDemotionIsRankDeterministic) {
  const std::vector<int32_t> b = Concat(prefix_, Tokens(400, 4));
  const NamedSequences seqs = {
      {"parent", prefix_},
      {"parent2", Concat(prefix_, Tokens(300, 4))},
      {"parent3", Concat(Concat(prefix_, Tokens(300, 4)), Tokens(310, 8))},
      {"child_a", Concat(prefix_, Tokens(200, 12))},
      {"child_a2", Concat(prefix_, Tokens(200, 16))},
      {"child_b", Concat(b, Tokens(410, 4))},
      {"grandchild", Concat(b, Tokens(450, 8))},
      {"child_c", Tokens(500, 12)},
      {"other", Tokens(600, 16)},
  };
  KvCacheOptions o = AgenticOptions(12, 6, 20);
  o.finished_subagent_min_idle_iterations = 4;
  o.max_num_turns = 2;
  o.session_close_mode = SessionCloseMode::kRelease;
  o.event_log_capacity = 4096;

  o.hash_seed = 1;
  Rank r0(o, seqs);
  o.hash_seed = 0xDEADBEEFCAFEF00DULL;
  Rank r1(o, seqs);
  ASSERT_FALSE(HasFailure());
  // Different allocation histories of unrelated blocks, leaving nothing cached.
  AllocateWithoutCommitting(r0.cache());
  CommitAndDropJunk(r1.cache());
  for (Rank* r : {&r0, &r1}) {
    r->Check();
    ASSERT_EQ(r->cache().stats().device.cached + r->cache().stats().host.cached, 0);
    r->cache().TakeEvents();
    RunScenario(*r);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(r->cache().dropped_events(), 0);
    r->TakeCanonicalEvents();
  }
  EXPECT_EQ(r0.log(), r1.log());
  EXPECT_EQ(r0.snapshots(), r1.snapshots());
  ASSERT_FALSE(r0.raw().empty());
  EXPECT_NE(r0.raw()[0].key, r1.raw()[0].key);  // the seeds do differ

  // The sequence exercises every decision a rank could get wrong.
  std::set<KvEventKind> kinds;
  for (const CanonicalEvent& e : r0.log()) kinds.insert(std::get<0>(e));
  EXPECT_THAT(kinds, ::testing::IsSupersetOf({KvEventKind::kStored, KvEventKind::kDropped,
                                              KvEventKind::kOffloaded, KvEventKind::kOnboarded,
                                              KvEventKind::kReleased}));
  ExpectSameAgenticStats(r0.cache().stats(), r1.cache().stats());
}

}  // namespace
}  // namespace agentkv::kv
