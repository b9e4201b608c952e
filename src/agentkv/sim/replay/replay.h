// The replay runner behind `agentkv replay`: one workload, several policy arms, one report.
//
// Each arm builds a fresh simulated fleet (FleetModel: N EngineModels, each the real
// engine::StepScheduler over kv::KvCacheManager priced by engine::CostModel, behind a
// routing::Router), the GatewayModel in front of it (the real control::AdmissionCoordinator and
// the gateway's control::GatewayFlow, fed by gauges polled every 2 s of simulated time), and
// drives the workload through it: agentic workloads in closed loop (AgentDriver), open-loop
// traces by timestamp. The arm's ArmSpec only changes options (agentic flags, KV cache
// policies, the host tier, TTL pins, capacity); the code that runs is the same in every arm.
// After the run the arm is checked for conservation (every request issued completed exactly
// once, every lease returned, the ledger at zero, the gateway drained, every engine's
// scheduler and cache invariants) and summarized into an ArmResult.
//
// This is the simulated-fleet engine mode of the replay; the other, the instant single cache
// behind cache-curve and agentic-curve, is instant_replay.h. Both read the same two workload
// shapes (AgenticWorkload, OpenLoopRequest) and the same arm grammar (replay_arms.h), whose
// cache policy both take from ArmCachePolicy.
//
// Deterministic: a pure function of the workload and the options. The simulator starts no
// thread: every arm runs on the thread that runs its task, and progress goes through a callback
// on that thread. Arms share nothing mutable, so a caller may run them concurrently (an
// ArmTaskRunner); the result does not depend on how they were run.
#ifndef AGENTKV_SIM_REPLAY_REPLAY_H_
#define AGENTKV_SIM_REPLAY_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/engine/continuum_policy.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/routing/router.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "agentkv/sim/replay/replay_result.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/conversation_source.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::sim {

// The engine config ReplayOptions starts from: EngineConfig's defaults with a host tier of
// twice the device tier (for the +host-tier arms).
engine::EngineConfig DefaultReplayEngine();

struct ReplayOptions {
  // Arms (replay_arms.h; the command line parses their names), run in this order. Default:
  // DefaultArms(). Non-empty, distinct names (ValidateArms).
  std::vector<ArmSpec> arms = DefaultArms();

