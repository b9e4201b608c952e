// Invariants: an arm's fleet, gateway model and oracle are built fresh by RunFleetArm and die
// with it; the feed submits through the gateway model only. At the end of a successful arm
// every issued request completed exactly once, the gateway model is drained, and every
// engine's scheduler and cache pass CheckInvariants with nothing running or pinned
// (CheckArmEnd: gate (c) of the replay's tests).
#include "agentkv/sim/replay/fleet_arm.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/sim/replay/arm_summary.h"

namespace agentkv::sim {
namespace {

// Events between two progress reports.
constexpr int64_t kProgressEvents = 1 << 14;

template <typename T>
std::string Str(T value) {
  return std::to_string(value);
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

// The gateway model's options of `arm`.
GatewayModelOptions ArmGatewayOptions(const ReplayOptions& options, const ArmSpec& arm) {
  GatewayModelOptions gateway_options;
  gateway_options.keep_finished_records = false;  // As the engines' (BuildArmFleet).
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
  return gateway_options;
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
  // The feed folds each request as it completes (RequestTally): memory follows the live ones.
  engine_options.keep_finished_records = false;
  // The working set's pins follow Continuum's lifecycle: released when their program returns,
  // and under memory pressure.
  engine_options.config.continuum_pins = arm.continuum || arm.working_set;
  auto arm_fleet = std::make_unique<ArmFleet>();
  AGENTKV_ASSIGN_OR_RETURN(arm_fleet->fleet, FleetModel::Create(&arm_fleet->loop, fleet_options));
  AGENTKV_ASSIGN_OR_RETURN(arm_fleet->gateway,
                           GatewayModel::Create(&arm_fleet->loop, arm_fleet->fleet.get(),
                                                ArmGatewayOptions(options, arm)));
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

std::vector<std::vector<kv::KvEvent>> TakeEngineEvents(const ArmFleet& arm_fleet) {
  std::vector<std::vector<kv::KvEvent>> events;
  for (int32_t e = 0; e < arm_fleet.fleet->num_engines(); ++e) {
    events.push_back(arm_fleet.fleet->engine(EngineId(e)).events());
  }
  return events;
}

}  // namespace

StatusOr<ArmRun> RunFleetArm(GatewayFeed& feed, const ReplayOptions& options, const ArmSpec& arm,
                             const std::function<void(double)>& progress) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_RETURN_IF_ERROR(feed.Validate());
  const int32_t tokens_per_block = feed.tokens_per_block();
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool, KvPoolPerEngine(options, tokens_per_block));
  const int64_t infinite_blocks =
      arm.infinite_cache ? feed.InfiniteCapacityBlocks(pool.device_blocks) : 0;
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<ArmFleet> arm_fleet,
                           BuildArmFleet(options, arm, tokens_per_block, infinite_blocks));
  ArmFleet& f = *arm_fleet;
  if (arm.oracle) {
    const kv::BlockKeyHasher& hasher = f.fleet->engine(EngineId(0)).engine().hasher();
    AGENTKV_RETURN_IF_ERROR(
        InstallOracle(f, feed.Future(hasher, pool.device_blocks, f.loop.now())));
  }
  ArmRun run;
  RequestTally tally(&run.result);
  AGENTKV_RETURN_IF_ERROR(feed.Attach(f, tally));
  RunLoop(
      f.loop, [&feed] { return feed.CompletedFraction(); }, progress);
  AGENTKV_ASSIGN_OR_RETURN(const FedCounts counts, feed.Ended());
  AGENTKV_RETURN_IF_ERROR(CheckArmEnd(f, counts.issued, counts.completed));
  if (tally.requests() != counts.completed) {
    return InternalError(Str(counts.completed) + " requests completed but " +
                         Str(tally.requests()) + " were summarized");
  }

  run.result.requests_issued = counts.issued;
  run.result.requests_completed = counts.completed;
  SummarizeArm(f, arm, feed.Sessions(), tally, run.result);
  feed.SummarizeWorkload(f, run.result);
  if (options.keep_events) run.engine_events = TakeEngineEvents(f);
  return run;
}

bool FitsOneEngine(int64_t prompt_tokens, int64_t output_tokens, int64_t device_blocks,
                   int32_t tokens_per_block) {
  const int64_t tokens = SaturatingAdd(prompt_tokens, output_tokens);
  const int64_t blocks = SaturatingAdd(tokens, tokens_per_block - 1) / tokens_per_block;
  return blocks <= device_blocks;
}

InfiniteCapacityCount::InfiniteCapacityCount(int32_t tokens_per_block)
    : hasher_(0), tokens_per_block_(tokens_per_block) {}

void InfiniteCapacityCount::Add(std::span<const uint64_t> ids, uint64_t namespace_id,
                                int64_t tail_tokens) {
  for (const kv::BlockKey key : hasher_.KeysFromBlockIds(ids, namespace_id)) {
    unique_.insert(key);
  }
  tails_ = SaturatingAdd(tails_, tail_tokens / tokens_per_block_ + 2);
}

int64_t InfiniteCapacityCount::Blocks() const {
  return std::min(engine::kMaxKvPoolBlocks, static_cast<int64_t>(unique_.size()) + tails_);
}

int64_t InfiniteCapacityBlocks(const std::vector<std::vector<uint64_t>>& namespaced_ids,
                               const std::vector<uint64_t>& namespaces,
                               const std::vector<int64_t>& tail_tokens, int32_t tokens_per_block) {
  InfiniteCapacityCount count(tokens_per_block);
  for (size_t i = 0; i < namespaced_ids.size(); ++i) {
    count.Add(namespaced_ids[i], namespaces[i], tail_tokens[i]);
  }
  return count.Blocks();
}

}  // namespace agentkv::sim
