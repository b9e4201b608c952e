// What `agentkv replay` measured: one ArmResult per policy arm over the same workload, and the
// ReplayResult that holds them with the setup they ran under.
//
// Plain values, filled by the replay runner (replay.h) and rendered by replay_report.h as a
// terminal table, JSON and an HTML report. Everything here is a pure function of the workload,
// the options and the seed, so two runs with equal inputs give equal values (the JSON gate);
// wall-clock figures are not part of a result (scripts/perf-report.py times whole runs).
// Thread-compatible.
#ifndef AGENTKV_SIM_REPLAY_REPLAY_RESULT_H_
#define AGENTKV_SIM_REPLAY_REPLAY_RESULT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/sim/fleet/kv_usage_sample.h"

namespace agentkv::sim {

// A distribution of durations in seconds. All zero when count == 0.
struct DurationSummary {
  int64_t count = 0;
  double mean_s = 0;
  double p50_s = 0;
  double p90_s = 0;
  double p95_s = 0;
  double p99_s = 0;
  double max_s = 0;

  friend bool operator==(const DurationSummary&, const DurationSummary&) = default;
};

// Summarizes `seconds` (any order; sorted in place). Percentiles are nearest-rank:
// the value at rank ceil(p * n).
DurationSummary SummarizeDurations(std::vector<double>& seconds);

// How much of the gap between the baseline arm and the infinite-cache arm an arm closes, per
// metric: (baseline - arm) / (baseline - infinite-cache), with the reference arms the ones named
// "baseline" and "infinite-cache" in the same run. 0 is no better than the baseline, 1 is the
// unbounded cache's value; below 0 is worse than the baseline, above 1 beats the unbounded
// cache (possible for times, and for uncached tokens when an arm's routing leaves fewer cold
// tokens). Unset when either reference arm is missing or the two reference values are equal
// (no gap to close).
struct IdealShares {
  // Of ArmResult::uncached_tokens, evicted_recompute_tokens and server_time.mean_s.
  std::optional<double> uncached_tokens;
  std::optional<double> evicted_recompute_tokens;
  std::optional<double> server_time_mean;

  friend bool operator==(const IdealShares&, const IdealShares&) = default;
};

// What an RL rollout (a workload with groups: rollout_workload.h's steps) measured in one arm:
// the symptoms the seed names (high token usage, eviction and recompute, queueing while the
// GPU is not saturated) next to the rollout's own throughput. Preemptions and recompute are
// ArmResult's own fields.
struct RolloutMetrics {
  // Steps (groups that hold a conversation) and trajectories (main-agent conversations).
  int64_t steps = 0;
  int64_t trajectories = 0;
  // Step makespan: from the first begin of one of the step's trajectories to the last end of
  // one, seconds; mean and maximum over steps.
  double step_makespan_mean_s = 0;
  double step_makespan_max_s = 0;
  // Trajectories and generated (output) tokens per second of the arm's makespan.
  double trajectories_per_s = 0;
  double generated_tokens_per_s = 0;
  // GPU busy fraction: the engines' busy time (the sum of every engine step's duration, as the
  // cost model priced it; a stalled empty step counts too) / (engines x makespan), in [0, 1].
  double gpu_busy_fraction = 0;
  // Compute utilization: the sum over engine steps of the cost model's compute time (step
  // flops / (tp x peak flops x MFU), whether or not memory bound the step) / (engines x
  // makespan). The share of the fleet's time its tensor cores would be busy at the modelled
  // MFU; a decode-heavy, memory-bound rollout is busy but far from compute saturation. 0 with a
  // fixed step time.
  double compute_utilization = 0;
  // Over the fleet gauge samples (ArmResult::kv_usage): token usage = used / capacity (SGLang's
  // token_usage: KV held by running requests) and occupancy = (used + evictable) / capacity
  // (every cached token), mean and peak; requests waiting (admission FIFO plus engine queues),
  // mean and peak. All zero without samples.
  double kv_token_usage_mean = 0;
  double kv_token_usage_peak = 0;
  double kv_occupancy_mean = 0;
  double kv_occupancy_peak = 0;
  double waiting_requests_mean = 0;
  int64_t waiting_requests_peak = 0;

