#include "agentkv/sim/fleet/fleet_next_use.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/sim/fleet/engine_model.h"

namespace agentkv::sim {

int32_t FleetNextUse::AddAgent(std::vector<std::vector<kv::BlockKey>> prompt_keys,
                               std::vector<TimeNs> offsets, TimeNs first) {
  AGENTKV_CHECK(!sealed_);
  AGENTKV_CHECK(prompt_keys.size() == offsets.size());
  for (size_t j = 0; j < offsets.size(); ++j) {
    AGENTKV_CHECK(j == 0 ? offsets[j] == TimeNs(0) : offsets[j] >= offsets[j - 1]);
  }
  Agent agent;
  agent.ranges.reserve(prompt_keys.size());
  for (std::vector<kv::BlockKey>& keys : prompt_keys) {
    Agent::KeyRange range{agent.keys.size(), keys.size()};
    if (!agent.ranges.empty()) {
      const Agent::KeyRange& last = agent.ranges.back();
      const auto previous = agent.keys.begin() + static_cast<std::ptrdiff_t>(last.offset);
      // Extends the previous request's keys, which end the array: share them.
      if (last.offset + last.count == agent.keys.size() && keys.size() >= last.count &&
          std::equal(previous, previous + static_cast<std::ptrdiff_t>(last.count), keys.begin())) {
        range.offset = last.offset;
        agent.keys.insert(agent.keys.end(), keys.begin() + static_cast<std::ptrdiff_t>(last.count),
                          keys.end());
        agent.ranges.push_back(range);
        std::vector<kv::BlockKey>().swap(keys);
        continue;
      }
    }
    agent.keys.insert(agent.keys.end(), keys.begin(), keys.end());
    agent.ranges.push_back(range);
    std::vector<kv::BlockKey>().swap(keys);
  }
  agent.offsets = std::move(offsets);
  agent.estimate = first;
  agents_.push_back(std::move(agent));
  return static_cast<int32_t>(agents_.size() - 1);
}

namespace {

// The home slot of `key` in a table of `mask` + 1 slots (keys are chained hashes already; the
// multiply spreads any structure left in their low bits).
size_t Home(uint64_t key, size_t mask) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> 32) & mask;
}

// (agent, request) packed so that packed order is (agent, request) order; 0 is "none".
uint64_t Pack(size_t agent, size_t request) {
  return ((static_cast<uint64_t>(agent) << 32) | static_cast<uint32_t>(request)) + 1;
}

// Visits every key of every request of `agents` in (agent, request) order, each key once per
// request: `start(id, a, j)` when request j of agent a begins a run of that agent's consecutive
// requests that look key `id` up, `extend(id, j)` when it continues the run of request j - 1.
// `id_of(key)` is the key's dense id (a new one is the next integer); `ids` the expected count.
template <typename Agents, typename IdOf, typename Start, typename Extend>
void VisitRuns(const Agents& agents, size_t ids, const IdOf& id_of, const Start& start,
               const Extend& extend) {
  // Per key, the last (agent, request) that looked it up.
  std::vector<uint64_t> last;
  last.reserve(ids);
  for (size_t a = 0; a < agents.size(); ++a) {
    for (size_t j = 0; j < agents[a].requests(); ++j) {
      for (const kv::BlockKey key : agents[a].KeysOf(j)) {
        const size_t id = id_of(key);
        if (id >= last.size()) last.resize(id + 1, 0);
        if (last[id] == Pack(a, j)) continue;
        const bool extends = j > 0 && last[id] == Pack(a, j - 1);
        last[id] = Pack(a, j);
        if (extends) {
          extend(id, j);
        } else {
          start(id, a, j);
        }
      }
    }
  }
}

}  // namespace

int64_t FleetNextUse::FindKey(uint64_t key) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(key, mask);; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.id_plus_one == 0) return -1;
    if (slot.key == key) return slot.id_plus_one - 1;
  }
}

