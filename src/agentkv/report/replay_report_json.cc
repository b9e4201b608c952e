// The JSON of a ReplayResult, for diffing runs and for plotting elsewhere.
//
// The document is built as boost::json objects, whose members keep insertion order, and written
// by internal::JsonText (exact integers, shortest round-trip doubles, null for non-finite ones),
// so equal results give byte-identical text. The deltas come from the same table rows as
// the terminal and HTML tables. Boost.JSON throws only on allocation failure here.
#include <boost/json.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/report/internal/json_text.h"
#include "agentkv/report/replay_report.h"

namespace agentkv::report {

using sim::ArmResult;
using sim::DurationSummary;
using sim::KvUsageSample;
using sim::ReplayResult;
using sim::ReplaySetup;
namespace {

boost::json::object SummaryJson(const DurationSummary& s) {
  return {{"count", s.count}, {"mean_s", s.mean_s}, {"p50_s", s.p50_s}, {"p90_s", s.p90_s},
          {"p95_s", s.p95_s}, {"p99_s", s.p99_s},   {"max_s", s.max_s}};
}

// The value, or null when unset.
boost::json::value OptionalJson(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

boost::json::object SetupJson(const ReplaySetup& s) {
  boost::json::object o;
  o["workload"] = s.workload;
  boost::json::array notes;
  for (const std::string& note : s.workload_notes) notes.emplace_back(note);
  o["workload_notes"] = std::move(notes);
  o["seed"] = s.seed;
  o["num_engines"] = s.num_engines;
  o["router"] = s.router;
  o["model"] = s.model;
  o["gpu"] = s.gpu;
  o["tp"] = s.tp;
  o["tokens_per_block"] = s.tokens_per_block;
  o["device_tokens_per_engine"] = s.device_tokens_per_engine;
  o["host_tokens_per_engine"] = s.host_tokens_per_engine;
  return o;
}

// The deltas of arm `arm` against the baseline arm over the table rows that have a key. The
// baseline's own deltas are 0 wherever its value is not.
boost::json::object DeltaJson(const std::vector<ReplayTableRow>& rows, size_t arm,
                              size_t baseline) {
  boost::json::object delta;
  for (const ReplayTableRow& row : rows) {
    if (row.key.empty()) continue;
    const ReplayTableCell& cell = row.cells[arm];
    if (arm == baseline) {
      if (cell.number != 0 && std::isfinite(cell.number)) delta[row.key] = 0.0;
    } else if (cell.change) {
      delta[row.key] = *cell.change;
    }
  }
  return delta;
}

// ArmJson's members by section of the arm's result, in the document's order; each appends to
// `o`.

// The arm, its requests and prompts, and what the cache held of them.
void AddCacheJson(const ArmResult& a, boost::json::object& o) {
  o["arm"] = a.arm;
  o["description"] = a.description;
  o["requests_issued"] = a.requests_issued;
  o["requests_completed"] = a.requests_completed;
  o["requests_refused"] = a.requests_refused;
  o["refused_prompt_tokens"] = a.refused_prompt_tokens;
  o["sessions"] = a.sessions;
  o["conversations"] = a.conversations;
  o["prompt_tokens"] = a.prompt_tokens;
  o["prompt_blocks"] = a.prompt_blocks;
  o["cached_device_tokens"] = a.cached_device_tokens;
  o["cached_host_tokens"] = a.cached_host_tokens;
  o["cached_device_blocks"] = a.cached_device_blocks;
  o["cached_host_blocks"] = a.cached_host_blocks;
  o["token_hit_ratio_device"] = a.token_hit_ratio_device;
  o["token_hit_ratio_host"] = a.token_hit_ratio_host;
  o["block_hit_ratio_device"] = a.block_hit_ratio_device;
  o["block_hit_ratio_host"] = a.block_hit_ratio_host;
  o["uncached_tokens"] = a.uncached_tokens;
  o["cold_tokens"] = a.cold_tokens;
  o["evicted_recompute_tokens"] = a.evicted_recompute_tokens;
  o["evicted_recompute_by_pause"] = {{"none", a.evicted_recompute_first},
                                     {"tool_call", a.evicted_recompute_after_tool_call},
                                     {"subagent_wait", a.evicted_recompute_after_subagent_wait},
                                     {"human_turn", a.evicted_recompute_after_human_turn}};
  o["preempted_recompute_tokens"] = a.preempted_recompute_tokens;
}

// Throughput, the latency summaries and the shares of the ideal and of the oracle.
void AddTimingJson(const ArmResult& a, boost::json::object& o) {
  o["makespan_s"] = a.makespan_s;
  o["output_tokens"] = a.output_tokens;
  o["requests_per_s"] = a.requests_per_s;
  o["output_tokens_per_s"] = a.output_tokens_per_s;
  o["session_time"] = SummaryJson(a.session_time);
  o["queueing_delay"] = SummaryJson(a.queueing_delay);
  o["ttft"] = SummaryJson(a.ttft);
  o["admission_wait"] = SummaryJson(a.admission_wait);
  // Server time and the shares of the ideal (null when unset: a reference arm is missing or
  // the baseline equals the infinite cache).
  o["server_time"] = SummaryJson(a.server_time);
  o["request_server_time"] = SummaryJson(a.request_server_time);
  o["uncached_tokens_ideal_share"] = OptionalJson(a.ideal_share.uncached_tokens);
  o["evicted_recompute_tokens_ideal_share"] = OptionalJson(a.ideal_share.evicted_recompute_tokens);
  o["server_time_mean_ideal_share"] = OptionalJson(a.ideal_share.server_time_mean);
  o["uncached_tokens_oracle_share"] = OptionalJson(a.oracle_share.uncached_tokens);
  o["evicted_recompute_tokens_oracle_share"] =
      OptionalJson(a.oracle_share.evicted_recompute_tokens);
  o["server_time_mean_oracle_share"] = OptionalJson(a.oracle_share.server_time_mean);
}

// The engines' and the policies' counters.
void AddCounterJson(const ArmResult& a, boost::json::object& o) {
  o["preemptions"] = a.preemptions;
  o["device_evictions"] = a.device_evictions;
  o["offloads"] = a.offloads;
  o["drops"] = a.drops;
  o["onboards"] = a.onboards;
  o["sessions_closed"] = a.sessions_closed;
  o["tokens_freed_by_close"] = a.tokens_freed_by_close;
  o["demoted_children"] = a.demoted_children;
  o["demoted_blocks"] = a.demoted_blocks;
  o["restored_children"] = a.restored_children;
  o["ttl_pins"] = a.ttl_pins;
  o["ttl_expired"] = a.ttl_expired;
  o["ttl_returned"] = a.ttl_returned;
  // Continuum's counters (the continuum arm).
  o["ttl_declined_by_cost"] = a.ttl_declined_by_cost;
  o["ttl_unpinned_under_pressure"] = a.ttl_unpinned_under_pressure;
  // The working set's counters, only for an arm that waited or held (the other arms' reports
  // keep their keys).
  if (a.working_set_waited + a.working_set_holds_returned + a.working_set_holds_expired > 0) {
    o["working_set_waited"] = a.working_set_waited;
    o["working_set_aged"] = a.working_set_aged;
    o["working_set_holds_returned"] = a.working_set_holds_returned;
    o["working_set_holds_expired"] = a.working_set_holds_expired;
  }
  // Stall offload's counters, only for an arm that ran it (the other arms' reports keep their
  // keys).
  if (a.stall_offloaded_sessions + a.stall_prefetched_blocks + a.stall_returned_offloaded > 0) {
    o["stall_offloaded_sessions"] = a.stall_offloaded_sessions;
    o["stall_offloaded_blocks"] = a.stall_offloaded_blocks;
    o["stall_prefetched_blocks"] = a.stall_prefetched_blocks;
    o["stall_returned_offloaded"] = a.stall_returned_offloaded;
    o["stall_returned_prefetched"] = a.stall_returned_prefetched;
  }
}

// The RL rollout block (replay_result.h RolloutMetrics), present only for a rollout.
boost::json::object RolloutJson(const sim::RolloutMetrics& r) {
  boost::json::object rollout;
  rollout["steps"] = r.steps;
  rollout["trajectories"] = r.trajectories;
  rollout["step_makespan_mean_s"] = r.step_makespan_mean_s;
  rollout["step_makespan_max_s"] = r.step_makespan_max_s;
  rollout["trajectories_per_s"] = r.trajectories_per_s;
  rollout["generated_tokens_per_s"] = r.generated_tokens_per_s;
  rollout["gpu_busy_fraction"] = r.gpu_busy_fraction;
  rollout["compute_utilization"] = r.compute_utilization;
  rollout["kv_token_usage_mean"] = r.kv_token_usage_mean;
  rollout["kv_token_usage_peak"] = r.kv_token_usage_peak;
  rollout["kv_occupancy_mean"] = r.kv_occupancy_mean;
  rollout["kv_occupancy_peak"] = r.kv_occupancy_peak;
  rollout["waiting_requests_mean"] = r.waiting_requests_mean;
  rollout["waiting_requests_peak"] = r.waiting_requests_peak;
  return rollout;
}

// Each sample of the arm's KV usage: [time s, used, evictable, capacity, waiting requests].
boost::json::array KvUsageJson(const std::vector<KvUsageSample>& samples) {
  boost::json::array usage;
  usage.reserve(samples.size());
  for (const KvUsageSample& s : samples) {
    usage.push_back(boost::json::array{s.time.seconds(), s.used_tokens, s.evictable_tokens,
                                       s.capacity_tokens, s.waiting_requests});
  }
  return usage;
}

boost::json::object CountsJson(const std::vector<std::pair<std::string, int64_t>>& counts) {
  boost::json::object o;
  for (const auto& [name, count] : counts) o[name] = count;
  return o;
}

// The measured run's own block (replay_result.h MeasuredRun), present only for `agentkv load`.
boost::json::object MeasuredJson(const sim::MeasuredRun& m) {
  boost::json::object o;
  o["target"] = m.target;
  o["time_scale"] = m.time_scale;
  o["wall_s"] = m.wall_s;
  o["client_cpu_s"] = m.client_cpu_s;
  o["first_90_percent_requests_per_s"] = m.first_90_percent_requests_per_s;
  o["inter_token"] = SummaryJson(m.inter_token);
  o["attempts"] = m.attempts;
  o["retries"] = m.retries;
  o["requests_failed"] = m.requests_failed;
  o["errors"] = CountsJson(m.errors);
  o["sessions_closed"] = m.sessions_closed;
  o["close_errors"] = CountsJson(m.close_errors);
  o["requests_cancelled"] = m.requests_cancelled;
  o["stopped"] = m.stopped;
  if (m.ramp.has_value()) {
    boost::json::object ramp;
    ramp["period_s"] = m.ramp->period_s;
    ramp["ttft_slo_s"] = m.ramp->ttft_slo_s;
    boost::json::array steps;
    for (const sim::RampStep& step : m.ramp->steps) {
      steps.push_back(boost::json::object{
          {"users", step.users}, {"requests", step.requests}, {"ttft_p95_s", step.ttft_p95_s}});
    }
    ramp["steps"] = std::move(steps);
    ramp["users_held"] = m.ramp->users_held;
    ramp["slo_exceeded"] = m.ramp->slo_exceeded;
    o["ramp"] = std::move(ramp);
  }
  return o;
}

boost::json::object ArmJson(const ArmResult& a, boost::json::object delta) {
  boost::json::object o;
  AddCacheJson(a, o);
  AddTimingJson(a, o);
  AddCounterJson(a, o);
  boost::json::object series;
  for (const auto& [name, value] : a.agentic_kv) series.emplace(name, value);
  o["agentic_kv"] = std::move(series);
  o["delta_vs_baseline"] = std::move(delta);
  o["kv_usage"] = KvUsageJson(a.kv_usage);
  if (a.rollout.has_value()) o["rollout"] = RolloutJson(*a.rollout);
  if (a.measured.has_value()) o["measured"] = MeasuredJson(*a.measured);
  boost::json::array times;
  times.reserve(a.session_times_s.size());
  for (const double t : a.session_times_s) times.push_back(t);
  o["session_times_s"] = std::move(times);
  return o;
}

}  // namespace

std::string ReplayResultJson(const ReplayResult& result) {
  boost::json::object root;
  root["setup"] = SetupJson(result.setup);
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  if (baseline) {
    root["baseline"] = result.arms[*baseline].arm;
  } else {
    root["baseline"] = nullptr;
  }
  boost::json::array arms;
  const std::vector<ReplayTableRow> rows = ReplayTableRows(result, NumberStyle::kFull);
  for (size_t i = 0; i < result.arms.size(); ++i) {
    arms.push_back(ArmJson(result.arms[i], DeltaJson(rows, i, *baseline)));
  }
  root["arms"] = std::move(arms);
  return internal::JsonText(root);
}

}  // namespace agentkv::report
