// Router: places each request on one engine of a fleet, as sgl-router does it.
//
// Policies (names as sgl-router spells them; docs/PROTOCOL.md 10.7):
//  - "round_robin": cycles through the engines in ascending EngineId order.
//  - "consistent_hashing": sticky on the request's routing key (the session id, as Relax
//    sends in X-SMG-Routing-Key). A seeded hash ring with `virtual_nodes` points per engine;
//    a key goes to the first point clockwise of its hash. Adding or removing an engine moves
//    only the keys that land on (or landed on) that engine's points.
//  - "cache_aware": sgl-router's cache-aware policy over block keys instead of text. Per
//    engine the model keeps the set of chained block keys (kv::BlockKey values: a key stands
//    for its whole prefix) of the requests routed there, bounded by `max_tree_size` keys with
//    LRU trimming, which approximates that engine's radix tree. On each request:
//      1. Load is the in-flight request count the caller reports with SetLoad. The fleet is
//         imbalanced when max - min > balance_abs_threshold AND max > balance_rel_threshold *
//         min; then the request goes to the least loaded engine.
//      2. Otherwise, match = leading block keys of the request present in an engine's set;
//         match_rate = best match / request blocks. If match_rate > cache_threshold the
//         request goes to the engine with the best match, else to the engine with the
//         smallest tree (fewest keys).
//      3. The chosen engine's set records the request's keys.
//    Ties break by lower load, then lower EngineId. A request without blocks has
//    match_rate 0.
// Differences from sgl-router: its tree holds text (or tokens) and is trimmed by a periodic
// LRU pass (`eviction_interval`); here trimming is immediate and per engine.
//
// Deterministic: a pure function of the options (including `seed`) and the call sequence.
// Hash maps are looked up, never iterated. Thread-compatible; not copyable.
#ifndef AGENTKV_ROUTING_ROUTER_H_
#define AGENTKV_ROUTING_ROUTER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"

namespace agentkv::routing {

enum class RouterPolicy { kRoundRobin, kConsistentHashing, kCacheAware };

// The policy names as sgl-router's --policy spells them, in enum order.
inline constexpr std::string_view kRouterPolicyNames[] = {"round_robin", "consistent_hashing",
                                                          "cache_aware"};

// Parses a policy name. InvalidArgument listing the valid names when unknown.
StatusOr<RouterPolicy> ParseRouterPolicy(std::string_view name);
// The policy's sgl-router name; "invalid" for a value outside the enum.
std::string_view RouterPolicyName(RouterPolicy policy);

struct RouterOptions {
  // Default: cache_aware (sgl-router's default).
  RouterPolicy policy = RouterPolicy::kCacheAware;
  // Engines 0 .. num_engines-1 exist at creation. Default: 1. Range: [1, 65536].
  int32_t num_engines = 1;
  // Seeds the consistent-hashing ring. Default: 0.
  uint64_t seed = 0;
  // Ring points per engine (consistent_hashing). Default: 160. Range: [1, 4096].
  int32_t virtual_nodes = 160;
  // cache_aware: route by prefix when match_rate exceeds this. Default: 0.5. Range: [0, 1].
  double cache_threshold = 0.5;
  // cache_aware: imbalance needs max - min load above this. Default: 32. Range: [0, 2^31).
  int64_t balance_abs_threshold = 32;
  // cache_aware: and max load above this times min load. Default: 1.5. Range: [1, 1e6].
  // (Relax deploys with balance_abs_threshold 10 and balance_rel_threshold 1.2.)
  double balance_rel_threshold = 1.5;
  // cache_aware: block keys remembered per engine. Default: 1 << 20. Range: [1, 2^31).
  int64_t max_tree_size = int64_t{1} << 20;

  // InvalidArgument naming the first bad option.
  Status Validate() const;
};

// What the router sees of one request.
struct RouteRequest {
  // The sticky key (session id) for consistent_hashing.
  uint64_t routing_key = 0;
  // The request's chained block keys, root first, for cache_aware. Not retained.
  std::span<const uint64_t> block_keys;
};

class Router {
 public:
  // Validates `options` and builds the router.
  static StatusOr<std::unique_ptr<Router>> Create(const RouterOptions& options);

  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  RouterPolicy policy() const { return policy_; }
  // The live engines, ascending.
  const std::vector<EngineId>& engines() const { return engines_; }

  // Adds an engine with load 0 and an empty tree. Precondition: not already present.
  void AddEngine(EngineId engine);
  // Removes an engine and everything the router knew of it. Precondition: present.
  void RemoveEngine(EngineId engine);

  // Reports an engine's in-flight request count (cache_aware's load). Precondition: present.
  void SetLoad(EngineId engine, int64_t in_flight);
  int64_t load(EngineId engine) const;

  // Picks the engine for `request` and updates the policy state (round-robin cursor,
  // cache_aware tree). Precondition: at least one engine.
  EngineId Route(const RouteRequest& request);

  // consistent_hashing: the engine `routing_key` lands on (what Route would pick, without
  // routing anything); nullopt for the other policies, whose choice depends on state. Lets
  // admission check the engine a request will land on before it is routed.
  std::optional<EngineId> StickyEngine(uint64_t routing_key) const;

  // cache_aware: block keys remembered for `engine`; 0 for other policies.
  int64_t tree_size(EngineId engine) const;
  // cache_aware: the number of leading `block_keys` remembered for `engine`.
  int64_t MatchedBlocks(EngineId engine, std::span<const uint64_t> block_keys) const;

 private:
  // The LRU set of block keys routed to one engine (front = least recently used).
  struct Tree {
    std::list<uint64_t> lru;
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  };
  struct RingPoint {
    uint64_t hash;
    EngineId engine;
    friend auto operator<=>(const RingPoint&, const RingPoint&) = default;
  };

  explicit Router(const RouterOptions& options);

  // Index of `engine` in engines_; CHECK-fails when absent.
  size_t IndexOf(EngineId engine) const;
  uint64_t PointHash(EngineId engine, int32_t vnode) const;
  EngineId RouteRoundRobin();
  EngineId RouteConsistentHashing(uint64_t key) const;
  EngineId RouteCacheAware(std::span<const uint64_t> block_keys);
  void Remember(size_t index, std::span<const uint64_t> block_keys);

  RouterPolicy policy_;
  RouterOptions options_;
  // Parallel vectors, ascending by EngineId.
  std::vector<EngineId> engines_;
  std::vector<int64_t> loads_;
  std::vector<std::unique_ptr<Tree>> trees_;
  uint64_t round_robin_next_ = 0;
  // Sorted by (hash, engine).
  std::vector<RingPoint> ring_;
};

}  // namespace agentkv::routing

#endif  // AGENTKV_ROUTING_ROUTER_H_
