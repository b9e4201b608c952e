// Tests of the router models: a contract suite every policy runs, then each policy's own
// behaviour (round-robin cycling, consistent-hashing stickiness and minimal movement,
// cache-aware prefix affinity, balancing and the load test) and the factory's validation.
#include "agentkv/routing/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "agentkv/base/hash.h"
#include "agentkv/base/rng.h"

namespace agentkv::routing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Chained block keys: `n` blocks of stream `stream`, each key standing for its whole prefix.
std::vector<uint64_t> Blocks(uint64_t stream, int n) {
  std::vector<uint64_t> keys;
  uint64_t key = Mix64(stream * 0x100000001B3ULL + 1);
  for (int i = 0; i < n; ++i) {
    keys.push_back(key);
    key = Mix64(key ^ static_cast<uint64_t>(i + 1));
  }
  return keys;
}

// `base` followed by `n` more blocks of stream `stream` chained onto it.
std::vector<uint64_t> Extend(std::vector<uint64_t> base, uint64_t stream, int n) {
  uint64_t key = base.empty() ? stream : base.back();
  for (int i = 0; i < n; ++i) {
    key = Mix64(key ^ (Mix64(stream ^ 0x5bd1e995ULL) + static_cast<uint64_t>(i)));
    base.push_back(key);
  }
  return base;
}

std::unique_ptr<Router> Make(const RouterOptions& options) {
  StatusOr<std::unique_ptr<Router>> router = Router::Create(options);
  EXPECT_TRUE(router.ok()) << router.status();
  return std::move(router).value();
}

EngineId RouteKey(Router& router, uint64_t key) {
  return router.Route(RouteRequest{.routing_key = key, .block_keys = {}});
}

EngineId RouteBlocks(Router& router, const std::vector<uint64_t>& blocks) {
  return router.Route(RouteRequest{.routing_key = 0, .block_keys = blocks});
}

// ---- Contract suite: every policy. ----

class RouterContractTest : public ::testing::TestWithParam<RouterPolicy> {
 protected:
  RouterOptions Options(int engines, uint64_t seed) const {
    RouterOptions options;
    options.policy = GetParam();
    options.num_engines = engines;
    options.seed = seed;
    return options;
  }

  // Routes a seeded random workload (sessions with growing prefixes, random loads).
  std::vector<int32_t> Drive(Router& router, uint64_t seed, int requests) const {
    Rng rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < requests; ++i) {
      for (EngineId e : router.engines()) router.SetLoad(e, rng.Uniform(0, 50));
      const uint64_t session = static_cast<uint64_t>(rng.Uniform(0, 300));
      const auto blocks =
          Extend(Blocks(session, static_cast<int>(rng.Uniform(1, 8))), rng.Next(), 2);
      const EngineId chosen =
          router.Route(RouteRequest{.routing_key = session, .block_keys = blocks});
      out.push_back(chosen.value());
    }
    return out;
  }
};

TEST_P(RouterContractTest, RoutesOnlyToLiveEngines) {
  auto router = Make(Options(5, 1));
  router->RemoveEngine(EngineId(2));
  for (int32_t e : Drive(*router, 7, 500)) {
    EXPECT_NE(e, 2);
    EXPECT_GE(e, 0);
    EXPECT_LT(e, 5);
  }
  router->AddEngine(EngineId(9));
  std::map<int32_t, int> seen;
  for (int32_t e : Drive(*router, 8, 2000)) ++seen[e];
  EXPECT_FALSE(seen.contains(2));
  EXPECT_TRUE(seen.contains(9));  // A new engine gets traffic.
}

TEST_P(RouterContractTest, SameSeedSameRoutes) {
  auto a = Make(Options(6, 42));
  auto b = Make(Options(6, 42));
  const auto routes_a = Drive(*a, 3, 1000);
  EXPECT_EQ(routes_a, Drive(*b, 3, 1000));
  std::map<int32_t, int> seen;
  for (int32_t e : routes_a) ++seen[e];
  EXPECT_GE(seen.size(), 2u);  // Not degenerate.
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, RouterContractTest,
                         ::testing::Values(RouterPolicy::kRoundRobin,
                                           RouterPolicy::kConsistentHashing,
                                           RouterPolicy::kCacheAware));

