#include "agentkv/sim/replay.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/sim/agent_driver.h"
#include "agentkv/sim/event_loop.h"
#include "agentkv/sim/fleet_model.h"
#include "agentkv/sim/fleet_next_use.h"
#include "agentkv/sim/gateway_model.h"

namespace agentkv::sim {
namespace {

constexpr int64_t kMaxTotalTokens = int64_t{1} << 40;
// Events between two progress reports.
constexpr int64_t kProgressEvents = 1 << 14;

template <typename T>
std::string Str(T value) {
  return std::to_string(value);
}

Status OutOfRange(std::string_view field, const std::string& value, std::string_view range) {
  return InvalidArgumentError("ReplayOptions." + std::string(field) + " must be in " +
                              std::string(range) + ", got " + value);
}

// Everything one arm runs on, built fresh per arm.
struct ArmFleet {
  // The oracle arm's ranking, set on every engine's cache (declared first: it outlives them).
  std::unique_ptr<FleetNextUse> oracle;
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet;
  std::unique_ptr<GatewayModel> gateway;
};

// Device blocks that hold every distinct prompt block of the workload plus the uncommitted
// blocks (output and partial tail) of every request at once: an engine that large never
// evicts.
int64_t InfiniteCapacityBlocks(const std::vector<std::vector<uint64_t>>& namespaced_ids,
                               const std::vector<uint64_t>& namespaces,
                               const std::vector<int64_t>& tail_tokens, int32_t tokens_per_block) {
  const kv::BlockKeyHasher hasher(0);
  std::unordered_set<uint64_t> unique;
  int64_t tails = 0;
  for (size_t i = 0; i < namespaced_ids.size(); ++i) {
    for (const kv::BlockKey key : hasher.KeysFromBlockIds(namespaced_ids[i], namespaces[i])) {
      unique.insert(key.value());
    }
    tails = SaturatingAdd(tails, tail_tokens[i] / tokens_per_block + 2);
  }
  return std::min(engine::kMaxKvPoolBlocks, static_cast<int64_t>(unique.size()) + tails);
}

// Whether a request the drivers submit with `prompt_tokens` and `output_tokens` (each at least
// 1) fits one engine's `device_blocks` at once, as StepScheduler::Submit requires. One that
// does not is rejected by every engine of the configured fleet (counted in requests_refused,
// as SGLang answers it 400), and the infinite-cache arm is sized without it, so that no arm
// allocates a cache for an absurd request.
bool FitsOneEngine(int64_t prompt_tokens, int64_t output_tokens, int64_t device_blocks,
                   int32_t tokens_per_block) {
  const int64_t tokens = SaturatingAdd(prompt_tokens, output_tokens);
  const int64_t blocks = SaturatingAdd(tokens, tokens_per_block - 1) / tokens_per_block;
  return blocks <= device_blocks;
}

// The prompt length the drivers submit: the recorded one, or the blocks' when they hold more.
int64_t SubmittedPromptTokens(int64_t input_tokens, size_t hash_ids, int32_t tokens_per_block) {
  return std::max<int64_t>(
      {input_tokens, SaturatingMul(static_cast<int64_t>(hash_ids), tokens_per_block), 1});
}

// The engine config of every engine of `arm`, on a workload of `tokens_per_block`-token blocks;
// `infinite_blocks` is the device tier of an infinite-cache arm.
engine::EngineConfig ArmEngineConfig(const ReplayOptions& options, const ArmSpec& arm,
                                     int32_t tokens_per_block, int64_t infinite_blocks) {
  engine::EngineConfig config = options.engine;
  config.kv_pool.tokens_per_block = tokens_per_block;
  if (arm.infinite_cache) config.kv_pool.min_device_blocks = infinite_blocks;
  if (!arm.host_tier) config.kv_pool.hicache_ratio = 0.0;
  config.cache.session_close_mode = options.session_close_mode;
  if (arm.subagent_demotion) {
    config.cache.finished_subagent_min_idle_iterations = options.finished_subagent_min_idle_steps;
    config.cache.finished_subagent_min_idle_s = options.finished_subagent_min_idle_s;
    config.cache.finished_subagent_offloadable = options.finished_subagent_offloadable;
  }
  config.cache = ArmCachePolicy(arm, config.cache, options.finished_subagent_priority);
  if (arm.continuum) config.scheduler.program_fcfs = options.continuum_program_fcfs;
  if (arm.program_fcfs) config.scheduler.program_fcfs = true;
  if (arm.stall_offload) config.stall_offload = options.stall_offload;
  return config;
}

StatusOr<std::unique_ptr<ArmFleet>> BuildArmFleet(const ReplayOptions& options, const ArmSpec& arm,
                                                  int32_t tokens_per_block,
                                                  int64_t infinite_blocks) {
  FleetModelOptions fleet_options;
  fleet_options.num_engines = options.num_engines;
  fleet_options.router.policy = options.router;
  EngineModelOptions& engine_options = fleet_options.engine;
  engine_options.config = ArmEngineConfig(options, arm, tokens_per_block, infinite_blocks);
  engine_options.fixed_step_time = options.fixed_step_time;
  engine_options.keep_events = options.keep_events;
  // The working set's pins follow Continuum's lifecycle: released when their program returns,
  // and under memory pressure.
  engine_options.config.continuum_pins = arm.continuum || arm.working_set;
  auto arm_fleet = std::make_unique<ArmFleet>();
  AGENTKV_ASSIGN_OR_RETURN(arm_fleet->fleet, FleetModel::Create(&arm_fleet->loop, fleet_options));
  GatewayModelOptions gateway_options;
  gateway_options.agentic = options.agentic;
  gateway_options.agentic.agentic_session_lifecycle = arm.session_lifecycle;
  gateway_options.agentic.agentic_program_admission = arm.program_admission || arm.admission_v2;
  gateway_options.agentic.agentic_admission_policy =
      arm.admission_v2 ? control::AdmissionPolicy::kV2 : control::AdmissionPolicy::kSeed;
  gateway_options.agentic.agentic_admission_scope = control::AdmissionScope::kAll;
  if (arm.fixed_ttl) gateway_options.fixed_ttl = TimeNs::Seconds(options.fixed_ttl_s);
  if (arm.continuum) gateway_options.continuum = options.continuum;
  gateway_options.program_fcfs =
      arm.program_fcfs || (arm.continuum && options.continuum_program_fcfs);
  if (arm.working_set) {
    control::WorkingSetOptions working_set = options.working_set;
    working_set.host_tier_ratio = arm.host_tier ? options.engine.kv_pool.hicache_ratio : 0.0;
    gateway_options.working_set = working_set;
  }
  gateway_options.deliver_subagent_demotion =
      arm.subagent_demotion && options.subagent_demotion_delivery == DemotionDelivery::kEveryEngine;
  gateway_options.session_idle_timeout = TimeNs::Seconds(options.session_idle_timeout_s);
  AGENTKV_ASSIGN_OR_RETURN(
      arm_fleet->gateway,
      GatewayModel::Create(&arm_fleet->loop, arm_fleet->fleet.get(), gateway_options));
  return arm_fleet;
}

// Seals `ranking` and makes it the eviction order of every engine of the (fresh) fleet.
Status InstallOracle(ArmFleet& arm_fleet, std::unique_ptr<FleetNextUse> ranking) {
  ranking->Seal();
  for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
    EngineModel& engine = arm_fleet.fleet->mutable_engine(EngineId(e));
    if (Status s = engine.SetNextUseRanking(ranking.get()); !s.ok()) {
      return InternalError("oracle arm, engine " + Str(e) + ": " + s.ToString());
    }
    ranking->Attach(&engine);
  }
  arm_fleet.oracle = std::move(ranking);
  return Status::Ok();
}

// The oracle arm's view of the agent driver: agent (workload_index, subagent) is the ranking's
// agent agent_of[workload_index][subagent + 1].
class OracleProgress final : public AgentProgressHook {
 public:
  OracleProgress(FleetNextUse* ranking, std::vector<std::vector<int32_t>> agent_of)
      : ranking_(ranking), agent_of_(std::move(agent_of)) {}
  void Submitted(int32_t workload_index, int32_t subagent, int32_t request, TimeNs now) override {
    ranking_->Submitted(AgentOf(workload_index, subagent), request, now);
  }
  void Completed(int32_t workload_index, int32_t subagent, int32_t request,
                 TimeNs next_ready) override {
    ranking_->Completed(AgentOf(workload_index, subagent), request, next_ready);
  }