  friend bool operator==(const RolloutMetrics&, const RolloutMetrics&) = default;
};

// One step of a load ramp (load/ramp.h): the users started by then, and the TTFT of the requests
// whose first token came during the step.
struct RampStep {
  int64_t users = 0;
  int64_t requests = 0;
  double ttft_p95_s = 0;

  friend bool operator==(const RampStep&, const RampStep&) = default;
};

// A load ramp (`agentkv load --ramp`): users added every period until a step's TTFT p95
// exceeded the SLO.
struct RampResult {
  double period_s = 0;
  double ttft_slo_s = 0;
  std::vector<RampStep> steps;
  // The users of the last step within the SLO (0 when the first step exceeded it), and whether
  // a step exceeded it (false: the workload ran out of users first).
  int64_t users_held = 0;
  bool slo_exceeded = false;

  friend bool operator==(const RampResult&, const RampResult&) = default;
};

// What only a measured run has (`agentkv load` against a live endpoint, load/load_run.h): the
// client's view that a simulated arm has no counterpart for.
struct MeasuredRun {
  // The endpoint and API ("http://127.0.0.1:30000 generate"), and the time scale the run's
  // times were multiplied by (every time in the arm is loop time: wall time x time_scale).
  std::string target;
  double time_scale = 1;
  // Wall-clock seconds from the first request to the end, and the client's CPU seconds over
  // the run (user + system, every thread).
  double wall_s = 0;
  double client_cpu_s = 0;
  // The first 90 % of completed requests over the wall time from the first send to the 90th
  // percentile completion: the rate while the workload kept agents busy, without the tail where
  // a few long sessions run alone (0 with no request).
  double first_90_percent_requests_per_s = 0;
  // Per request with two or more output events: the mean gap between them (inter-token
  // latency of a streamed answer), in loop seconds.
  DurationSummary inter_token;
  // HTTP attempts, the retries among them, and requests that failed after their retries
  // (counted in requests_refused too: the agent went on without the answer).
  int64_t attempts = 0;
  int64_t retries = 0;
  int64_t requests_failed = 0;
  // Failed attempts by kind ("http 503", "deadline exceeded", "unavailable", ...), by name.
  std::vector<std::pair<std::string, int64_t>> errors;
  // Sessions closed (POST /v1/sessions/{id}/close answered 2xx), and failed closes by kind.
  int64_t sessions_closed = 0;
  std::vector<std::pair<std::string, int64_t>> close_errors;
  // Requests in flight when the run was stopped (Ctrl-C), left out of every count; whether it
  // was.
  int64_t requests_cancelled = 0;
  bool stopped = false;
  // Set for a ramp (--ramp).
  std::optional<RampResult> ramp;

  friend bool operator==(const MeasuredRun&, const MeasuredRun&) = default;
};

// One policy arm's outcome.
struct ArmResult {
  // The arm's name ("baseline", "+lifecycle", ...) and one line saying what it enables.
  std::string arm;
  std::string description;

  // --- Conservation ---
  int64_t requests_issued = 0;
  int64_t requests_completed = 0;
  // Requests that never ran, counted as completed: refused by admission (larger than its whole
  // ceiling, the gateway's 400) or by an engine (longer than its KV or its context, SGLang's
  // 400), whichever arm refused them. They are counted here and nowhere else: not in the prefix
  // cache counts below (prompt, cached, uncached, cold tokens), not in queueing or TTFT.
  int64_t requests_refused = 0;
  // Their prompt tokens. prompt_tokens + refused_prompt_tokens is every request's prompt.
  int64_t refused_prompt_tokens = 0;
  // Main agents (sessions) and all conversations (main agents plus sub-agents).
  int64_t sessions = 0;
  int64_t conversations = 0;