// ---- Factory. ----

TEST(RouterTest, ParseRejectsUnknownPolicyListingValidNames) {
  StatusOr<RouterPolicy> policy = ParseRouterPolicy("random_walk");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(policy.status().message(),
              AllOf(HasSubstr("random_walk"), HasSubstr("round_robin"),
                    HasSubstr("consistent_hashing"), HasSubstr("cache_aware")));
}

TEST(RouterTest, FactoryRejectsAPolicyOutOfTheEnum) {
  RouterOptions options;
  options.policy = static_cast<RouterPolicy>(7);
  EXPECT_EQ(RouterPolicyName(options.policy), "invalid");
  EXPECT_THAT(Router::Create(options).status().message(), HasSubstr("policy"));
}

TEST(RouterTest, PolicyNamesRoundTripAndTheFactoryKeepsThePolicy) {
  for (auto [name, policy] : {std::pair{"round_robin", RouterPolicy::kRoundRobin},
                              std::pair{"consistent_hashing", RouterPolicy::kConsistentHashing},
                              std::pair{"cache_aware", RouterPolicy::kCacheAware}}) {
    EXPECT_EQ(ParseRouterPolicy(name).value(), policy);
    EXPECT_EQ(RouterPolicyName(policy), name);
    RouterOptions options;
    options.policy = policy;
    EXPECT_EQ(Make(options)->policy(), policy);
  }
  auto bad = [](auto mutate, std::string_view field) {
    RouterOptions options;
    mutate(options);
    const Status status = options.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(status.message(), HasSubstr(field));
  };
  bad([](RouterOptions& o) { o.num_engines = 0; }, "num_engines");
  bad([](RouterOptions& o) { o.virtual_nodes = 0; }, "virtual_nodes");
  bad([](RouterOptions& o) { o.cache_threshold = 1.5; }, "cache_threshold");
  bad([](RouterOptions& o) { o.balance_abs_threshold = -1; }, "balance_abs_threshold");
  bad([](RouterOptions& o) { o.balance_rel_threshold = 0.5; }, "balance_rel_threshold");
  bad([](RouterOptions& o) { o.max_tree_size = 0; }, "max_tree_size");
  EXPECT_TRUE(RouterOptions().Validate().ok());
}

// ---- round_robin. ----

TEST(RouterRoundRobinTest, CyclesThroughEnginesInIdOrder) {
  auto router = Make({.policy = RouterPolicy::kRoundRobin, .num_engines = 3});
  std::vector<int32_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(RouteKey(*router, 99).value());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0}));
}

// ---- consistent_hashing. ----

constexpr int kKeys = 10'000;

std::vector<int32_t> MapKeys(Router& router) {
  std::vector<int32_t> owner;
  for (int k = 0; k < kKeys; ++k) owner.push_back(RouteKey(router, 1000 + k).value());
  return owner;
}

TEST(RouterConsistentHashingTest, StickyPerKeyAndSpreadAcrossEngines) {
  auto router = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 10, .seed = 5});
  const auto owner = MapKeys(*router);
  EXPECT_EQ(owner, MapKeys(*router));  // Routing twice changes nothing.
  std::map<int32_t, int> per_engine;
  for (int32_t e : owner) ++per_engine[e];
  ASSERT_EQ(per_engine.size(), 10u);
  for (auto [engine, count] : per_engine) {
    EXPECT_GT(count, 500) << "engine " << engine;  // Mean 1000; 160 vnodes keep it near.
    EXPECT_LT(count, 1600) << "engine " << engine;
  }
}

TEST(RouterConsistentHashingTest, StickyEngineTellsWhereAKeyWillLandWithoutRouting) {
  auto router = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 4, .seed = 3});
  for (uint64_t key = 0; key < 200; ++key) {
    const std::optional<EngineId> sticky = router->StickyEngine(key);
    ASSERT_TRUE(sticky.has_value());
    EXPECT_EQ(*sticky, RouteKey(*router, key)) << key;
  }
  // Other policies decide from state: nothing to tell in advance.
  EXPECT_EQ(Make({.policy = RouterPolicy::kRoundRobin, .num_engines = 2})->StickyEngine(1),
            std::nullopt);
  EXPECT_EQ(Make({.policy = RouterPolicy::kCacheAware, .num_engines = 2})->StickyEngine(1),
            std::nullopt);
}

