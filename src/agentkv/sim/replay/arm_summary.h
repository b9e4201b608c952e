// The summary of one fleet arm (fleet_arm.h): what its requests, engines and gateway model did,
// folded into an ArmResult (replay_result.h) one metric family at a time. Internal to the
// replay runner.
//
// Pure functions of the finished arm: they read the fleet, the gateway model and the feed's
// traffic, and write the result only. Deterministic: requests are read in submission order.
#ifndef AGENTKV_SIM_REPLAY_ARM_SUMMARY_H_
#define AGENTKV_SIM_REPLAY_ARM_SUMMARY_H_

#include <cstddef>
#include <vector>

#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/replay/fleet_arm.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "agentkv/sim/replay/replay_result.h"
#include "agentkv/sim/replay/request_tally.h"
#include "agentkv/sim/workload/agentic_workload.h"

namespace agentkv::sim {

// Fills every family of `result` but the rollout block from the finished arm: its name and
// description, sessions and conversations, the hit ratios of the counts `tally` added,
// throughput, latency and server time (tally.Finish over `sessions`), and the engines' and the
// gateway model's counters.
// Precondition: result.requests_issued and result.requests_completed are set; every request
// the feed submitted was added to `tally` (RunFleetArm checked the arm's end).
void SummarizeArm(const ArmFleet& arm_fleet, const ArmSpec& arm, FedSessions sessions,
                  RequestTally& tally, ArmResult& result);

// --- The families, in the order SummarizeArm fills them (the per-request ones, the prefix
// cache counts, latency and server time, are RequestTally's: request_tally.h) ---

// The cached blocks and the hit ratios of the counts RequestTally::Add added, with
// `tokens_per_block`-token blocks.
void SummarizeHitRatios(int64_t tokens_per_block, ArmResult& result);

// The makespan and the rates over it (none when it is 0). Reads requests_completed and
// output_tokens.
void SummarizeThroughput(TimeNs makespan, ArmResult& result);

// The engines' counters summed over the fleet: cache moves, demotions, TTL pins and stall
// offload.
void SummarizeEngines(const FleetModel& fleet, ArmResult& result);

// The gateway model's counters: pins declined by cost, the working set's, session closes,
// the agentic_kv series (arms with lifecycle or admission) and the KV usage samples.
void SummarizeGateway(GatewayModel& gateway, const ArmSpec& arm, ArmResult& result);

// The rollout block of `result` (RolloutMetrics) for a workload with groups: steps are the
// groups, trajectories the main agents. Call after SummarizeArm (it reads the output tokens,
// the makespan and the gauge samples there). Precondition: workload.groups is not empty.
RolloutMetrics SummarizeRollout(const ArmFleet& arm_fleet, const AgenticWorkload& workload,
                                const AgentDriverResult& driven, const ArmResult& result);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_ARM_SUMMARY_H_