  // --- Prefix cache (over every served request's first admission) ---
  int64_t prompt_tokens = 0;
  // Full prompt blocks offered for matching (the block lookups).
  int64_t prompt_blocks = 0;
  // Prefix found on the device, and onboarded from the host tier.
  int64_t cached_device_tokens = 0;
  int64_t cached_host_tokens = 0;
  int64_t cached_device_blocks = 0;
  int64_t cached_host_blocks = 0;
  // Ratios of the counts above: cached / prompt tokens, cached / prompt blocks.
  double token_hit_ratio_device = 0;
  double token_hit_ratio_host = 0;
  double block_hit_ratio_device = 0;
  double block_hit_ratio_host = 0;
  // Prompt tokens computed at first admission = cold + evicted_recompute:
  // cold: never computed on that engine before (or not a full block);
  // evicted_recompute: full blocks that engine had computed and since lost (evicted, dropped
  // or released by a close) — the eviction regret.
  int64_t uncached_tokens = 0;
  int64_t cold_tokens = 0;
  int64_t evicted_recompute_tokens = 0;
  // evicted_recompute_tokens by the pause before the request (closed-loop agentic workloads;
  // 0 for open-loop traces): its first request (none), after a tool call, after waiting for
  // sub-agents, after a human's turn. Their sum is evicted_recompute_tokens there.
  int64_t evicted_recompute_first = 0;
  int64_t evicted_recompute_after_tool_call = 0;
  int64_t evicted_recompute_after_subagent_wait = 0;
  int64_t evicted_recompute_after_human_turn = 0;
  // Tokens computed again after preemptions (not part of uncached_tokens).
  int64_t preempted_recompute_tokens = 0;

  // --- Throughput (over the makespan: first start to last completion) ---
  double makespan_s = 0;
  int64_t output_tokens = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;

  // --- Latency ---
  // Main-agent sessions: start to the completion of the last request.
  DurationSummary session_time;
  // Per request: gateway arrival to first admission into an engine's running batch
  // (admission FIFO wait plus engine queue).
  DurationSummary queueing_delay;
  // Per request: gateway arrival to first output token.
  DurationSummary ttft;
  // Per request: time spent in the admission FIFO (zero without admission).
  DurationSummary admission_wait;
  // Every main-agent session time in seconds, ascending (for the CDF chart).
  std::vector<double> session_times_s;

  // --- Server time: the part of a session's time the serving stack controls ---
  // Session time is mostly the workload's recorded client gaps (tool calls, humans), which no
  // serving policy moves. Server time leaves them out: per main-agent session, the sum over its
  // own and its sub-agents' requests of (finished - gateway arrival), i.e. admission wait,
  // engine queueing, prefill and decode; concurrent sub-agent requests each count in full. An
  // open-loop trace's request is its own session (its server time is its session time).
  DurationSummary server_time;
  // Per request: finished - gateway arrival (a refused or rejected request: until answered).
  DurationSummary request_server_time;
  // This arm's share of the baseline -> infinite-cache gap; set by FillIdealShares once every
  // arm of the run is in the ReplayResult.
  IdealShares ideal_share;
  // The same against the arm named "oracle" (offline-optimal eviction) instead of
  // infinite-cache: (baseline - arm) / (baseline - oracle); unset without an oracle arm.
  IdealShares oracle_share;

