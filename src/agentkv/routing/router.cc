#include "agentkv/routing/router.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/base/hash.h"

namespace agentkv::routing {
namespace {

std::string ValidNames() {
  std::string names;
  for (std::string_view name : kRouterPolicyNames) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

}  // namespace

StatusOr<RouterPolicy> ParseRouterPolicy(std::string_view name) {
  for (size_t i = 0; i < std::size(kRouterPolicyNames); ++i) {
    if (name == kRouterPolicyNames[i]) return static_cast<RouterPolicy>(i);
  }
  return InvalidArgumentError("unknown router policy '" + std::string(name) +
                              "'; valid: " + ValidNames());
}

std::string_view RouterPolicyName(RouterPolicy policy) {
  const auto index = static_cast<size_t>(policy);
  return index < std::size(kRouterPolicyNames) ? kRouterPolicyNames[index] : "invalid";
}

Status RouterOptions::Validate() const {
  if (static_cast<size_t>(policy) >= std::size(kRouterPolicyNames)) {
    return InvalidArgumentError("policy out of range: " + std::to_string(static_cast<int>(policy)));
  }
  if (num_engines < 1 || num_engines > 65536) {
    return InvalidArgumentError("num_engines out of [1, 65536]: " + std::to_string(num_engines));
  }
  if (virtual_nodes < 1 || virtual_nodes > 4096) {
    return InvalidArgumentError("virtual_nodes out of [1, 4096]: " + std::to_string(virtual_nodes));
  }
  if (!(cache_threshold >= 0 && cache_threshold <= 1)) {
    return InvalidArgumentError("cache_threshold out of [0, 1]: " +
                                std::to_string(cache_threshold));
  }
  if (balance_abs_threshold < 0 || balance_abs_threshold >= (int64_t{1} << 31)) {
    return InvalidArgumentError("balance_abs_threshold out of [0, 2^31): " +
                                std::to_string(balance_abs_threshold));
  }
  if (!(balance_rel_threshold >= 1 && balance_rel_threshold <= 1e6)) {
    return InvalidArgumentError("balance_rel_threshold out of [1, 1e6]: " +
                                std::to_string(balance_rel_threshold));
  }
  if (max_tree_size < 1 || max_tree_size >= (int64_t{1} << 31)) {
    return InvalidArgumentError("max_tree_size out of [1, 2^31): " + std::to_string(max_tree_size));
  }
  return Status();
}

StatusOr<std::unique_ptr<Router>> Router::Create(const RouterOptions& options) {
  if (Status status = options.Validate(); !status.ok()) return status;
  return std::unique_ptr<Router>(new Router(options));
}

Router::Router(const RouterOptions& options) : policy_(options.policy), options_(options) {
  for (int32_t i = 0; i < options.num_engines; ++i) AddEngine(EngineId(i));
}

size_t Router::IndexOf(EngineId engine) const {
  auto it = std::lower_bound(engines_.begin(), engines_.end(), engine);
  AGENTKV_CHECK(it != engines_.end() && *it == engine) << "unknown engine " << engine;
  return static_cast<size_t>(it - engines_.begin());
}

uint64_t Router::PointHash(EngineId engine, int32_t vnode) const {
  const uint64_t engine_part = static_cast<uint64_t>(static_cast<uint32_t>(engine.value()));
  return Mix64(Mix64(options_.seed ^ 0x6a09e667f3bcc909ULL) ^
               (engine_part << 32 | static_cast<uint32_t>(vnode)));
}

void Router::AddEngine(EngineId engine) {
  auto it = std::lower_bound(engines_.begin(), engines_.end(), engine);
  AGENTKV_CHECK(it == engines_.end() || *it != engine) << "engine " << engine << " exists";
  const auto index = it - engines_.begin();
  engines_.insert(it, engine);
  loads_.insert(loads_.begin() + index, 0);
  trees_.insert(trees_.begin() + index, std::make_unique<Tree>());
  if (policy_ == RouterPolicy::kConsistentHashing) {
    for (int32_t v = 0; v < options_.virtual_nodes; ++v) {
      ring_.push_back(RingPoint{PointHash(engine, v), engine});
    }
    std::sort(ring_.begin(), ring_.end());
  }
}

void Router::RemoveEngine(EngineId engine) {
  const size_t index = IndexOf(engine);
  engines_.erase(engines_.begin() + static_cast<std::ptrdiff_t>(index));
  loads_.erase(loads_.begin() + static_cast<std::ptrdiff_t>(index));
  trees_.erase(trees_.begin() + static_cast<std::ptrdiff_t>(index));
  std::erase_if(ring_, [engine](const RingPoint& p) { return p.engine == engine; });
}

void Router::SetLoad(EngineId engine, int64_t in_flight) {
  AGENTKV_CHECK_GE(in_flight, 0);
  loads_[IndexOf(engine)] = in_flight;
}

int64_t Router::load(EngineId engine) const { return loads_[IndexOf(engine)]; }

int64_t Router::tree_size(EngineId engine) const {
  return static_cast<int64_t>(trees_[IndexOf(engine)]->lru.size());
}

int64_t Router::MatchedBlocks(EngineId engine, std::span<const uint64_t> block_keys) const {
  const Tree& tree = *trees_[IndexOf(engine)];
  int64_t matched = 0;
  for (uint64_t key : block_keys) {
    if (!tree.where.contains(key)) break;
    ++matched;
  }
  return matched;
}

EngineId Router::Route(const RouteRequest& request) {
  AGENTKV_CHECK(!engines_.empty()) << "Route with no engines";
  switch (policy_) {
    case RouterPolicy::kRoundRobin:
      return RouteRoundRobin();
    case RouterPolicy::kConsistentHashing:
      return RouteConsistentHashing(request.routing_key);
    case RouterPolicy::kCacheAware:
      return RouteCacheAware(request.block_keys);
  }
  AGENTKV_CHECK(false) << "unreachable";
  return EngineId();
}

std::optional<EngineId> Router::StickyEngine(uint64_t routing_key) const {
  if (policy_ != RouterPolicy::kConsistentHashing || engines_.empty()) return std::nullopt;
  return RouteConsistentHashing(routing_key);
}

EngineId Router::RouteRoundRobin() {
  const EngineId chosen = engines_[round_robin_next_ % engines_.size()];
  ++round_robin_next_;
  return chosen;
}

EngineId Router::RouteConsistentHashing(uint64_t key) const {
  const uint64_t h = Mix64(key ^ Mix64(options_.seed));
  auto it = std::lower_bound(ring_.begin(), ring_.end(), RingPoint{h, EngineId(INT32_MIN)});
  if (it == ring_.end()) it = ring_.begin();
  return it->engine;
}

EngineId Router::RouteCacheAware(std::span<const uint64_t> block_keys) {
  const size_t n = engines_.size();
  // Lower load, then lower EngineId (the index order), wins a tie.
  size_t least_loaded = 0;
  for (size_t i = 1; i < n; ++i) {
    if (loads_[i] < loads_[least_loaded]) least_loaded = i;
  }
  int64_t max_load = 0;
  for (int64_t load : loads_) max_load = std::max(max_load, load);
  const int64_t min_load = loads_[least_loaded];
  const bool imbalanced = max_load - min_load > options_.balance_abs_threshold &&
                          static_cast<double>(max_load) >
                              options_.balance_rel_threshold * static_cast<double>(min_load);

  size_t chosen = least_loaded;
  if (!imbalanced) {
    size_t best = 0;
    int64_t best_match = -1;
    size_t smallest = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t match = MatchedBlocks(engines_[i], block_keys);
      if (match > best_match || (match == best_match && loads_[i] < loads_[best])) {
        best = i;
        best_match = match;
      }
      const size_t size_i = trees_[i]->lru.size();
      const size_t size_s = trees_[smallest]->lru.size();
      if (size_i < size_s || (size_i == size_s && loads_[i] < loads_[smallest])) smallest = i;
    }
    const double match_rate = block_keys.empty() ? 0.0
                                                 : static_cast<double>(best_match) /
                                                       static_cast<double>(block_keys.size());
    chosen = match_rate > options_.cache_threshold ? best : smallest;
  }
  Remember(chosen, block_keys);
  return engines_[chosen];
}

void Router::Remember(size_t index, std::span<const uint64_t> block_keys) {
  Tree& tree = *trees_[index];
  // Deepest first, so that a prefix is always more recent than its extensions and LRU
  // trimming removes leaves before their parents.
  for (auto it = block_keys.rbegin(); it != block_keys.rend(); ++it) {
    if (auto found = tree.where.find(*it); found != tree.where.end()) {
      tree.lru.splice(tree.lru.end(), tree.lru, found->second);
    } else {
      tree.lru.push_back(*it);
      tree.where.emplace(*it, std::prev(tree.lru.end()));
    }
  }
  while (static_cast<int64_t>(tree.lru.size()) > options_.max_tree_size) {
    tree.where.erase(tree.lru.front());
    tree.lru.pop_front();
  }
}

}  // namespace agentkv::routing