TEST(RouterConsistentHashingTest, RemovingAnEngineMovesOnlyItsKeys) {
  auto router = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 10, .seed = 5});
  const auto before = MapKeys(*router);
  router->RemoveEngine(EngineId(3));
  const auto after = MapKeys(*router);
  int moved = 0;
  int owned_by_removed = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (before[k] == 3) {
      ++owned_by_removed;
      EXPECT_NE(after[k], 3);
    } else {
      EXPECT_EQ(after[k], before[k]) << "key " << k;
    }
    moved += before[k] != after[k];
  }
  EXPECT_EQ(moved, owned_by_removed);
  EXPECT_GT(owned_by_removed, 0);
  // Adding it back restores the original placement exactly.
  router->AddEngine(EngineId(3));
  EXPECT_EQ(MapKeys(*router), before);
}

TEST(RouterConsistentHashingTest, AddingAnEngineMovesKeysOnlyToIt) {
  auto router = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 10, .seed = 5});
  const auto before = MapKeys(*router);
  router->AddEngine(EngineId(10));
  const auto after = MapKeys(*router);
  int moved = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (after[k] != before[k]) {
      EXPECT_EQ(after[k], 10);
      ++moved;
    }
  }
  EXPECT_GT(moved, 400);  // About 1/11 of the keys.
  EXPECT_LT(moved, 1600);
}

TEST(RouterConsistentHashingTest, SeedChangesThePlacement) {
  auto a = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 10, .seed = 5});
  auto b = Make({.policy = RouterPolicy::kConsistentHashing, .num_engines = 10, .seed = 6});
  const auto pa = MapKeys(*a);
  const auto pb = MapKeys(*b);
  int differ = 0;
  for (int k = 0; k < kKeys; ++k) differ += pa[k] != pb[k];
  EXPECT_GT(differ, kKeys / 2);
}

// ---- cache_aware. ----

TEST(RouterCacheAwareTest, LongSharedPrefixReturnsToTheEngineThatServedIt) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 4});
  // Cold requests with equal loads go to the smallest tree, lowest id first.
  std::vector<std::vector<uint64_t>> sessions;
  for (uint64_t s = 0; s < 4; ++s) {
    sessions.push_back(Blocks(s, 8));
    EXPECT_EQ(RouteBlocks(*router, sessions.back()), EngineId(static_cast<int32_t>(s)));
  }
  // Next turns: the previous 8 blocks plus 4 new ones (match 8/12 > 0.5), in reverse order.
  for (int s = 3; s >= 0; --s) {
    const auto next = Extend(sessions[s], 100 + s, 4);
    EXPECT_EQ(router->MatchedBlocks(EngineId(s), next), 8);
    EXPECT_EQ(RouteBlocks(*router, next), EngineId(s)) << "session " << s;
    EXPECT_EQ(router->tree_size(EngineId(s)), 12);
  }
}

TEST(RouterCacheAwareTest, ShortMatchBelowThresholdGoesToSmallestTree) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 2});
  const auto first = Blocks(1, 4);
  EXPECT_EQ(RouteBlocks(*router, first), EngineId(0));
  // Shares 2 of 8 blocks (0.25 <= 0.5): engine 1 has the smaller tree.
  const std::vector<uint64_t> second = Extend({first[0], first[1]}, 2, 6);
  EXPECT_EQ(router->MatchedBlocks(EngineId(0), second), 2);
  EXPECT_EQ(RouteBlocks(*router, second), EngineId(1));
  // Exactly at the threshold (4 of 8 = 0.5) is not above it: smallest tree again (engine 0,
  // 4 keys against 8).
  const std::vector<uint64_t> half = Extend({second[0], second[1], second[2], second[3]}, 4, 4);
  EXPECT_EQ(RouteBlocks(*router, half), EngineId(0));
}

