// The instant single cache: the replay engine mode in which a workload runs through ONE
// kv::KvCacheManager and every request completes the moment it arrives (look up, compute what
// it missed, cache it, finish). It is the other engine mode beside the simulated fleet of
// replay.h: no cost model, no scheduler, no gateway, so what it measures is the cache policy
// alone. `agentkv cache-curve` (cache_curve.h) and `agentkv agentic-curve` (agentic_replay.h)
// are views of it: each turns its workload source into an InstantWorkload (instant_sources.h)
// and its flags into InstantReplayOptions, and prints the points.
//
// A run is a grid of points: every arm (replay_arms.h, the one arm grammar of every replay)
// at every device capacity, each point a fresh cache replaying the same stream. The arm's
// cache policy comes from ArmCachePolicy, the same rule the fleet's engines use; +lifecycle
// closes each session right after the request that ends it. Features that need the fleet
// (+admission, +host-tier, fixed-ttl, continuum) are refused; infinite-cache runs at the
// capacity that holds every distinct block; oracle evicts offline-optimally (Belady's MIN: the
// cache is given the stream's future through a NextUseIndex, next_use_index.h), the bound of
// every eviction policy at that capacity under the same accounting.
//
// Deterministic: a pure function of its inputs (progress goes through callbacks on the
// caller's thread); thread-compatible.
#ifndef AGENTKV_SIM_REPLAY_INSTANT_REPLAY_H_
#define AGENTKV_SIM_REPLAY_INSTANT_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/sim/replay/replay_arms.h"

namespace agentkv::sim {

// One request of an instant replay, in the order it runs.
struct InstantRequest {
  // When it runs; drives the scheduler step counter when InstantReplayOptions::step_interval
  // is set (times are expected in non-decreasing order; the counter never goes back).
  TimeNs time;
  // Its chained prompt block keys, one per full block.
  std::vector<kv::BlockKey> keys;
  // Keys of the blocks its output completes, chained on from `keys` (as
  // engine::SchedulerRequest::output_keys, and derived the same way: sim/output_keys.h), so
  // that the answer is cached for the next turn as the engine caches it. Empty when the
  // source does not know them (an open-loop trace).
  std::vector<kv::BlockKey> output_keys;
  // What AddRequest gets: prompt tokens and, where the source has them, the session,
  // conversation and parent hint.
  kv::RequestOptions options;
  // Whether no later request belongs to options.session: arms with +lifecycle close the
  // session right after this request. Only meaningful with a session.
  bool ends_session = false;
};

// A workload source put in the order one cache serves it.
struct InstantWorkload {
  // Tokens per KV block of every request. Range: [1, 2^20].
  int32_t tokens_per_block = 1;
  std::vector<InstantRequest> requests;
  // Names request i in error messages (e.g. "a.json sub-agent x request 3"); unset:
  // "request i".
  std::function<std::string(size_t index)> describe;
};

// One arm at one capacity.
struct InstantPoint {
  // The arm's name as given, and its parsed spec.
  std::string arm;
  ArmSpec spec;
  // The capacity fraction asked for (or capacity / unique blocks for an absolute capacity or
  // infinite-cache), and the device blocks.
  double fraction = 0;
  int64_t capacity_blocks = 0;
  // Leading prompt blocks found cached (device, or host and onboarded), summed over requests.
  int64_t hits = 0;
  // All prompt blocks, summed over requests (with truncation, beyond capacity too); output
  // blocks are committed, never looked up.
  int64_t total_blocks = 0;
  // hits / total_blocks; 0 without blocks.
  double hit_ratio = 0;
  // The cache's counters and gauges after the last request (and its close).
  kv::KvCacheStats stats;
  // 100 * (uncached_tokens - the baseline's) / the baseline's, where the run has a plain
  // baseline arm (ArmSpec::IsBaseline: "baseline", "lru") at the same capacity with positive
  // uncached tokens (the first such arm); unset otherwise.
  std::optional<double> uncached_change_vs_baseline_percent;
};

struct InstantReplayOptions {
  // Arms (replay_arms.h), run in this order. Default: {baseline}. Non-empty, distinct names
  // (ValidateArms), without +admission, +host-tier, fixed-ttl or continuum; oracle only with
  // host_blocks 0.
  std::vector<ArmSpec> arms = {BaselineArm()};
  // Device capacities as fractions of the workload's distinct block keys: each point gets
  // engine::BlocksForFraction(fraction, unique_blocks). Default: {1.0}. Non-empty, each in
  // (0, 1].
  std::vector<double> capacity_fractions = {1.0};
  // When set, replaces capacity_fractions with one capacity of exactly this many device
  // blocks (its fraction is capacity / unique blocks, possibly above 1). Default: unset.
  // Range: [1, 2^30].
  std::optional<int64_t> capacity_blocks;
  // Host (cold) tier blocks of every point; 0 disables offloading. Default: 0. Range: [0, 2^30].
  int64_t host_blocks = 0;
  // Trace time per scheduler step: before each request the cache advances to step
  // floor(time / step_interval). Unset: the step counter stays at 0. Default: unset.
  // Range: [1 us, 1e6 s]; the replay may span at most 2^30 steps.
  std::optional<TimeNs> step_interval;
  // A request with more blocks than the device: false refuses the replay (InvalidArgument
  // before anything runs: an engine could not run it); true runs it on its first `capacity`
  // blocks only (its hits can only come from those; all its blocks count in total_blocks).
  // Default: false.
  bool truncate_long_requests = false;
  // block_reuse_config.max_num_turns of per-conversation arms. Default: 1. Range: [1, 2^20].
  int32_t max_num_turns = 1;
  // finished_subagent_min_idle_iterations of demotion arms. Default: 32. Range: [0, 2^40].
  int64_t min_idle_steps = 32;
  // The demotion priority of +subagent-demotion without "=P". Default: 1. Range: [0, 100].
  int32_t finished_subagent_priority = 1;
  // How +lifecycle's close frees a session. Default: kRelease.
  kv::SessionCloseMode session_close_mode = kv::SessionCloseMode::kRelease;
  // Called with the 0-based point index and the requests replayed so far at that point: every
  // 4096 requests and once when the point is complete (requests_done == requests). Default:
  // none.
  std::function<void(size_t point, int64_t requests_done)> progress;
  // Called after each point with its index and its result (the change column unset).
  // Default: none.
  std::function<void(size_t point, const InstantPoint& result)> on_point_done;