 private:
  int32_t AgentOf(int32_t workload_index, int32_t subagent) const {
    const int32_t agent =
        agent_of_[static_cast<size_t>(workload_index)][static_cast<size_t>(subagent + 1)];
    AGENTKV_CHECK_GE(agent, 0);
    return agent;
  }
  FleetNextUse* ranking_;
  std::vector<std::vector<int32_t>> agent_of_;
};

// The future of `workload` as the agent driver replays it from `origin` (fleet_next_use.h):
// every replayed agent's requests with the keys the driver submits (none for a request that
// does not fit an engine of `device_blocks`), their recorded offsets
// (recorded server time plus gap) and the estimated time of their first request. Fills
// `agent_of` as OracleProgress reads it.
std::unique_ptr<FleetNextUse> AgenticFuture(const AgenticWorkload& workload,
                                            const ReplayOptions& options,
                                            const kv::BlockKeyHasher& hasher, int64_t device_blocks,
                                            TimeNs origin,
                                            std::vector<std::vector<int32_t>>& agent_of) {
  auto ranking = std::make_unique<FleetNextUse>();
  agent_of.assign(workload.conversations.size(), {});
  for (size_t k = 0; k < workload.conversations.size(); ++k) {
    const WekaConversation& c = workload.conversations[k];
    const uint64_t namespace_id = static_cast<uint64_t>(k) + 1;
    const auto add = [&](const std::vector<WekaRequest>& requests, TimeNs start) {
      std::vector<std::vector<kv::BlockKey>> keys;
      std::vector<TimeNs> offsets;
      for (size_t j = 0; j < requests.size(); ++j) {
        const WekaRequest& r = requests[j];
        // A request no engine can hold is rejected: it looks nothing up.
        const bool fits =
            FitsOneEngine(SubmittedPromptTokens(r.input_tokens, r.hash_ids.size(), c.block_size),
                          std::max<int64_t>(1, r.output_tokens), device_blocks, c.block_size);
        keys.push_back(
            fits ? DriverKeysOf(hasher, options.shared_prefix_ids, r.hash_ids, namespace_id)
                 : std::vector<kv::BlockKey>{});
        offsets.push_back(
            j == 0 ? TimeNs(0)
                   : SaturatingAdd(offsets.back(),
                                   SaturatingAdd(RecordedApiTime(requests[j - 1]),
                                                 RecordedGap(requests[j - 1], requests[j]))));
      }
      const TimeNs first = requests.empty() ? start : SaturatingAdd(start, requests.front().t);
      return ranking->AddAgent(std::move(keys), std::move(offsets), first);
    };
    const TimeNs start = SaturatingAdd(origin, workload.starts[k]);
    agent_of[k].assign(c.subagents.size() + 1, -1);
    agent_of[k][0] = add(c.requests, start);
    for (size_t j = 0; j < c.subagents.size(); ++j) {
      const WekaSubagent& sub = c.subagents[j];
      if (!IsReplayed(c, sub, options.subagent_models)) continue;
      agent_of[k][j + 1] = add(sub.requests, SaturatingAdd(start, sub.spawn()));
    }
  }
  return ranking;
}

// Runs the loop until idle, reporting the fraction `done()` says every kProgressEvents events.
void RunLoop(EventLoop& loop, const std::function<double()>& done,
             const std::function<void(double)>& progress) {
  int64_t events = 0;
  while (loop.RunNext()) {
    if (progress && ++events % kProgressEvents == 0) progress(done());
  }
  if (progress) progress(1.0);
}

// Conservation and invariants at the end of an arm (gate (c) of the replay's tests).
Status CheckArmEnd(const ArmFleet& arm_fleet, int64_t issued, int64_t completed) {
  if (issued != completed) {
    return InternalError(Str(issued) + " requests issued but " + Str(completed) + " completed");
  }
  AGENTKV_RETURN_IF_ERROR(arm_fleet.gateway->CheckDrained());
  if (arm_fleet.fleet->num_submitted() != arm_fleet.fleet->num_completed()) {
    return InternalError("the fleet completed " + Str(arm_fleet.fleet->num_completed()) + " of " +
                         Str(arm_fleet.fleet->num_submitted()) + " requests");
  }
  for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
    const EngineModel& engine = arm_fleet.fleet->engine(EngineId(e));
    if (Status s = engine.engine().CheckInvariants(); !s.ok()) {
      return InternalError("engine " + Str(e) + ": " + s.ToString());
    }
    if (engine.in_flight() != 0 || engine.engine().cache().active_requests() != 0) {
      return InternalError("engine " + Str(e) + " still runs requests at the end");
    }
    // Every pin (fixed-ttl, continuum, the working set's holds) ended: expired, returned or
    // released under pressure.
    if (engine.pinned_tokens() != 0) {
      return InternalError("engine " + Str(e) + " still pins " + Str(engine.pinned_tokens()) +
                           " tokens at the end");
    }
  }
  return Status::Ok();
}