  // --- Fleet ---
  // Engines. Default: 2. Range: [1, 1024].
  int32_t num_engines = 2;
  // sgl-router policy. Default: consistent_hashing on the session id, which is how the agentkv
  // gateway routes sessions (X-SMG-Routing-Key); with cache_aware, load-dependent routing makes
  // small effects of an arm hard to tell from run-to-run variation (docs/RESULTS.md).
  routing::RouterPolicy router = routing::RouterPolicy::kConsistentHashing;
  // Every engine of the fleet: cost model presets and tensor parallelism (defaults:
  // llama-3.1-8b on h100, tp 1), the scheduler (SGLang --max-running-requests,
  // --max-prefill-tokens, --chunked-prefill-size), and two KV pool inputs:
  //   kv_pool.max_total_tokens  SGLang --max-total-tokens: device KV per engine, in tokens
  //                             (rounded down to whole blocks); 0 derives it from the cost
  //                             model (memory left after weights). Default: 0. Range [0, 2^40].
  //   kv_pool.hicache_ratio     SGLang --hicache-ratio: the host tier of +host-tier arms, as a
  //                             multiple of the device tier. Default: 2.0. Range: (0, 100].
  // The replay sets the rest per workload and arm (kv_pool.tokens_per_block to the workload's
  // block size, min_device_blocks for infinite-cache, the cache's policy options from the
  // arm's features); kv_pool.hicache_tokens must stay 0.
  engine::EngineConfig engine = DefaultReplayEngine();
  // How +lifecycle closes a session on an engine: kRelease frees its unique blocks at once,
  // kDereference only returns them to the eviction order. Default: kRelease.
  kv::SessionCloseMode session_close_mode = kv::SessionCloseMode::kRelease;
  // +subagent-demotion: the priority finished sub-agents get, and the scheduler steps a child
  // must have been idle. Defaults: 1 and 32. Ranges: [0, 100] and >= 0.
  int32_t finished_subagent_priority = 1;
  int64_t finished_subagent_min_idle_steps = 32;
  // +subagent-demotion: the idle bound in seconds of simulated time instead of steps; when set
  // it replaces finished_subagent_min_idle_steps. Default: unset. Range: [0, 1e6].
  std::optional<double> finished_subagent_min_idle_s;
  // +subagent-demotion with a host tier: demoted blocks get max(priority, offload threshold),
  // offloaded instead of dropped when evicted (kv finished_subagent_offloadable).
  // Default: false.
  bool finished_subagent_offloadable = false;
  // +subagent-demotion: which engines a returning parent's demotion reaches. Default:
  // kEveryEngine (the gateway delivers it to the engines its sub-agents were routed to).
  DemotionDelivery subagent_demotion_delivery = DemotionDelivery::kEveryEngine;
  // The routing key of sub-agents' requests, in every arm (AgentDriverOptions). Default: kOwn.
  SubagentRouting subagent_routing = SubagentRouting::kOwn;
  // fixed-ttl: the pin's time-to-live, seconds. Default: 10 (about the median tool gap of
  // the WEKA traces). Range: (0, 86400].
  double fixed_ttl_s = 10.0;
  // continuum: the TTL policy's memory price, prior and decay (engine::ContinuumPolicyOptions,
  // valid per its Validate).
  engine::ContinuumPolicyOptions continuum;
  // continuum: order every engine's waiting queue by program (program-level FCFS); false
  // isolates the TTL pins' effect. Default: true.
  bool continuum_program_fcfs = true;
  // +working-set: the working set's headroom, holds and aging (control::WorkingSetOptions,
  // valid per its Validate); host_tier_ratio is set per arm (the hicache ratio with
  // +host-tier, else 0) and must stay 0 here.
  control::WorkingSetOptions working_set;
  // +stall-offload: the pressure threshold, return quantile, least stall and pause prior of
  // every engine's stall offload (engine::StallOffloadOptions, valid per its Validate).
  engine::StallOffloadOptions stall_offload;
  // Block ids below this are shared by every conversation (AgentDriverOptions::
  // shared_prefix_ids): the tools+system prompt. Default: 0 (none shared).
  uint64_t shared_prefix_ids = 0;
  // Whether sub-agents on another model than their main agent share the fleet or are left
  // out (AgentDriverOptions::subagent_models). Default: kShare.
  SubagentModels subagent_models = SubagentModels::kShare;
  // +admission parameters (headroom, pressure threshold, max wait, decode cap, poll interval);
  // the two feature booleans are set per arm and ignored here. Every request is in scope.
  control::AgenticOptions agentic;
  // The gateway's --session-idle-timeout-s in every arm (GatewayModelOptions::
  // session_idle_timeout): a session idle this long is ended (and, with +lifecycle, closed on
  // every engine) unless the workload marks it retained (AgenticWorkload::retained). Default: 0
  // (never: the replayed agents close every session at their end). Range: [0, 31536000].
  double session_idle_timeout_s = 0.0;

  // --- Test and calibration hooks ---
  // Every engine step takes exactly this long instead of the cost model's estimate ("no
  // compute limit" with a tiny value). Default: unset.
  std::optional<TimeNs> fixed_step_time;
  // Keep every engine's KV event log in ArmRun::engine_events. Default: false.
  bool keep_events = false;

  // InvalidArgument naming the first bad field and its value (arm names included).
  Status Validate() const;
};

