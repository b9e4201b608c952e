// StallOffloadPolicy: stall offload (Tokencake, arXiv 2510.18586) for one engine. When a
// session enters a long pause (a tool call, a wait for sub-agents, a human's turn: the
// request's agentkv_pause, a PauseKind) while the engine's KV pool is under pressure, its
// KV moves to the host tier ahead of demand, and it is loaded back before the session's
// predicted return.
//
// Decisions (Plan, const; the engine applies them to its kv::KvCacheManager):
//  - Pressure: device usage, the blocks held or cached over the device tier (what is not
//    free), above `pressure_threshold`. Under pressure, paused sessions whose predicted return
//    is far enough ahead are offloaded, farthest return first, until usage is back at the
//    threshold. A session qualifies when its predicted return is at least `min_stall` ahead
//    and at least twice the host-link time of its KV (the way out and the way back): no
//    offload for short pauses, none without pressure.
//  - Predicted return: the time by which `return_quantile` of the pauses of the session's
//    class that lasted as long as this one have ended (kv::PauseEstimator on the octave grid,
//    learned online per class at every return; the estimator Continuum's TTL policy shares). A low
//    quantile, so that most sessions come back after their KV did.
//  - Prefetch: at the predicted return minus the host-link time of the offloaded blocks
//    (CostModel::HostTransferTime), when no request waits and the blocks running requests
//    hold plus the prefetch stay within the threshold: a prefetch never competes with running
//    or waiting requests for the device, and the room it takes is the cache's own least
//    valuable blocks (its eviction order), which a host tier keeps.
//  - A session that returns before its prefetch finds its KV on the host and onboards it, as
//    any host hit (the step's cost model prices and overlaps the load).
//
// The mechanism is the cache's (OffloadChain, PrefetchChain): blocks running requests hold
// never move, a shared prefix stays on the device, each tier stays closed under prefixes, and
// nothing is pinned. Pure: no I/O, clocks or globals; time enters as arguments (the driver's
// clock: simulated or wall). Deterministic: sessions are visited in conversation id order.
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Copyable value.
#ifndef AGENTKV_ENGINE_STALL_OFFLOAD_POLICY_H_
#define AGENTKV_ENGINE_STALL_OFFLOAD_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/pause_estimator.h"

namespace agentkv::engine {

// The pause classes stall offload keeps apart: a main agent's tool call, a sub-agent's tool
// call (a request with a parent conversation), a wait for sub-agents, a human's turn.
inline constexpr kv::PauseClass kStallToolCallClass{PauseKind::kToolCall};
inline constexpr kv::PauseClass kStallSubagentToolCallClass{PauseKind::kToolCall, /*sub=*/true};
inline constexpr kv::PauseClass kStallSubagentWaitClass{PauseKind::kSubagentWait};
inline constexpr kv::PauseClass kStallHumanTurnClass{PauseKind::kHumanTurn};

// The class of the pause `pause` announces for a request of a sub-agent (`subagent`) or not;
// nullopt for an unknown pause and the end of the session (IsReturningPause).
std::optional<kv::PauseClass> StallPauseClass(PauseKind pause, bool subagent);

struct StallOffloadOptions {
  // Device usage (blocks held or cached over the device tier) above which paused sessions'
  // KV moves to the host. Default: 0.95 (measured: docs/REPLAY.md, stall offload). Range:
  // (0, 1].
  double pressure_threshold = 0.95;
  // The predicted return is the time by which this share of the class's pauses that lasted
  // as long have ended. Default: 0.25. Range: (0, 1).
  double return_quantile = 0.25;
  // The least time to the predicted return for which a session is offloaded.
  // Default: 2 s. Range: [0, 1 day].
  TimeNs min_stall = TimeNs::Seconds(2);
  // The pause estimator's grid, prior and fading. Default:
  // kv::PauseEstimator::DistributionOptions() (octaves from 250 ms, 4 prior samples of mean
  // 2 s, halved at 4096). Ranges: PauseEstimator::Options.
  kv::PauseEstimator::Options pauses = kv::PauseEstimator::DistributionOptions();