// One request as the summary needs it.
struct RequestView {
  const GatewayRecord* gateway = nullptr;
  const EngineRequestRecord* engine = nullptr;
  // Closed-loop agentic workloads: the pause before the request (the agent's previous
  // request's next_pause), unset for an agent's first request. Open-loop traces: neither.
  bool agentic = false;
  std::optional<PauseKind> pause_before;
};

// Fills `result` from the run. `requests` in submission order; `session_times` of the main
// agents; `makespan` from the first start to the last completion.
void Summarize(ArmFleet& arm_fleet, const ArmSpec& arm, const std::vector<RequestView>& requests,
               std::vector<double> session_times, TimeNs makespan, ArmResult& result) {
  const int64_t block = arm_fleet.fleet->engine(EngineId(0)).engine().tokens_per_block();
  result.arm = arm.name;
  result.description = arm.Description();
  std::vector<double> queueing;
  std::vector<double> ttft;
  std::vector<double> admission_wait;
  for (const RequestView& r : requests) {
    const GatewayRecord& g = *r.gateway;
    const EngineRequestRecord& e = *r.engine;
    const engine::RequestReport& report = e.report;
    if (g.refused || report.rejected) {
      // Refused work is one metric, whoever refused it; it looked nothing up.
      AGENTKV_CHECK(report.cached_device_tokens == 0 && report.cached_host_tokens == 0 &&
                    report.uncached_tokens == 0 && e.cold_tokens == 0 &&
                    e.evicted_recompute_tokens == 0)
          << "refused request " << g.id << " has prefix cache counts";
      ++result.requests_refused;
      result.refused_prompt_tokens += g.prompt_tokens;
      if (g.dispatched.has_value()) {
        admission_wait.push_back((*g.dispatched - g.received).seconds());
      }
      continue;
    }
    result.prompt_tokens += g.prompt_tokens;
    result.prompt_blocks += g.prompt_blocks;
    result.cached_device_tokens += report.cached_device_tokens;
    result.cached_host_tokens += report.cached_host_tokens;
    result.uncached_tokens += report.uncached_tokens;
    result.cold_tokens += e.cold_tokens;
    result.evicted_recompute_tokens += e.evicted_recompute_tokens;
    if (r.agentic) {
      switch (r.pause_before.value_or(PauseKind::kUnknown)) {
        case PauseKind::kUnknown:
        case PauseKind::kSessionEnd:  // Nothing follows an end: only a first request.
          result.evicted_recompute_first += e.evicted_recompute_tokens;
          break;
        case PauseKind::kToolCall:
          result.evicted_recompute_after_tool_call += e.evicted_recompute_tokens;
          break;
        case PauseKind::kSubagentWait:
          result.evicted_recompute_after_subagent_wait += e.evicted_recompute_tokens;
          break;
        case PauseKind::kHumanTurn:
          result.evicted_recompute_after_human_turn += e.evicted_recompute_tokens;
          break;
      }
    }
    result.preempted_recompute_tokens += report.recomputed_tokens;
    result.output_tokens += report.output_tokens;
    result.preemptions += report.preemptions;
    if (g.dispatched.has_value()) admission_wait.push_back((*g.dispatched - g.received).seconds());
    if (e.first_scheduled.has_value()) {
      queueing.push_back((*e.first_scheduled - g.received).seconds());
    }
    if (e.first_token.has_value()) ttft.push_back((*e.first_token - g.received).seconds());
  }
  result.cached_device_blocks = result.cached_device_tokens / block;
  result.cached_host_blocks = result.cached_host_tokens / block;
  auto ratio = [](int64_t part, int64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  result.token_hit_ratio_device = ratio(result.cached_device_tokens, result.prompt_tokens);
  result.token_hit_ratio_host = ratio(result.cached_host_tokens, result.prompt_tokens);
  result.block_hit_ratio_device = ratio(result.cached_device_blocks, result.prompt_blocks);
  result.block_hit_ratio_host = ratio(result.cached_host_blocks, result.prompt_blocks);
  result.makespan_s = makespan.seconds();
  if (result.makespan_s > 0) {
    result.requests_per_s = static_cast<double>(result.requests_completed) / result.makespan_s;
    result.output_tokens_per_s = static_cast<double>(result.output_tokens) / result.makespan_s;
  }
  result.session_time = SummarizeDurations(session_times);
  result.session_times_s = std::move(session_times);
  result.queueing_delay = SummarizeDurations(queueing);
  result.ttft = SummarizeDurations(ttft);
  result.admission_wait = SummarizeDurations(admission_wait);
  for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
    const EngineModel& engine = arm_fleet.fleet->engine(EngineId(e));
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
  result.ttl_declined_by_cost = arm_fleet.gateway->pins_declined_by_cost();
  if (const control::WorkingSetAdmission* ws = arm_fleet.gateway->working_set(); ws != nullptr) {
    result.working_set_waited = ws->counters().waited;
    result.working_set_aged = ws->counters().aged;
    result.working_set_holds_returned = ws->counters().holds_returned;
    result.working_set_holds_expired = ws->counters().holds_expired;
  }
  result.sessions_closed = arm_fleet.gateway->engine_session_closes();
  result.tokens_freed_by_close = arm_fleet.gateway->tokens_freed_by_close();
  if (arm.session_lifecycle || arm.program_admission || arm.admission_v2) {
    result.agentic_kv = arm_fleet.gateway->AgenticKvMetrics();
  }
  result.kv_usage = arm_fleet.gateway->kv_usage();
}

// --- Server time (ArmResult::server_time, request_server_time) ---

// Fills the server times of `result`: per request, finished - gateway arrival; per session, the
// sum over its requests, in exact nanoseconds. `requests` in submission order;
// `session_of_request[i]` in [0, num_sessions) is the session `requests[i]` belongs to (for a
// sub-agent's request, its main agent's).
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

// The session of each of `driven`'s requests, in its order: the index of its main agent among
// the main agents of driven.conversations (a sub-agent shares its main agent's workload index).
std::vector<size_t> SessionOfRequest(const AgentDriverResult& driven) {
  std::map<int32_t, size_t> session_of_workload;
  for (const DriverConversationResult& c : driven.conversations) {
    if (c.subagent < 0) session_of_workload.emplace(c.workload_index, session_of_workload.size());
  }
  std::map<int64_t, size_t> session_of_conversation;
  for (const DriverConversationResult& c : driven.conversations) {
    session_of_conversation.emplace(c.conversation.value(),
                                    session_of_workload.at(c.workload_index));
  }
  std::vector<size_t> sessions;
  sessions.reserve(driven.requests.size());
  for (const DriverRequest& r : driven.requests) {
    sessions.push_back(session_of_conversation.at(r.conversation.value()));
  }
  return sessions;
}

// The rollout block of `result` (RolloutMetrics) for a workload with groups: steps are the
// groups, trajectories the main agents. Called after Summarize (it reads the output tokens,
// the makespan and the gauge samples there).
RolloutMetrics SummarizeRollout(const ArmFleet& arm_fleet, const AgenticWorkload& workload,
                                const AgentDriverResult& driven, const ArmResult& result) {
  RolloutMetrics m;
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
  const std::vector<KvUsageSample>& samples = result.kv_usage;
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
  return m;
}

std::vector<std::vector<kv::KvEvent>> TakeEngineEvents(const ArmFleet& arm_fleet) {
  std::vector<std::vector<kv::KvEvent>> events;
  for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
    events.push_back(arm_fleet.fleet->engine(EngineId(e)).events());
  }
  return events;
}

