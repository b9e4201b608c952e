#include "agentkv/sim/fleet_next_use.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::sim {

int32_t FleetNextUse::AddAgent(std::vector<std::vector<kv::BlockKey>> prompt_keys,
                               std::vector<TimeNs> offsets, TimeNs first) {
  AGENTKV_CHECK(!sealed_);
  AGENTKV_CHECK(prompt_keys.size() == offsets.size());
  for (size_t j = 0; j < offsets.size(); ++j) {
    AGENTKV_CHECK(j == 0 ? offsets[j] == TimeNs(0) : offsets[j] >= offsets[j - 1]);
  }
  Agent agent;
  agent.prompt_keys = std::move(prompt_keys);
  agent.offsets = std::move(offsets);
  agent.estimate = first;
  agents_.push_back(std::move(agent));
  return static_cast<int32_t>(agents_.size() - 1);
}

void FleetNextUse::Seal() {
  AGENTKV_CHECK(!sealed_);
  sealed_ = true;
  std::vector<std::tuple<uint64_t, int32_t, int32_t>> all;
  size_t total = 0;
  for (const Agent& a : agents_) {
    for (const auto& keys : a.prompt_keys) total += keys.size();
  }
  all.reserve(total);
  for (size_t a = 0; a < agents_.size(); ++a) {
    const Agent& agent = agents_[a];
    for (size_t j = 0; j < agent.prompt_keys.size(); ++j) {
      for (const kv::BlockKey key : agent.prompt_keys[j]) {
        all.emplace_back(key.value(), static_cast<int32_t>(a), static_cast<int32_t>(j));
      }
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  AGENTKV_CHECK(all.size() < (size_t{1} << 32));
  requests_.reserve(all.size());
  for (size_t i = 0; i < all.size();) {
    const uint64_t key = std::get<0>(all[i]);
    const auto first_group = static_cast<uint32_t>(groups_.size());
    while (i < all.size() && std::get<0>(all[i]) == key) {
      const int32_t agent = std::get<1>(all[i]);
      Group group{agent, static_cast<uint32_t>(requests_.size()), 0};
      for (; i < all.size() && std::get<0>(all[i]) == key && std::get<1>(all[i]) == agent; ++i) {
        requests_.push_back(std::get<2>(all[i]));
      }
      group.end = static_cast<uint32_t>(requests_.size());
      groups_.push_back(group);
    }
    range_.emplace(key, Range{first_group, static_cast<uint32_t>(groups_.size())});
  }
}

void FleetNextUse::Refresh(int32_t agent, int32_t request) {
  const Agent& a = agents_[static_cast<size_t>(agent)];
  if (request < 0 || static_cast<size_t>(request) >= a.prompt_keys.size()) return;
  for (kv::KvCacheManager* cache : caches_) {
    // Deepest first: a parent's refresh reads its children's fresh ranks.
    const std::vector<kv::BlockKey>& keys = a.prompt_keys[static_cast<size_t>(request)];
    for (size_t i = keys.size(); i-- > 0;) cache->RefreshNextUse(keys[i]);
  }
}

void FleetNextUse::Submitted(int32_t agent, int32_t request, TimeNs now) {
  AGENTKV_CHECK(sealed_);
  Agent& a = agents_[static_cast<size_t>(agent)];
  AGENTKV_CHECK(request >= 0 && static_cast<size_t>(request) < a.prompt_keys.size());
  // On time as estimated (the usual case: submitted when its gap elapsed): no rank changes.
  if (a.next == request && a.estimate == now) return;
  a.next = request;
  a.estimate = now;
  ++version_;
  Refresh(agent, request);
}

void FleetNextUse::Completed(int32_t agent, int32_t request, TimeNs next_ready) {
  AGENTKV_CHECK(sealed_);
  Agent& a = agents_[static_cast<size_t>(agent)];
  AGENTKV_CHECK(request >= 0 && static_cast<size_t>(request) < a.prompt_keys.size());
  a.next = request + 1;
  a.estimate = next_ready;
  ++version_;
  Refresh(agent, request);
  Refresh(agent, request + 1);
}

int64_t FleetNextUse::NextUse(kv::BlockKey key) const {
  auto it = range_.find(key.value());
  if (it == range_.end()) return kNever;
  Range& range = it->second;
  if (range.version == version_) return range.rank;
  int64_t best = kNever;
  for (uint32_t g = range.begin; g < range.end; ++g) {
    const Group& group = groups_[g];
    const Agent& a = agents_[static_cast<size_t>(group.agent)];
    const int32_t* const end = requests_.data() + group.end;
    const int32_t* const found = std::lower_bound(requests_.data() + group.begin, end, a.next);
    if (found == end) continue;
    const TimeNs at = SaturatingAdd(a.estimate, a.offsets[static_cast<size_t>(*found)] -
                                                    a.offsets[static_cast<size_t>(a.next)]);
    best = std::min(best, at.ns());
  }
  range.version = version_;
  range.rank = best;
  return best;
}

}  // namespace agentkv::sim