uint32_t FleetNextUse::FindOrAddKey(uint64_t key) {
  if ((static_cast<size_t>(num_keys_) + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(1024, old.size() * 2), Slot{});
    const size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.id_plus_one == 0) continue;
      size_t i = Home(slot.key, mask);
      while (slots_[i].id_plus_one != 0) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }
  const size_t mask = slots_.size() - 1;
  size_t i = Home(key, mask);
  for (; slots_[i].id_plus_one != 0; i = (i + 1) & mask) {
    if (slots_[i].key == key) return slots_[i].id_plus_one - 1;
  }
  AGENTKV_CHECK(num_keys_ < UINT32_MAX - 1);
  slots_[i] = Slot{key, ++num_keys_};
  return num_keys_ - 1;
}

void FleetNextUse::Seal() {
  AGENTKV_CHECK(!sealed_);
  sealed_ = true;
  progressed_.assign(agents_.size(), 0);
  // The index sized once for every key an agent keeps (at least the distinct keys): growing it
  // by doubling would hold the old table beside one twice its size, the run's peak of memory.
  size_t kept_keys = 0;
  for (const Agent& agent : agents_) kept_keys += agent.keys.size();
  size_t slots = 1024;
  while (slots < 2 * kept_keys) slots *= 2;
  slots_.assign(slots, Slot{});
  // Pass 1: a dense id per distinct key, and how many runs of consecutive requests of one agent
  // look it up (a request that looks it up right after the agent's previous one extends a run).
  std::vector<uint32_t> count;
  count.reserve(kept_keys);
  VisitRuns(
      agents_, kept_keys,
      [&](kv::BlockKey key) {
        const uint32_t id = FindOrAddKey(key.value());
        if (id == count.size()) count.push_back(0);
        return static_cast<size_t>(id);
      },
      [&](size_t id, size_t, size_t) { ++count[id]; }, [](size_t, size_t) {});
  // Pass 2: the runs of each key in (agent, first request) order, as agents and requests are
  // visited in that order. next[id] is where the key's next run goes; the run being extended
  // is the one before it (a key's runs are written one after the other).
  std::vector<uint64_t> next(count.size() + 1, 0);
  for (size_t id = 0; id < count.size(); ++id) next[id + 1] = next[id] + count[id];
  std::vector<uint32_t>().swap(count);
  AGENTKV_CHECK(next.back() < (uint64_t{1} << 32));
  std::vector<int32_t> agent_of_run(next.back());
  runs_.resize(next.back());
  VisitRuns(
      agents_, next.size() - 1,
      [&](kv::BlockKey key) { return static_cast<size_t>(FindKey(key.value())); },
      [&](size_t id, size_t a, size_t j) {
        const uint64_t run = next[id]++;
        runs_[run] = Run{static_cast<int32_t>(j), static_cast<int32_t>(j)};
        agent_of_run[run] = static_cast<int32_t>(a);
      },
      [&](size_t id, size_t j) { runs_[next[id] - 1].last = static_cast<int32_t>(j); });
  // Each key's runs now end where the next key's begin: shift the cursors back to the starts.
  for (size_t id = next.size() - 1; id > 0; --id) next[id] = next[id - 1];
  next[0] = 0;
  BuildGroups(next, agent_of_run);
}

void FleetNextUse::BuildGroups(const std::vector<uint64_t>& start,
                               const std::vector<int32_t>& agent_of_run) {
  const size_t num_keys = start.size() - 1;
  const auto groups_of = [&](size_t id, const auto& emit) {
    for (uint64_t e = start[id]; e < start[id + 1];) {
      const int32_t agent = agent_of_run[e];
      const auto begin = static_cast<uint32_t>(e);
      while (e < start[id + 1] && agent_of_run[e] == agent) ++e;
      emit(Group{agent, begin, static_cast<uint32_t>(e), begin});
    }
  };
  // Counted first, so that the array is allocated once.
  size_t num_groups = 0;
  for (size_t id = 0; id < num_keys; ++id) groups_of(id, [&](const Group&) { ++num_groups; });
  groups_.reserve(num_groups);
  ranges_.resize(num_keys);
  for (size_t id = 0; id < num_keys; ++id) {
    ranges_[id].begin = static_cast<uint32_t>(groups_.size());
    groups_of(id, [&](const Group& group) { groups_.push_back(group); });
    ranges_[id].end = static_cast<uint32_t>(groups_.size());
  }
}