RequestView ViewOf(const ArmFleet& arm_fleet, RequestId id) {
  RequestView view;
  view.gateway = arm_fleet.gateway->FindRecord(id);
  if (view.gateway != nullptr && view.gateway->refused) {
    view.engine = arm_fleet.gateway->RefusedRecord(id);
    AGENTKV_CHECK(view.engine != nullptr) << "refused request " << id << " has no account";
    return view;
  }
  AGENTKV_CHECK(view.gateway != nullptr && view.gateway->engine.has_value())
      << "request " << id << " has no gateway record or engine";
  view.engine = arm_fleet.fleet->engine(*view.gateway->engine).FindRecord(id);
  AGENTKV_CHECK(view.engine != nullptr && view.engine->finished.has_value())
      << "request " << id << " has no finished engine record";
  return view;
}

ReplaySetup SetupFor(const ReplayOptions& options, int32_t tokens_per_block,
                     std::string_view description, uint64_t seed) {
  ReplaySetup setup;
  setup.workload = std::string(description);
  setup.seed = seed;
  setup.num_engines = options.num_engines;
  setup.router = std::string(routing::RouterPolicyName(options.router));
  setup.model = std::string(engine::PresetName(options.engine.model));
  setup.gpu = std::string(engine::PresetName(options.engine.gpu));
  setup.tp = options.engine.tp;
  setup.tokens_per_block = tokens_per_block;
  return setup;
}