  // InvalidArgument naming the first field out of range.
  Status Validate() const;
};

// One planned move.
struct StallMove {
  ConversationId conversation;
  // Offload: the predicted return (absolute time). Prefetch: unused.
  TimeNs predicted_return;
  // Prefetch: the most blocks the device may take for it.
  int64_t max_blocks = 0;
};

// What Plan decided at one instant.
struct StallPlan {
  // Prefetches due now, in conversation order, each within the room left by those before.
  std::vector<StallMove> prefetches;
  // Offload candidates, farthest predicted return first; the engine offloads them in order
  // until it has freed `blocks_to_free` device blocks (0: no pressure, no offload).
  std::vector<StallMove> offloads;
  int64_t blocks_to_free = 0;
};

struct StallOffloadCounters {
  // Pauses started (a hinted request ended), and ended by the session's next request.
  int64_t pauses = 0;
  int64_t returns = 0;
  // Sessions offloaded and the blocks moved; sessions and blocks prefetched.
  int64_t offloads = 0;
  int64_t offloaded_blocks = 0;
  int64_t prefetches = 0;
  int64_t prefetched_blocks = 0;
  // Returns that found their KV still offloaded (the request onboards it), and returns after
  // a prefetch.
  int64_t returned_offloaded = 0;
  int64_t returned_prefetched = 0;

  friend bool operator==(const StallOffloadCounters&, const StallOffloadCounters&) = default;
};

class StallOffloadPolicy {
 public:
  // Validates `options` (InvalidArgument naming the field).
  static StatusOr<StallOffloadPolicy> Create(const StallOffloadOptions& options);

  const StallOffloadOptions& options() const { return options_; }
  const kv::PauseEstimator& pauses() const { return pauses_; }
  const StallOffloadCounters& counters() const { return counters_; }

  // A request reached the engine at `now` with its keys (`keys`: its prompt then output keys).
  // Its program is its conversation, else its session (same id; an engine that sees sessions
  // only), else it has none and is ignored. A request of a paused program ends the pause: its
  // length is learned, and an offloaded chain not yet prefetched is left to the request (it
  // onboards it as any host hit). A request with a program and a pause hint
  // (kv_options.next_pause) is remembered until it ends.
  void OnSubmit(RequestId request, const kv::RequestOptions& kv_options,
                std::vector<kv::BlockKey> keys, TimeNs now);
  // `request` ended at `now`. A completed request with a hint starts its conversation's pause;
  // an aborted or refused one (`completed` false: its session is closing) starts none. Unknown
  // ids are a no-op.
  void OnFinish(RequestId request, bool completed, TimeNs now);

  // The moves due at `now` on an engine whose cache is `cache`, with `waiting_requests` in
  // its queue, priced by `cost`. No side effects.
  StallPlan Plan(TimeNs now, const kv::KvCacheManager& cache, int64_t waiting_requests,
                 const CostModel& cost) const;
  // Records the outcome of a planned offload: `moved` blocks went to the host (0: the
  // session is not tried again during this pause); the prefetch is due at the predicted return
  // minus `transfer`, the host-link time of those blocks.
  void OnOffloaded(const StallMove& move, int64_t moved, TimeNs transfer);
  // Records the outcome of a planned prefetch: `loaded` blocks came back (0: retried later).
  void OnPrefetched(const StallMove& move, int64_t loaded);

  // The earliest prefetch due after `now`, if any: when the driver should call again even
  // if no step runs.
  std::optional<TimeNs> NextWake(TimeNs now) const;
  // The keys of paused `conversation` (empty when it is not paused).
  const std::vector<kv::BlockKey>& KeysOf(ConversationId conversation) const;

  // Sessions paused now, of which offloaded; hinted requests in flight.
  int64_t paused_sessions() const { return static_cast<int64_t>(paused_.size()); }
  int64_t offloaded_sessions() const;
  int64_t turns_in_flight() const { return static_cast<int64_t>(turns_.size()); }

 private:
  enum class State : uint8_t { kResident, kOffloaded, kSkipped };
  struct Turn {
    ConversationId conversation;
    kv::PauseClass pause_class;
    std::vector<kv::BlockKey> keys;
  };
  struct Paused {
    kv::PauseClass pause_class;
    TimeNs since;
    std::vector<kv::BlockKey> keys;
    State state = State::kResident;
    bool prefetched = false;
    TimeNs prefetch_at;
  };

  StallOffloadPolicy(const StallOffloadOptions& options, kv::PauseEstimator pauses);

  StallOffloadOptions options_;
  kv::PauseEstimator pauses_;
  // Ordered by conversation id: every walk that decides is in this order.
  std::map<ConversationId, Paused> paused_;
  // Hinted requests in flight; looked up only.
  std::unordered_map<RequestId, Turn> turns_;
  StallOffloadCounters counters_;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_STALL_OFFLOAD_POLICY_H_
