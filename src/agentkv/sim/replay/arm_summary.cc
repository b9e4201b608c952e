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

bool Refused(const RequestView& r) { return r.gateway->refused || r.engine->report.rejected; }

// Adds `tokens` of evicted recompute to the counter of `pause_before` (unset: an agent's first
// request).
void AddEvictedRecompute(std::optional<PauseKind> pause_before, int64_t tokens, ArmResult& result) {
  switch (pause_before.value_or(PauseKind::kUnknown)) {
    case PauseKind::kUnknown:
    case PauseKind::kSessionEnd:  // Nothing follows an end: only a first request.
      result.evicted_recompute_first += tokens;
      break;
    case PauseKind::kToolCall:
      result.evicted_recompute_after_tool_call += tokens;
      break;
    case PauseKind::kSubagentWait:
      result.evicted_recompute_after_subagent_wait += tokens;
      break;
    case PauseKind::kHumanTurn:
      result.evicted_recompute_after_human_turn += tokens;
      break;
  }
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

void SummarizeArm(const ArmFleet& arm_fleet, const ArmSpec& arm, FedTraffic traffic,
                  ArmResult& result) {
  result.arm = arm.name;
  result.description = arm.Description();
  result.sessions = traffic.sessions;
  result.conversations = traffic.conversations;
  SummarizeRequestCounts(traffic.requests, result);
  SummarizeHitRatios(arm_fleet.fleet->engine(EngineId(0)).engine().tokens_per_block(), result);
  SummarizeThroughput(traffic.makespan, result);
  SummarizeLatency(traffic.requests, std::move(traffic.session_times), result);
  SummarizeServerTime(traffic.requests, traffic.session_of_request,
                      static_cast<size_t>(traffic.sessions), result);
  SummarizeEngines(*arm_fleet.fleet, result);
  SummarizeGateway(*arm_fleet.gateway, arm, result);
}

void SummarizeRequestCounts(const std::vector<RequestView>& requests, ArmResult& result) {
  for (const RequestView& r : requests) {
    const GatewayRecord& g = *r.gateway;
    const EngineRequestRecord& e = *r.engine;
    const engine::RequestReport& report = e.report;
    if (Refused(r)) {
      // Refused work is one metric, whoever refused it; it looked nothing up.
      AGENTKV_CHECK(report.cached_device_tokens == 0 && report.cached_host_tokens == 0 &&
                    report.uncached_tokens == 0 && e.cold_tokens == 0 &&
                    e.evicted_recompute_tokens == 0)
          << "refused request " << g.id << " has prefix cache counts";
      ++result.requests_refused;
      result.refused_prompt_tokens += g.prompt_tokens;
      continue;
    }
    result.prompt_tokens += g.prompt_tokens;
    result.prompt_blocks += g.prompt_blocks;
    result.cached_device_tokens += report.cached_device_tokens;
    result.cached_host_tokens += report.cached_host_tokens;
    result.uncached_tokens += report.uncached_tokens;
    result.cold_tokens += e.cold_tokens;
    result.evicted_recompute_tokens += e.evicted_recompute_tokens;
    if (r.agentic) AddEvictedRecompute(r.pause_before, e.evicted_recompute_tokens, result);
    result.preempted_recompute_tokens += report.recomputed_tokens;
    result.output_tokens += report.output_tokens;
    result.preemptions += report.preemptions;
  }
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

void SummarizeLatency(const std::vector<RequestView>& requests, std::vector<double> session_times,
                      ArmResult& result) {
  std::vector<double> queueing;
  std::vector<double> ttft;
  std::vector<double> admission_wait;
  for (const RequestView& r : requests) {
    const GatewayRecord& g = *r.gateway;
    const EngineRequestRecord& e = *r.engine;
    if (g.dispatched.has_value()) admission_wait.push_back((*g.dispatched - g.received).seconds());
    if (Refused(r)) continue;
    if (e.first_scheduled.has_value()) {
      queueing.push_back((*e.first_scheduled - g.received).seconds());
    }
    if (e.first_token.has_value()) ttft.push_back((*e.first_token - g.received).seconds());
  }
  result.session_time = SummarizeDurations(session_times);
  result.session_times_s = std::move(session_times);
  result.queueing_delay = SummarizeDurations(queueing);
  result.ttft = SummarizeDurations(ttft);
  result.admission_wait = SummarizeDurations(admission_wait);
}

void SummarizeServerTime(const std::vector<RequestView>& requests,
                         const std::vector<size_t>& session_of_request, size_t num_sessions,
                         ArmResult& result) {
  AGENTKV_CHECK(session_of_request.size() == requests.size());
  std::vector<TimeNs> session_server(num_sessions);
  std::vector<double> request_server;
  request_server.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const TimeNs server = *requests[i].engine->finished - requests[i].gateway->received;
    AGENTKV_CHECK(server >= TimeNs(0))
        << "request " << requests[i].gateway->id << " finished before it arrived";
    AGENTKV_CHECK(session_of_request[i] < num_sessions);
    TimeNs& sum = session_server[session_of_request[i]];
    sum = SaturatingAdd(sum, server);
    request_server.push_back(server.seconds());
  }
  std::vector<double> server_time;
  server_time.reserve(num_sessions);
  for (const TimeNs t : session_server) server_time.push_back(t.seconds());
  result.server_time = SummarizeDurations(server_time);
  result.request_server_time = SummarizeDurations(request_server);
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