// Runs every arm through `run_arm` as one task each (`runner`, or in order on this thread),
// reporting progress, and fills the capacities of `setup` from the first arm without an
// unbounded cache.
StatusOr<ReplayResult> RunArms(
    ReplaySetup setup, const ReplayOptions& options, const ReplayProgress& progress,
    const ArmTaskRunner& runner,
    const std::function<StatusOr<ArmRun>(const ArmSpec&, const std::function<void(double)>&)>&
        run_arm) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool,
                           KvPoolPerEngine(options, setup.tokens_per_block));
  setup.device_tokens_per_engine = pool.device_tokens();
  setup.host_tokens_per_engine = pool.host_tokens();
  ReplayResult result;
  result.setup = std::move(setup);
  const size_t num_arms = options.arms.size();
  // Each task writes its own slot only.
  std::vector<std::optional<StatusOr<ArmResult>>> runs(num_arms);
  std::vector<std::function<void()>> tasks;
  tasks.reserve(num_arms);
  for (size_t i = 0; i < num_arms; ++i) {
    tasks.emplace_back([&, i] {
      const ArmSpec& arm = options.arms[i];
      std::function<void(double)> arm_progress;
      if (progress) {
        arm_progress = [&progress, i, num_arms, &arm](double fraction) {
          progress(i, num_arms, arm.name, fraction);
        };
      }
      if (arm_progress) arm_progress(0.0);
      StatusOr<ArmRun> run = run_arm(arm, arm_progress);
      runs[i] = run.ok() ? StatusOr<ArmResult>(std::move(run->result))
                         : StatusOr<ArmResult>(run.status());
    });
  }
  if (runner) {
    runner(tasks);
  } else {
    for (const std::function<void()>& task : tasks) task();
  }
  AGENTKV_ASSIGN_OR_RETURN(
      result.arms, ForEachArm<ArmResult>(options.arms, [&](size_t i, const ArmSpec&) {
        AGENTKV_CHECK(runs[i].has_value()) << "the arm runner skipped arm " << i;
        return *std::move(runs[i]);
      }));
  FillIdealShares(result);
  return result;
}

}  // namespace

Status ReplayOptions::Validate() const {
  if (arms.empty())
    return InvalidArgumentError("ReplayOptions.arms is empty: name at least one arm");
  AGENTKV_RETURN_IF_ERROR(ValidateArms(arms));
  if (num_engines < 1 || num_engines > 1024) {
    return OutOfRange("num_engines", Str(num_engines), "[1, 1024]");
  }
  if (engine.kv_pool.max_total_tokens < 0 || engine.kv_pool.max_total_tokens > kMaxTotalTokens) {
    return OutOfRange("engine.kv_pool.max_total_tokens", Str(engine.kv_pool.max_total_tokens),
                      "[0, 2^40]");
  }
  if (!(engine.kv_pool.hicache_ratio > 0.0 && engine.kv_pool.hicache_ratio <= 100.0)) {
    return OutOfRange("engine.kv_pool.hicache_ratio", Str(engine.kv_pool.hicache_ratio),
                      "(0, 100]");
  }
  if (engine.kv_pool.hicache_tokens != 0) {
    return OutOfRange("engine.kv_pool.hicache_tokens", Str(engine.kv_pool.hicache_tokens),
                      "[0, 0] (the host tier is hicache_ratio)");
  }
  if (finished_subagent_priority < 0 || finished_subagent_priority > 100) {
    return OutOfRange("finished_subagent_priority", Str(finished_subagent_priority), "[0, 100]");
  }
  if (finished_subagent_min_idle_steps < 0) {
    return OutOfRange("finished_subagent_min_idle_steps", Str(finished_subagent_min_idle_steps),
                      "[0, inf)");
  }
  if (finished_subagent_min_idle_s.has_value() &&
      !(*finished_subagent_min_idle_s >= 0.0 &&
        *finished_subagent_min_idle_s <= kv::kMaxFinishedSubagentMinIdleS)) {
    return OutOfRange("finished_subagent_min_idle_s", Str(*finished_subagent_min_idle_s),
                      "[0, 1e6]");
  }
  if (!(fixed_ttl_s > 0.0 && fixed_ttl_s <= 86400.0)) {
    return OutOfRange("fixed_ttl_s", Str(fixed_ttl_s), "(0, 86400]");
  }
  if (!(session_idle_timeout_s >= 0.0 && session_idle_timeout_s <= 31'536'000.0)) {
    return OutOfRange("session_idle_timeout_s", Str(session_idle_timeout_s), "[0, 31536000]");
  }
  AGENTKV_RETURN_IF_ERROR(continuum.Validate());
  AGENTKV_RETURN_IF_ERROR(stall_offload.Validate());
  AGENTKV_RETURN_IF_ERROR(working_set.Validate());
  control::AgenticOptions admission = agentic;
  admission.agentic_program_admission = true;
  AGENTKV_RETURN_IF_ERROR(admission.Validate());
  routing::RouterOptions router_options;
  router_options.policy = router;
  AGENTKV_RETURN_IF_ERROR(router_options.Validate());
  return engine.Validate();
}

