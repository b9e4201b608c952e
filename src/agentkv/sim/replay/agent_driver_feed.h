// The closed-loop feed of a fleet arm (fleet_arm.h): an AgentDriver replays an agentic
// workload (agentic_workload.h) into the arm's gateway model, each agent's next request
// submitted after its previous one completes and its recorded gap elapses. Internal to the
// replay runner; RunAgenticArm (replay.h) is its public door.
//
// Over a streamed source (conversation_source.h) the feed holds no conversation: what it computes
// over all of them (validation, the infinite-cache size, the oracle's future) loads one at a time.
//
// Thread-compatible; the workload (or source) and the options must outlive the feed.
#ifndef AGENTKV_SIM_REPLAY_AGENT_DRIVER_FEED_H_
#define AGENTKV_SIM_REPLAY_AGENT_DRIVER_FEED_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/replay/fleet_arm.h"
#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/conversation_source.h"

namespace agentkv::sim {

class AgentDriverFeed final : public GatewayFeed {
 public:
  AgentDriverFeed(const AgenticWorkload& workload, const ReplayOptions& options);
  AgentDriverFeed(const ConversationSource& source, const ReplayOptions& options);
  AgentDriverFeed(const AgentDriverFeed&) = delete;
  AgentDriverFeed& operator=(const AgentDriverFeed&) = delete;
  ~AgentDriverFeed() override;

  // InvalidArgument for a workload without conversations or with a request's token count out
  // of bound (naming the request).
  Status Validate() const override;
  // The first conversation's block size (the driver checks that every conversation has it;
  // read once, at construction).
  int32_t tokens_per_block() const override;
  // Over every replayed agent's requests, in conversation namespaces k + 1.
  int64_t InfiniteCapacityBlocks(int64_t device_blocks) const override;
  // Every replayed agent's requests with the keys the driver submits, their recorded offsets
  // (recorded server time plus gap) and the estimated time of their first request.
  std::unique_ptr<FleetNextUse> Future(const kv::BlockKeyHasher& hasher, int64_t device_blocks,
                                       TimeNs origin) override;
  // Creates and starts the driver (reporting to arm_fleet.oracle when set; no request log: each
  // request goes to `tally` as it completes, its session the conversation's workload index).
  // InvalidArgument when the driver refuses the workload (AgentDriver::Create).
  Status Attach(ArmFleet& arm_fleet, RequestTally& tally) override;
  double CompletedFraction() const override;
  // The driver's first Submit error; Internal when the loop went idle before every agent
  // ended.
  StatusOr<FedCounts> Ended() const override;
  // A session is a main agent with its sub-agents.
  FedSessions Sessions() const override;
  // The rollout block, for a workload with groups.
  void SummarizeWorkload(const ArmFleet& arm_fleet, ArmResult& result) const override;

 private:
  class OracleProgress;

  // Set when the feed was made over a workload: the source over it.
  std::unique_ptr<const ConversationSource> owned_source_;
  const ConversationSource& source_;
  // source_.in_memory(), or null.
  const AgenticWorkload* workload_;
  const ReplayOptions& options_;
  int32_t tokens_per_block_ = 0;
  // Set by Future: the ranking's agent of (workload index, sub-agent + 1), -1 when not replayed.
  std::vector<std::vector<int32_t>> agent_of_;
  // Declared before the driver, which reports to it.
  std::unique_ptr<OracleProgress> oracle_progress_;
  std::unique_ptr<AgentDriver> driver_;
  int64_t total_requests_ = 0;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_AGENT_DRIVER_FEED_H_
