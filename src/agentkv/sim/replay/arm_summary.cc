// Each family writes its own fields of ArmResult; SummarizeArm calls them in a fixed order so
// that a family reading another's fields (throughput reads the output tokens) finds them set.
#include "agentkv/sim/replay/arm_summary.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/kv/kv_cache_stats.h"

namespace agentkv::sim {
namespace {

double Ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The rollout's steps: per group, from the first start to the last end of its agents.
void SummarizeRolloutSteps(const AgenticWorkload& workload, const AgentDriverResult& driven,
                           RolloutMetrics& m) {
  const int32_t steps = *std::max_element(workload.groups.begin(), workload.groups.end()) + 1;
  std::vector<std::optional<TimeNs>> first(static_cast<size_t>(steps));
  std::vector<std::optional<TimeNs>> last(static_cast<size_t>(steps));
  for (const DriverConversationResult& c : driven.conversations) {
    const size_t step = static_cast<size_t>(workload.groups[static_cast<size_t>(c.workload_index)]);
    if (c.subagent < 0) ++m.trajectories;
    AGENTKV_CHECK(c.end.has_value());
    first[step] = first[step].has_value() ? std::min(*first[step], c.start) : c.start;
    last[step] = last[step].has_value() ? std::max(*last[step], *c.end) : *c.end;
  }
  int64_t measured = 0;
  for (size_t step = 0; step < first.size(); ++step) {
    if (!first[step].has_value()) continue;
    const double seconds = (*last[step] - *first[step]).seconds();
    m.step_makespan_mean_s += seconds;
    m.step_makespan_max_s = std::max(m.step_makespan_max_s, seconds);
    ++measured;
  }
  m.steps = measured;
  if (measured > 0) m.step_makespan_mean_s /= static_cast<double>(measured);
}

// The rollout's KV usage and waiting requests over the gauge samples.
void SummarizeRolloutGauges(const std::vector<KvUsageSample>& samples, RolloutMetrics& m) {
  for (const KvUsageSample& sample : samples) {
    const double capacity = static_cast<double>(std::max<int64_t>(1, sample.capacity_tokens));
    const double usage = static_cast<double>(sample.used_tokens) / capacity;
    const double occupancy =
        static_cast<double>(sample.used_tokens + sample.evictable_tokens) / capacity;
    m.kv_token_usage_mean += usage;
    m.kv_token_usage_peak = std::max(m.kv_token_usage_peak, usage);
    m.kv_occupancy_mean += occupancy;
    m.kv_occupancy_peak = std::max(m.kv_occupancy_peak, occupancy);
    m.waiting_requests_mean += static_cast<double>(sample.waiting_requests);
    m.waiting_requests_peak = std::max(m.waiting_requests_peak, sample.waiting_requests);
  }
  if (!samples.empty()) {
    const double n = static_cast<double>(samples.size());
    m.kv_token_usage_mean /= n;
    m.kv_occupancy_mean /= n;
    m.waiting_requests_mean /= n;
  }
}

}  // namespace

void SummarizeArm(const ArmFleet& arm_fleet, const ArmSpec& arm, FedSessions sessions,
                  RequestTally& tally, ArmResult& result) {
  result.arm = arm.name;
  result.description = arm.Description();
  result.sessions = sessions.sessions;
  result.conversations = sessions.conversations;
  SummarizeHitRatios(arm_fleet.fleet->engine(EngineId(0)).engine().tokens_per_block(), result);
  SummarizeThroughput(sessions.makespan, result);
  tally.Finish(static_cast<size_t>(sessions.sessions), std::move(sessions.session_times));
  SummarizeEngines(*arm_fleet.fleet, result);
  SummarizeGateway(*arm_fleet.gateway, arm, result);
}

void SummarizeHitRatios(int64_t tokens_per_block, ArmResult& result) {
  result.cached_device_blocks = result.cached_device_tokens / tokens_per_block;
  result.cached_host_blocks = result.cached_host_tokens / tokens_per_block;
  result.token_hit_ratio_device = Ratio(result.cached_device_tokens, result.prompt_tokens);
  result.token_hit_ratio_host = Ratio(result.cached_host_tokens, result.prompt_tokens);
  result.block_hit_ratio_device = Ratio(result.cached_device_blocks, result.prompt_blocks);
  result.block_hit_ratio_host = Ratio(result.cached_host_blocks, result.prompt_blocks);
}

void SummarizeThroughput(TimeNs makespan, ArmResult& result) {
  result.makespan_s = makespan.seconds();
  if (result.makespan_s > 0) {
    result.requests_per_s = static_cast<double>(result.requests_completed) / result.makespan_s;
    result.output_tokens_per_s = static_cast<double>(result.output_tokens) / result.makespan_s;
  }
}

void SummarizeEngines(const FleetModel& fleet, ArmResult& result) {
  for (int32_t e = 0; e < fleet.num_engines(); ++e) {
    const EngineModel& engine = fleet.engine(EngineId(e));
    const kv::KvCacheStats stats = engine.engine().cache().stats();
    result.device_evictions += stats.device_evictions;
    result.offloads += stats.offloads;
    result.drops += stats.drops;
    result.onboards += stats.onboards;
    result.demoted_children += stats.demoted_children;
    result.demoted_blocks += stats.demoted_blocks;
    result.restored_children += stats.restored_children;
    result.ttl_pins += engine.pin_counters().pins;
    result.ttl_expired += engine.pin_counters().expired;
    result.ttl_returned += engine.pin_counters().returned;
    result.ttl_unpinned_under_pressure += engine.pin_counters().unpinned_under_pressure;
    if (const engine::StallOffloadPolicy* stall = engine.engine().stall_offload();
        stall != nullptr) {
      const engine::StallOffloadCounters& c = stall->counters();
      result.stall_offloaded_sessions += c.offloads;
      result.stall_offloaded_blocks += stats.stall_offloaded_blocks;
      result.stall_prefetched_blocks += stats.prefetched_blocks;
      result.stall_returned_offloaded += c.returned_offloaded;
      result.stall_returned_prefetched += c.returned_prefetched;
    }
  }
}

void SummarizeGateway(GatewayModel& gateway, const ArmSpec& arm, ArmResult& result) {
  result.ttl_declined_by_cost = gateway.pins_declined_by_cost();
  if (const control::WorkingSetAdmission* ws = gateway.working_set(); ws != nullptr) {
    result.working_set_waited = ws->counters().waited;
    result.working_set_aged = ws->counters().aged;
    result.working_set_holds_returned = ws->counters().holds_returned;
    result.working_set_holds_expired = ws->counters().holds_expired;
  }
  result.sessions_closed = gateway.engine_session_closes();
  result.tokens_freed_by_close = gateway.tokens_freed_by_close();
  if (arm.session_lifecycle || arm.program_admission || arm.admission_v2) {
    result.agentic_kv = gateway.AgenticKvMetrics();
  }
  result.kv_usage = gateway.kv_usage();
}

RolloutMetrics SummarizeRollout(const ArmFleet& arm_fleet, const AgenticWorkload& workload,
                                const AgentDriverResult& driven, const ArmResult& result) {
  RolloutMetrics m;
  SummarizeRolloutSteps(workload, driven, m);
  const double engine_seconds =
      result.makespan_s * static_cast<double>(arm_fleet.fleet->num_engines());
  if (result.makespan_s > 0) {
    m.trajectories_per_s = static_cast<double>(m.trajectories) / result.makespan_s;
    m.generated_tokens_per_s = static_cast<double>(result.output_tokens) / result.makespan_s;
    TimeNs busy;
    TimeNs compute;
    for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
      busy += arm_fleet.fleet->engine(EngineId(e)).busy_time();
      compute += arm_fleet.fleet->engine(EngineId(e)).compute_time();
    }
    // A step that ends after the last completion (none does: the last step ends with it)
    // would push the fraction past 1; clamp for safety of the report's scale.
    m.gpu_busy_fraction = std::min(1.0, busy.seconds() / engine_seconds);
    m.compute_utilization = std::min(1.0, compute.seconds() / engine_seconds);
  }
  SummarizeRolloutGauges(result.kv_usage, m);
  return m;
}

}  // namespace agentkv::sim