engine::EngineConfig DefaultReplayEngine() {
  engine::EngineConfig config;
  config.kv_pool.hicache_ratio = 2.0;
  return config;
}

StatusOr<engine::KvPool> KvPoolPerEngine(const ReplayOptions& options, int32_t tokens_per_block) {
  engine::EngineConfig config = options.engine;
  config.kv_pool.tokens_per_block = tokens_per_block;
  return engine::SizeKvPool(config);
}

StatusOr<ArmRun> RunAgenticArm(const AgenticWorkload& workload, const ReplayOptions& options,
                               const ArmSpec& arm, const std::function<void(double)>& progress) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  if (workload.conversations.empty()) {
    return InvalidArgumentError("the workload has no conversations");
  }
  // The readers and generators keep token counts within their bound; a workload built by hand
  // must too, so that the report's sums over requests cannot overflow.
  for (size_t k = 0; k < workload.conversations.size(); ++k) {
    const WekaConversation& c = workload.conversations[k];
    const auto check = [&](const WekaRequest& r, const std::string& name) {
      AGENTKV_RETURN_IF_ERROR(CheckTokens(name + ".input_tokens", r.input_tokens));
      return CheckTokens(name + ".output_tokens", r.output_tokens);
    };
    for (size_t i = 0; i < c.requests.size(); ++i) {
      AGENTKV_RETURN_IF_ERROR(
          check(c.requests[i], "conversations[" + Str(k) + "].requests[" + Str(i) + "]"));
    }
    for (const WekaSubagent& sub : c.subagents) {
      for (size_t i = 0; i < sub.requests.size(); ++i) {
        AGENTKV_RETURN_IF_ERROR(check(sub.requests[i], "conversations[" + Str(k) + "] sub-agent " +
                                                           sub.agent_id + " requests[" + Str(i) +
                                                           "]"));
      }
    }
  }
  const int32_t tokens_per_block = workload.conversations.front().block_size;
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool, KvPoolPerEngine(options, tokens_per_block));
  const int64_t device_blocks = pool.device_blocks;
  int64_t infinite_blocks = 0;
  if (arm.infinite_cache) {
    std::vector<std::vector<uint64_t>> ids;
    std::vector<uint64_t> namespaces;
    std::vector<int64_t> tails;
    for (size_t k = 0; k < workload.conversations.size(); ++k) {
      const WekaConversation& c = workload.conversations[k];
      auto add = [&](const WekaRequest& r) {
        if (!FitsOneEngine(SubmittedPromptTokens(r.input_tokens, r.hash_ids.size(), c.block_size),
                           std::max<int64_t>(1, r.output_tokens), device_blocks,
                           tokens_per_block)) {
          return;
        }
        ids.push_back(r.hash_ids);
        namespaces.push_back(static_cast<uint64_t>(k) + 1);
        tails.push_back(r.output_tokens + r.input_tokens % tokens_per_block);
      };
      for (const WekaRequest& r : c.requests) add(r);
      for (const WekaSubagent& s : c.subagents) {
        if (!IsReplayed(c, s, options.subagent_models)) continue;
        for (const WekaRequest& r : s.requests) add(r);
      }
    }
    infinite_blocks = InfiniteCapacityBlocks(ids, namespaces, tails, tokens_per_block);
  }
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<ArmFleet> arm_fleet,
                           BuildArmFleet(options, arm, tokens_per_block, infinite_blocks));
  std::unique_ptr<OracleProgress> oracle_progress;
  if (arm.oracle) {
    std::vector<std::vector<int32_t>> agent_of;
    std::unique_ptr<FleetNextUse> ranking =
        AgenticFuture(workload, options, arm_fleet->fleet->engine(EngineId(0)).engine().hasher(),
                      device_blocks, arm_fleet->loop.now(), agent_of);
    oracle_progress = std::make_unique<OracleProgress>(ranking.get(), std::move(agent_of));
    AGENTKV_RETURN_IF_ERROR(InstallOracle(*arm_fleet, std::move(ranking)));
  }
  AGENTKV_ASSIGN_OR_RETURN(
      std::unique_ptr<AgentDriver> driver,
      AgentDriver::Create(&arm_fleet->loop, arm_fleet->gateway.get(), &workload,
                          AgentDriverOptions{.shared_prefix_ids = options.shared_prefix_ids,
                                             .subagent_models = options.subagent_models,
                                             .subagent_routing = options.subagent_routing,
                                             .progress_hook = oracle_progress.get()}));
  AGENTKV_RETURN_IF_ERROR(driver->Start());
  int64_t total_requests = 0;
  for (const WekaConversation& c : workload.conversations) {
    total_requests += ReplayedRequests(c, options.subagent_models);
  }
  RunLoop(
      arm_fleet->loop,
      [&driver, total_requests] {
        return total_requests > 0 ? static_cast<double>(driver->result().requests_completed) /
                                        static_cast<double>(total_requests)
                                  : 1.0;
      },
      progress);
  AGENTKV_RETURN_IF_ERROR(driver->status());
  const AgentDriverResult& driven = driver->result();
  if (!driver->done()) return InternalError("the loop went idle before every agent ended");
  AGENTKV_RETURN_IF_ERROR(
      CheckArmEnd(*arm_fleet, driven.requests_issued, driven.requests_completed));

  ArmRun run;
  run.result.requests_issued = driven.requests_issued;
  run.result.requests_completed = driven.requests_completed;
  std::vector<RequestView> views;
  views.reserve(driven.requests.size());
  // The pause before a request is its agent's previous request's (submitted before it).
  std::map<std::pair<ConversationId, int32_t>, PauseKind> pause_after;
  for (const DriverRequest& r : driven.requests) {
    views.push_back(ViewOf(*arm_fleet, r.id));
    views.back().agentic = true;
    if (auto it = pause_after.find({r.conversation, r.index - 1}); it != pause_after.end()) {
      views.back().pause_before = it->second;
    }
    pause_after[{r.conversation, r.index}] = r.next_pause;
  }
  std::vector<double> session_times;
  TimeNs first_start = driven.makespan_end;
  for (const DriverConversationResult& c : driven.conversations) {
    ++run.result.conversations;
    first_start = std::min(first_start, c.start);
    if (c.subagent >= 0) continue;
    ++run.result.sessions;
    AGENTKV_CHECK(c.end.has_value());
    session_times.push_back((*c.end - c.start).seconds());
  }
  Summarize(*arm_fleet, arm, views, std::move(session_times), driven.makespan_end - first_start,
            run.result);
  // A session is a main agent with its sub-agents.
  SummarizeServerTime(views, SessionOfRequest(driven), static_cast<size_t>(run.result.sessions),
                      run.result);
  if (!workload.groups.empty()) {
    run.result.rollout = SummarizeRollout(*arm_fleet, workload, driven, run.result);
  }
  if (options.keep_events) run.engine_events = TakeEngineEvents(*arm_fleet);
  return run;
}

