// The fixture of the SubagentDemotion scenario suites (subagent_demotion_test.cc,
// subagent_demotion_rank_test.cc): a KvCacheManager under the per-conversation policy, a
// parent conversation and a child that reuses its prefix.
#ifndef AGENTKV_TESTS_KV_SUBAGENT_DEMOTION_FIXTURE_H_
#define AGENTKV_TESTS_KV_SUBAGENT_DEMOTION_FIXTURE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "kv_cache_manager_fixture.h"

namespace agentkv::kv {
namespace testing_internal {

inline constexpr int64_t kParent = 1;
inline constexpr int64_t kChild = 2;
inline constexpr Priority kDemoted = 1;

}  // namespace testing_internal

class KvCacheSubagentTest : public KvCacheManagerTest {
 protected:
  // per_conversation with finished_subagent_priority `demote` (unset: off) and the default
  // idle bound (32 steps).
  static KvCacheOptions AgenticOptions(
      int64_t device_blocks, int64_t host_blocks,
      std::optional<Priority> demote = testing_internal::kDemoted) {
    KvCacheOptions o = Options(device_blocks, host_blocks);
    o.block_reuse_policy = BlockReusePolicy::kPerConversation;
    o.finished_subagent_priority = demote;
    return o;
  }

  // One whole turn of `conversation`, optionally with a parent hint.
  PrefixMatch Turn(int64_t id, int64_t conversation, const std::vector<BlockKey>& keys,
                   int64_t tokens, std::optional<int64_t> parent = std::nullopt,
                   bool authenticated = true) {
    testing_internal::RequestOptionsBuilder options =
        testing_internal::Opts().Conversation(conversation);
    if (parent.has_value()) options.Parent(*parent, authenticated);
    return RunRequestWith(id, keys, tokens, options);
  }

  // The parent computes p0 p1; the child reuses them and computes c2 c3 (ending at the
  // current step); the parent's next turn is p0 p1 q2.
  void ParentAndChild() {
    Turn(1, testing_internal::kParent, p_, 8);
    EXPECT_EQ(Turn(2, testing_internal::kChild, c_, 16, testing_internal::kParent),
              testing_internal::Matched(2, 0));
  }
  // The parent's next turn (request `id`), which demotes its finished children.
  void ParentReturns(int64_t id) { Turn(id, testing_internal::kParent, q_, 12); }

  // A request of no conversation that holds `tokens` tokens without committing.
  void Fill(int64_t id, int64_t tokens) {
    Admit(id, {}, 0);
    Reserve(id, tokens);
  }

  CommittedRetentionHandle Plan(int64_t conversation) {
    return cache().PlanCommittedRetention(ConversationId(conversation));
  }

  const std::vector<int32_t> prefix_ = testing_internal::Tokens(100, 8);
  const std::vector<BlockKey> p_ = Chain(prefix_);
  const std::vector<BlockKey> c_ =
      Chain(testing_internal::Concat(prefix_, testing_internal::Tokens(200, 8)));
  const std::vector<BlockKey> q_ =
      Chain(testing_internal::Concat(prefix_, testing_internal::Tokens(300, 4)));

  // The keys of `tokens` under the fixture's hash seed (Keys() needs a built cache; members
  // are initialized before Build).
  static std::vector<BlockKey> Chain(const std::vector<int32_t>& tokens) {
    return BlockKeyHasher(Options(0, 0).hash_seed).KeysFromTokens(tokens, kTokensPerBlock);
  }
};

}  // namespace agentkv::kv

#endif  // AGENTKV_TESTS_KV_SUBAGENT_DEMOTION_FIXTURE_H_