void FleetNextUse::Refresh(int32_t agent, int32_t request, int32_t also) {
  const Agent& a = agents_[static_cast<size_t>(agent)];
  const auto exists = [&](int32_t r) { return r >= 0 && static_cast<size_t>(r) < a.requests(); };
  if (!exists(request)) return;
  const std::span<const kv::BlockKey> keys = a.KeysOf(static_cast<size_t>(request));
  const std::optional<std::span<const kv::BlockKey>> also_keys =
      exists(also) ? std::optional(a.KeysOf(static_cast<size_t>(also))) : std::nullopt;
  // The keys `request` shares with `also` are a common prefix (keys are chained): refreshed once,
  // with `also`'s.
  size_t common = 0;
  if (also_keys.has_value()) {
    while (common < keys.size() && common < also_keys->size() &&
           keys[common] == (*also_keys)[common]) {
      ++common;
    }
  }
  for (EngineModel* engine : engines_) {
    // Deepest first: a parent's refresh reads its children's fresh ranks.
    const size_t own_from = also_keys.has_value() ? common : 0;
    for (size_t i = keys.size(); i-- > own_from;) engine->RefreshNextUse(keys[i]);
    if (!also_keys.has_value()) continue;
    for (size_t i = also_keys->size(); i-- > 0;) engine->RefreshNextUse((*also_keys)[i]);
  }
}

void FleetNextUse::Progressed(int32_t agent) {
  progressed_[static_cast<size_t>(agent)] = ++version_;
}

void FleetNextUse::Submitted(int32_t agent, int32_t request, TimeNs now) {
  AGENTKV_CHECK(sealed_);
  Agent& a = agents_[static_cast<size_t>(agent)];
  AGENTKV_CHECK(request >= 0 && static_cast<size_t>(request) < a.requests());
  // On time as estimated (the usual case: submitted when its gap elapsed): no rank changes.
  if (a.next == request && a.estimate == now) return;
  a.next = request;
  a.estimate = now;
  Progressed(agent);
  Refresh(agent, request);
}

void FleetNextUse::Completed(int32_t agent, int32_t request, TimeNs next_ready) {
  AGENTKV_CHECK(sealed_);
  Agent& a = agents_[static_cast<size_t>(agent)];
  AGENTKV_CHECK(request >= 0 && static_cast<size_t>(request) < a.requests());
  a.next = request + 1;
  a.estimate = next_ready;
  Progressed(agent);
  Refresh(agent, request, request + 1);
}

int64_t FleetNextUse::NextUse(kv::BlockKey key) const {
  const int64_t id = FindKey(key.value());
  if (id < 0) return kNever;
  Range& range = ranges_[static_cast<size_t>(id)];
  AGENTKV_DCHECK(range.end > range.begin);
  const uint64_t stale_before = range.end - range.begin == 1
                                    ? progressed_[static_cast<size_t>(groups_[range.begin].agent)]
                                    : version_;
  if (range.stamp != 0 && range.stamp >= stale_before) return range.rank;
  int64_t best = kNever;
  for (uint32_t g = range.begin; g < range.end; ++g) {
    Group& group = groups_[g];
    const Agent& a = agents_[static_cast<size_t>(group.agent)];
    const Run* const runs = runs_.data();
    uint32_t at = group.cursor;
    // Progress is forward but for a resubmission: search again only when it went back.
    if (at > group.begin && runs[at - 1].last >= a.next) {
      at = static_cast<uint32_t>(
          std::lower_bound(runs + group.begin, runs + at, a.next,
                           [](const Run& run, int32_t next) { return run.last < next; }) -
          runs);
    }
    while (at < group.end && runs[at].last < a.next) ++at;
    group.cursor = at;
    if (at == group.end) continue;
    // The first request of the run at or after the agent's progress.
    const int32_t request = std::max(runs[at].first, a.next);
    const TimeNs when = SaturatingAdd(a.estimate, a.offsets[static_cast<size_t>(request)] -
                                                      a.offsets[static_cast<size_t>(a.next)]);
    best = std::min(best, when.ns());
  }
  range.stamp = version_;
  range.rank = best;
  return best;
}

}  // namespace agentkv::sim