StatusOr<ArmRun> RunOpenLoopArm(const std::vector<OpenLoopRequest>& requests,
                                int32_t tokens_per_block, const ReplayOptions& options,
                                const ArmSpec& arm, const std::function<void(double)>& progress) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  // The trace readers keep token counts within their bound; callers of this API must too, so
  // that the report's sums over requests cannot overflow.
  for (size_t i = 0; i < requests.size(); ++i) {
    AGENTKV_RETURN_IF_ERROR(
        CheckTokens("requests[" + Str(i) + "].prompt_tokens", requests[i].prompt_tokens));
    AGENTKV_RETURN_IF_ERROR(
        CheckTokens("requests[" + Str(i) + "].output_tokens", requests[i].output_tokens));
  }
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool, KvPoolPerEngine(options, tokens_per_block));
  const int64_t device_blocks = pool.device_blocks;
  int64_t infinite_blocks = 0;
  if (arm.infinite_cache) {
    std::vector<std::vector<uint64_t>> ids;
    std::vector<int64_t> tails;
    for (const OpenLoopRequest& r : requests) {
      if (!FitsOneEngine(
              SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block),
              std::max<int64_t>(1, r.output_tokens), device_blocks, tokens_per_block)) {
        continue;
      }
      ids.push_back(r.hash_ids);
      tails.push_back(r.output_tokens + r.prompt_tokens % tokens_per_block);
    }
    infinite_blocks =
        InfiniteCapacityBlocks(ids, std::vector<uint64_t>(ids.size(), 0), tails, tokens_per_block);
  }
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<ArmFleet> arm_fleet,
                           BuildArmFleet(options, arm, tokens_per_block, infinite_blocks));
  ArmFleet& f = *arm_fleet;
  const kv::BlockKeyHasher& hasher = f.fleet->engine(EngineId(0)).engine().hasher();
  if (arm.oracle) {
    // Every request is its own agent, looked up at its exact arrival (nothing when rejected).
    auto ranking = std::make_unique<FleetNextUse>();
    for (const OpenLoopRequest& r : requests) {
      const bool fits =
          FitsOneEngine(SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block),
                        std::max<int64_t>(1, r.output_tokens), device_blocks, tokens_per_block);
      ranking->AddAgent({fits ? hasher.KeysFromBlockIds(r.hash_ids) : std::vector<kv::BlockKey>{}},
                        {TimeNs(0)}, SaturatingAdd(f.loop.now(), r.arrival));
    }
    AGENTKV_RETURN_IF_ERROR(InstallOracle(f, std::move(ranking)));
  }
  int64_t issued = 0;
  int64_t completed = 0;
  Status failure;
  std::vector<TimeNs> session_end(requests.size());
  f.gateway->set_completion_callback(
      [&](const GatewayRecord& record, const EngineRequestRecord* engine_record) {
        ++completed;
        if (f.oracle != nullptr) {
          f.oracle->Completed(static_cast<int32_t>(record.id.value()), 0, f.loop.now());
        }
        if (engine_record == nullptr && failure.ok()) failure = record.dispatch_error;
        session_end[static_cast<size_t>(record.id.value())] = f.loop.now();
        f.gateway->EndSession(record.session);
      });
  const TimeNs origin = f.loop.now();
  for (size_t i = 0; i < requests.size(); ++i) {
    f.loop.Schedule(SaturatingAdd(origin, requests[i].arrival), [&, i] {
      const OpenLoopRequest& r = requests[i];
      GatewayRequest request;
      request.request.id = RequestId(static_cast<int64_t>(i));
      request.request.prompt_keys = hasher.KeysFromBlockIds(r.hash_ids);
      request.request.prompt_tokens =
          SubmittedPromptTokens(r.prompt_tokens, r.hash_ids.size(), tokens_per_block);
      request.request.max_new_tokens = std::max<int64_t>(1, r.output_tokens);
      request.request.kv_options.prompt_tokens = request.request.prompt_tokens;
      request.request.kv_options.conversation = ConversationId(static_cast<int64_t>(i) + 1);
      request.session = SessionId(static_cast<int64_t>(i) + 1);
      request.routing_key = routing::SessionRoutingKey(request.session);
      if (f.oracle != nullptr) f.oracle->Submitted(static_cast<int32_t>(i), 0, f.loop.now());
      if (Status s = f.gateway->Submit(std::move(request)); !s.ok()) {
        if (failure.ok()) failure = s;
        return;
      }
      ++issued;
    });
  }
  const int64_t total = static_cast<int64_t>(requests.size());
  RunLoop(
      f.loop,
      [&completed, total] {
        return total > 0 ? static_cast<double>(completed) / static_cast<double>(total) : 1.0;
      },
      progress);
  AGENTKV_RETURN_IF_ERROR(failure);
  AGENTKV_RETURN_IF_ERROR(CheckArmEnd(f, issued, completed));

  ArmRun run;
  run.result.requests_issued = issued;
  run.result.requests_completed = completed;
  std::vector<RequestView> views;
  std::vector<double> session_times;
  TimeNs last = origin;
  TimeNs first = requests.empty() ? origin : origin + requests.front().arrival;
  for (size_t i = 0; i < requests.size(); ++i) {
    views.push_back(ViewOf(f, RequestId(static_cast<int64_t>(i))));
    first = std::min(first, origin + requests[i].arrival);
    last = std::max(last, session_end[i]);
    session_times.push_back((session_end[i] - (origin + requests[i].arrival)).seconds());
  }
  run.result.sessions = total;
  run.result.conversations = total;
  Summarize(f, arm, views, std::move(session_times), last - first, run.result);
  // Each request is its own session.
  std::vector<size_t> session_of_request(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) session_of_request[i] = i;
  SummarizeServerTime(views, session_of_request, requests.size(), run.result);
  if (options.keep_events) run.engine_events = TakeEngineEvents(f);
  return run;
}