// Progress of a replay: the arm running (0-based, of num_arms), its name, and the fraction
// of its requests completed so far, in [0, 1]. Each arm reports 0 when it starts and 1 when it
// ends, from the thread that runs it.
using ReplayProgress =
    std::function<void(size_t arm_index, size_t num_arms, std::string_view arm, double fraction)>;

// Runs independent tasks: each exactly once, in any order, concurrently if it wishes; returns
// when all have finished. RunReplay hands it one task per arm. Empty = one after the other on
// the caller's thread.
using ArmTaskRunner = std::function<void(const std::vector<std::function<void()>>& tasks)>;

// One arm's outcome plus what tests inspect.
struct ArmRun {
  ArmResult result;
  // Per engine, every KV cache event in order (only with ReplayOptions::keep_events).
  std::vector<std::vector<kv::KvEvent>> engine_events;
};

// The KV pool of every engine of the fleet `options` describe, on a workload of
// `tokens_per_block`-token blocks: engine::SizeKvPool of options.engine at that block size,
// with the host tier the +host-tier arms get (an infinite-cache arm enlarges the device tier
// further). InvalidArgument for invalid options or a device tier under one block.
StatusOr<engine::KvPool> KvPoolPerEngine(const ReplayOptions& options, int32_t tokens_per_block);

// Runs one arm of an agentic workload in closed loop (the fleet arm runner with an
// AgentDriverFeed). InvalidArgument for bad options or a workload the driver refuses; Internal
// when a conservation check fails (a bug).
StatusOr<ArmRun> RunAgenticArm(const AgenticWorkload& workload, const ReplayOptions& options,
                               const ArmSpec& arm,
                               const std::function<void(double)>& progress = {});

// As RunAgenticArm, over a source (conversation_source.h): a streamed source's conversations are
// built as they start and dropped as they end, so the arm's memory follows its live sessions.
StatusOr<ArmRun> RunAgenticArm(const ConversationSource& source, const ReplayOptions& options,
                               const ArmSpec& arm,
                               const std::function<void(double)>& progress = {});

// Runs one arm of an open-loop trace (the fleet arm runner with an OpenLoopFeed): request i
// arrives at its time as its own session and conversation (ids i + 1); `tokens_per_block` is
// the trace's block size. Errors as RunAgenticArm.
StatusOr<ArmRun> RunOpenLoopArm(const std::vector<OpenLoopRequest>& requests,
                                int32_t tokens_per_block, const ReplayOptions& options,
                                const ArmSpec& arm,
                                const std::function<void(double)>& progress = {});

// Runs every arm of options.arms on `workload` and returns the result with its setup
// (`description` names the workload, `seed` is the seed that produced it) and, once every arm
// ran, each arm's share of the baseline -> infinite-cache gap (FillIdealShares). The arms run
// through `runner` (ArmTaskRunner); with a concurrent runner `progress` is called from the
// threads that run them. A failed arm fails the replay with "arm NAME: " and its status (the
// first failed arm in arm order).
StatusOr<ReplayResult> RunReplay(const AgenticWorkload& workload, std::string_view description,
                                 uint64_t seed, const ReplayOptions& options,
                                 const ReplayProgress& progress = {},
                                 const ArmTaskRunner& runner = {});

// As RunReplay, over a source; the same result as RunReplay over the workload the source stands
// for. Only an in-memory source has trace fallbacks to note (a generator fills every field).
StatusOr<ReplayResult> RunReplay(const ConversationSource& source, std::string_view description,
                                 uint64_t seed, const ReplayOptions& options,
                                 const ReplayProgress& progress = {},
                                 const ArmTaskRunner& runner = {});

// As RunReplay, for an open-loop trace.
StatusOr<ReplayResult> RunOpenLoopReplay(const std::vector<OpenLoopRequest>& requests,
                                         int32_t tokens_per_block, std::string_view description,
                                         uint64_t seed, const ReplayOptions& options,
                                         const ReplayProgress& progress = {},
                                         const ArmTaskRunner& runner = {});

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_REPLAY_H_
