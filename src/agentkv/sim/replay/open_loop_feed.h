// The open-loop feed of a fleet arm (fleet_arm.h): request i of a trace (open_loop_trace.h)
// arrives at its recorded time as its own session and conversation (ids i + 1), whatever the
// fleet did with the earlier ones, and its session ends with its completion. Internal to the
// replay runner; RunOpenLoopArm (replay.h) is its public door.
//
// Thread-compatible; the requests must outlive the feed.
#ifndef AGENTKV_SIM_REPLAY_OPEN_LOOP_FEED_H_
#define AGENTKV_SIM_REPLAY_OPEN_LOOP_FEED_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "agentkv/sim/fleet/open_loop_driver.h"
#include "agentkv/sim/replay/fleet_arm.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::sim {

class OpenLoopFeed final : public GatewayFeed {
 public:
  // `tokens_per_block` is the trace's block size.
  OpenLoopFeed(const std::vector<OpenLoopRequest>& requests, int32_t tokens_per_block);
  OpenLoopFeed(const OpenLoopFeed&) = delete;
  OpenLoopFeed& operator=(const OpenLoopFeed&) = delete;

  // InvalidArgument for a request's token count out of bound (naming the request).
  Status Validate() const override;
  int32_t tokens_per_block() const override { return tokens_per_block_; }
  // Over every request, all in namespace 0.
  int64_t InfiniteCapacityBlocks(int64_t device_blocks) const override;
  // Every request is its own agent, looked up at its exact arrival.
  std::unique_ptr<FleetNextUse> Future(const kv::BlockKeyHasher& hasher, int64_t device_blocks,
                                       TimeNs origin) override;
  // Starts an OpenLoopDriver on the arm's loop and gateway model (every arrival relative to the
  // loop's now; each session ends with its request), reporting to the oracle; request i goes
  // to `tally` as session i when it completes. Never fails.
  Status Attach(ArmFleet& arm_fleet, RequestTally& tally) override;
  double CompletedFraction() const override;
  // The first Submit error, or a dispatch error of a completed request.
  StatusOr<FedCounts> Ended() const override;
  // Each request is its own session, from its arrival to its completion.
  FedSessions Sessions() const override;

 private:
  const std::vector<OpenLoopRequest>& requests_;
  int32_t tokens_per_block_;
  // Set by Attach.
  std::unique_ptr<OpenLoopDriver> driver_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_OPEN_LOOP_FEED_H_