StatusOr<ReplayResult> RunReplay(const AgenticWorkload& workload, std::string_view description,
                                 uint64_t seed, const ReplayOptions& options,
                                 const ReplayProgress& progress, const ArmTaskRunner& runner) {
  if (workload.conversations.empty()) {
    return InvalidArgumentError("the workload has no conversations");
  }
  ReplaySetup setup =
      SetupFor(options, workload.conversations.front().block_size, description, seed);
  setup.workload_notes = TotalFallbacks(workload.conversations).Describe();
  return RunArms(std::move(setup), options, progress, runner,
                 [&](const ArmSpec& arm, const std::function<void(double)>& arm_progress) {
                   return RunAgenticArm(workload, options, arm, arm_progress);
                 });
}

StatusOr<ReplayResult> RunOpenLoopReplay(const std::vector<OpenLoopRequest>& requests,
                                         int32_t tokens_per_block, std::string_view description,
                                         uint64_t seed, const ReplayOptions& options,
                                         const ReplayProgress& progress,
                                         const ArmTaskRunner& runner) {
  return RunArms(SetupFor(options, tokens_per_block, description, seed), options, progress, runner,
                 [&](const ArmSpec& arm, const std::function<void(double)>& arm_progress) {
                   return RunOpenLoopArm(requests, tokens_per_block, options, arm, arm_progress);
                 });
}

}  // namespace agentkv::sim