TEST(RouterCacheAwareTest, BalancesColdRequests) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 4});
  std::map<int32_t, int> per_engine;
  for (uint64_t s = 0; s < 40; ++s) ++per_engine[RouteBlocks(*router, Blocks(1000 + s, 4)).value()];
  ASSERT_EQ(per_engine.size(), 4u);
  for (auto [engine, count] : per_engine) EXPECT_EQ(count, 10) << "engine " << engine;
  for (int32_t e = 0; e < 4; ++e) EXPECT_EQ(router->tree_size(EngineId(e)), 40);
}

TEST(RouterCacheAwareTest, ImbalanceNeedsBothAbsoluteAndRelativeThresholds) {
  struct Case {
    std::vector<int64_t> loads;
    int32_t expect;  // Engine 0 holds the prefix; otherwise the least loaded engine.
  };
  const std::vector<Case> cases = {
      {{0, 0, 0}, 0},        // Balanced: prefix wins.
      {{40, 10, 20}, 0},     // max - min = 30 <= 32: balanced.
      {{50, 10, 20}, 1},     // 40 > 32 and 50 > 15: shortest queue.
      {{200, 150, 160}, 0},  // 50 > 32 but 200 <= 225: balanced.
      {{33, 0, 5}, 1},       // 33 > 32 and 33 > 0.
      {{10, 60, 5}, 2},      // Imbalanced with the prefix engine not the busiest.
  };
  for (const Case& c : cases) {
    auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 3});
    const auto prefix = Blocks(7, 10);
    ASSERT_EQ(RouteBlocks(*router, prefix), EngineId(0));
    for (int32_t e = 0; e < 3; ++e) router->SetLoad(EngineId(e), c.loads[e]);
    EXPECT_EQ(RouteBlocks(*router, Extend(prefix, 8, 2)), EngineId(c.expect))
        << "loads " << c.loads[0] << "," << c.loads[1] << "," << c.loads[2];
  }
}

TEST(RouterCacheAwareTest, EqualMatchPrefersLowerLoad) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 3});
  const auto prefix = Blocks(3, 6);
  router->SetLoad(EngineId(1), 5);
  router->SetLoad(EngineId(2), 5);
  EXPECT_EQ(RouteBlocks(*router, prefix), EngineId(0));  // Smallest tree, lowest load.
  // Make engine 2 also hold the prefix by routing while engine 0 is imbalanced-busy.
  router->SetLoad(EngineId(0), 100);
  router->SetLoad(EngineId(1), 100);
  router->SetLoad(EngineId(2), 0);
  EXPECT_EQ(RouteBlocks(*router, prefix), EngineId(2));
  router->SetLoad(EngineId(0), 9);
  router->SetLoad(EngineId(1), 0);
  router->SetLoad(EngineId(2), 3);
  EXPECT_EQ(RouteBlocks(*router, prefix), EngineId(2));  // Both match 6; 3 < 9.
}

TEST(RouterCacheAwareTest, TreeIsBoundedAndForgetsLeastRecentlyUsed) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 1, .max_tree_size = 10});
  const auto old_session = Blocks(1, 8);
  RouteBlocks(*router, old_session);
  const auto new_session = Blocks(2, 8);
  RouteBlocks(*router, new_session);
  EXPECT_EQ(router->tree_size(EngineId(0)), 10);
  EXPECT_EQ(router->MatchedBlocks(EngineId(0), new_session), 8);
  // The old session lost its deepest blocks first; its root survives.
  EXPECT_EQ(router->MatchedBlocks(EngineId(0), old_session), 2);
}

TEST(RouterCacheAwareTest, RemovedEngineForgetsItsTree) {
  auto router = Make({.policy = RouterPolicy::kCacheAware, .num_engines = 2});
  const auto prefix = Blocks(5, 8);
  EXPECT_EQ(RouteBlocks(*router, prefix), EngineId(0));
  router->RemoveEngine(EngineId(0));
  router->AddEngine(EngineId(0));
  EXPECT_EQ(router->tree_size(EngineId(0)), 0);
  EXPECT_EQ(router->MatchedBlocks(EngineId(0), prefix), 0);
}

}  // namespace
}  // namespace agentkv::routing