  // InvalidArgument naming the first option out of range and its value (arm names included).
  Status Validate() const;
};

struct InstantReplayResult {
  int64_t requests = 0;
  // Distinct chained block keys over all requests (prompt and output keys): the capacity at
  // which nothing is evicted.
  int64_t unique_blocks = 0;
  int32_t tokens_per_block = 0;
  int64_t host_blocks = 0;
  // The time of the last request and the steps advanced until then (0 without step_interval).
  TimeNs span;
  int64_t steps = 0;
  // Arm-major: for each arm in order, one point per capacity in order.
  std::vector<InstantPoint> points;
};

// The distinct chained block keys of `workload`'s requests, prompt and output keys: the device
// capacity at which nothing is ever evicted (InstantReplayResult::unique_blocks).
int64_t UniqueBlocks(const InstantWorkload& workload);

// Replays `workload` at every point of `options`. Request i, at each point: advance the step
// counter (with step_interval); AddRequest(its keys, or the first `capacity` with truncation,
// its options); Reserve(those blocks and its output blocks * tokens_per_block); Commit(the keys
// after the match, then its output keys: SGLang's cache_finished_req); Release; with +lifecycle and
// ends_session, CloseSession(its session). CheckInvariants runs at the end of each point.
// InvalidArgument for invalid options or tokens_per_block, an arm needing the fleet, a request
// longer than a capacity (without truncation) or a span over 2^30 steps; Internal if the cache
// refuses a call or breaks an invariant, which would be a bug in it or here.
StatusOr<InstantReplayResult> RunInstantReplay(const InstantWorkload& workload,
                                               const InstantReplayOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_INSTANT_REPLAY_H_