  // --- Engines ---
  int64_t preemptions = 0;
  // Blocks that left the device to make room, moved to the host, dropped from every tier,
  // and moved back from the host.
  int64_t device_evictions = 0;
  int64_t offloads = 0;
  int64_t drops = 0;
  int64_t onboards = 0;
  // Session closes on engines (one per session per engine) and the tokens they freed.
  int64_t sessions_closed = 0;
  int64_t tokens_freed_by_close = 0;
  // Finished sub-agents demoted, their blocks, and children that came back.
  int64_t demoted_children = 0;
  int64_t demoted_blocks = 0;
  int64_t restored_children = 0;
  // Continuum TTL pins: taken after tool-call turns, expired before the session's next
  // request, and pins whose session came back in time.
  int64_t ttl_pins = 0;
  int64_t ttl_expired = 0;
  int64_t ttl_returned = 0;
  // Continuum (the continuum arm): tool-call turns the policy declined to pin because no
  // TTL's benefit beat its memory cost, and pins released under memory pressure before they
  // expired or their program returned.
  int64_t ttl_declined_by_cost = 0;
  int64_t ttl_unpinned_under_pressure = 0;
  // Working set (+working-set): requests that waited for it and those admitted after the
  // aging bound; holds that ended by the agent's return in time and by the pause outliving its
  // prediction. All 0 without it.
  int64_t working_set_waited = 0;
  int64_t working_set_aged = 0;
  int64_t working_set_holds_returned = 0;
  int64_t working_set_holds_expired = 0;
  // Stall offload (+stall-offload): paused sessions offloaded and the blocks moved to the
  // host ahead of demand, blocks prefetched back before a predicted return, and returns that
  // found their KV still offloaded (onboarded by the request) or prefetched. All 0 without it.
  int64_t stall_offloaded_sessions = 0;
  int64_t stall_offloaded_blocks = 0;
  int64_t stall_prefetched_blocks = 0;
  int64_t stall_returned_offloaded = 0;
  int64_t stall_returned_prefetched = 0;

  // --- Control plane ---
  // The seed's agentic_kv/ series at the end of the arm (name, value), in the coordinator's
  // order; empty when the arm runs without admission and lifecycle.
  std::vector<std::pair<std::string, double>> agentic_kv;
  // Fleet KV occupancy over time.
  std::vector<KvUsageSample> kv_usage;

  // --- RL rollout: set only when the workload has groups (the rollout's steps) ---
  std::optional<RolloutMetrics> rollout;

  // --- Set only for a measured run (`agentkv load`) ---
  std::optional<MeasuredRun> measured;

  friend bool operator==(const ArmResult&, const ArmResult&) = default;
};

// The setup every arm ran under.
struct ReplaySetup {
  // The workload, in words ("synthetic: 24 sessions, seed 1", "weka: 39 files").
  std::string workload;
  // What the trace reader filled in for fields a trace left out or set to null, one line per
  // kind (WekaFallbacks::Describe, e.g. "4 sub-agents without duration_ms: spawned at their
  // recorded t"); empty when nothing was.
  std::vector<std::string> workload_notes;
  uint64_t seed = 0;
  int32_t num_engines = 1;
  std::string router;
  std::string model;
  std::string gpu;
  int32_t tp = 1;
  int32_t tokens_per_block = 0;
  // Device KV capacity per engine, and the host tier of the arms that have one, in tokens.
  int64_t device_tokens_per_engine = 0;
  int64_t host_tokens_per_engine = 0;

  friend bool operator==(const ReplaySetup&, const ReplaySetup&) = default;
};

struct ReplayResult {
  ReplaySetup setup;
  // In the order run; the first arm named "baseline" (else the first arm) is what deltas are
  // taken against, an arm named "infinite-cache" is the ideal hit ratios are set next to. The
  // shares of the ideal (IdealSharesOf) take the arms named exactly "baseline" and
  // "infinite-cache", without the fallback.
  std::vector<ArmResult> arms;

  friend bool operator==(const ReplayResult&, const ReplayResult&) = default;
};

// (baseline - arm) / (baseline - ideal): the share of the gap from `baseline` to `ideal` that
// `arm` closes; nullopt when baseline == ideal or any value is not finite.
std::optional<double> IdealShare(double baseline, double arm, double ideal);

// Every arm's IdealShares, in arm order, against the first arms named exactly "baseline" and
// `reference` ("infinite-cache" for ArmResult::ideal_share, "oracle" for
// ArmResult::oracle_share; no fallback to arm 0: a share needs both ends); all unset when
// either is missing. Pure.
std::vector<IdealShares> IdealSharesOf(const ReplayResult& result,
                                       std::string_view reference = "infinite-cache");

// Sets every arm's ideal_share to IdealSharesOf(result) and oracle_share to
// IdealSharesOf(result, "oracle"). The replay runner calls it after the
// last arm; a result built by hand needs it before its shares are read.
void FillIdealShares(ReplayResult& result);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_REPLAY_RESULT_H_
