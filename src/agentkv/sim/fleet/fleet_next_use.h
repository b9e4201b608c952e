// FleetNextUse: the future of a fleet replay, as the oracle arm of `agentkv replay` hands it to
// every engine's cache (kv::NextUseRanking, offline-optimal eviction). In a fleet the order of
// requests depends on timing, so this is a clairvoyant eviction heuristic, not a proven
// optimum: it knows each agent's future requests in their recorded order and estimates when
// each will be looked up from the recorded gaps.
//
// Model. An agent is a sequence of requests, each with the prompt keys it looks up (exactly the
// chained keys the engines see). Agent a has a progress n_a (the first request not yet done) and
// an estimate E_a of when request n_a is looked up; request j >= n_a is estimated at
// E_a + offset_a[j] - offset_a[n_a], where offsets are the recorded times between requests
// (recorded server time plus gap). The rank of a key is the minimum, over the agents that still
// look it up at some request j >= n_a, of that estimate (nanoseconds of loop time); kNever when
// none does. Submitted(a, s, now) sets n_a = s, E_a = now (the request looks its keys up soon);
// Completed(a, s, ready) sets n_a = s + 1, E_a = ready. Both re-rank (RefreshNextUse) the keys of
// the requests concerned on every attached engine's cache; other keys of the agent keep the rank
// they had when they became evictable until they are next released or refreshed (the estimate of an
// agent's far future moves little between its requests).
//
// Deterministic; single-threaded. Memory follows the distinct keys, not the prompts: an agent's
// keys are kept once per run of turns (a request whose keys extend the previous one's shares
// them, as agentic turns do), the requests that look a key up are kept as runs of consecutive
// requests, and a flat hash index of the distinct keys is built once by Seal. NextUse(key) costs
// one probe of that index plus, when the rank is not memoized, one step per agent that looks `key`
// up (each agent's position among its runs advances with its progress; it is searched again only
// when the agent goes back). A memoized rank stays valid until one of the agents that look
// the key up progresses: private keys keep theirs across every other agent's progress.
#ifndef AGENTKV_SIM_FLEET_FLEET_NEXT_USE_H_
#define AGENTKV_SIM_FLEET_FLEET_NEXT_USE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/next_use_ranking.h"

namespace agentkv::sim {

class EngineModel;

class FleetNextUse final : public kv::NextUseRanking {
 public:
  FleetNextUse() = default;
  FleetNextUse(const FleetNextUse&) = delete;
  FleetNextUse& operator=(const FleetNextUse&) = delete;

  // Adds an agent and returns its index (0, 1, ... in call order). `prompt_keys[j]`: the keys
  // request j looks up; `offsets[j]`: its recorded time after request 0 (offsets[0] == 0,
  // non-decreasing, one per request); `first`: the estimated time request 0 is looked up.
  // Precondition: not sealed.
  int32_t AddAgent(std::vector<std::vector<kv::BlockKey>> prompt_keys, std::vector<TimeNs> offsets,
                   TimeNs first);
  // Builds the index. Call once, after the last AddAgent and before any other call.
  void Seal();
  // Re-ranks on `engine`'s cache too (its ranking must be this object,
  // EngineModel::SetNextUseRanking). `engine` must outlive this.
  void Attach(EngineModel* engine) { engines_.push_back(engine); }

  // Request `request` of `agent` was submitted at `now`.
  void Submitted(int32_t agent, int32_t request, TimeNs now);
  // Request `request` of `agent` completed; `next_ready` estimates when the next is looked up
  // (ignored after the last request).
  void Completed(int32_t agent, int32_t request, TimeNs next_ready);

  int64_t NextUse(kv::BlockKey key) const override;

  int32_t num_agents() const { return static_cast<int32_t>(agents_.size()); }

 private:
  struct Agent {
    // Request j's keys are keys[ranges[j].offset, + ranges[j].count).
    struct KeyRange {
      size_t offset = 0;
      size_t count = 0;
    };
    std::vector<kv::BlockKey> keys;
    std::vector<KeyRange> ranges;
    std::vector<TimeNs> offsets;
    int32_t next = 0;
    TimeNs estimate;
    size_t requests() const { return ranges.size(); }
    std::span<const kv::BlockKey> KeysOf(size_t j) const {
      return std::span<const kv::BlockKey>(keys).subspan(ranges[j].offset, ranges[j].count);
    }
  };
  // Consecutive requests [first, last] of one agent that look one key up.
  struct Run {
    int32_t first = 0;
    int32_t last = 0;
  };
  // The requests of one agent that look one key up: runs_[begin, end), ascending.
  struct Group {
    int32_t agent = 0;
    uint32_t begin = 0;
    uint32_t end = 0;
    uint32_t cursor = 0;
  };
  // The keys of request `request` of `agent` (when it exists) re-ranked on every cache; with
  // `also` >= 0, the keys of request `also` too, each key once, children before parents.
  void Refresh(int32_t agent, int32_t request, int32_t also = -1);
  // `agent` progressed: the memo of the keys it looks up is stale.
  void Progressed(int32_t agent);
  // Seal's last step: groups_ and ranges_ from each key's runs, runs_[start[id], start[id + 1]),
  // and the agent of each run.
  void BuildGroups(const std::vector<uint64_t>& start, const std::vector<int32_t>& agent_of_run);

  std::vector<Agent> agents_;
  bool sealed_ = false;
  // The distinct keys, dense ids in first-seen order (Seal). Open addressing, linear probing,
  // a power of two of slots at most half full; never erased.
  struct Slot {
    uint64_t key = 0;
    uint32_t id_plus_one = 0;
  };
  // The dense id of `key`, or -1.
  int64_t FindKey(uint64_t key) const;
  // The dense id of `key`, inserted with the next id when new.
  uint32_t FindOrAddKey(uint64_t key);
  std::vector<Slot> slots_;
  uint32_t num_keys_ = 0;
  // A key's groups_[begin, end), by agent, and its rank as of progress stamp `stamp`: valid while
  // no agent among its groups progressed since (version_ for a shared key, the agent's own
  // last progress for a private one).
  struct Range {
    uint32_t begin = 0;
    uint32_t end = 0;
    uint64_t stamp = 0;
    int64_t rank = 0;
  };
  std::vector<Run> runs_;
  // Mutable: each group's position, the first of its runs that reaches the agent's progress when
  // last read.
  mutable std::vector<Group> groups_;
  // Mutable: a memo of ranks, exact since ranks change only with progress.
  mutable std::vector<Range> ranges_;
  // Counts progress; an agent's `progressed` is the count at its last progress.
  uint64_t version_ = 1;
  std::vector<uint64_t> progressed_;
  std::vector<EngineModel*> engines_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_FLEET_NEXT_USE_H_
