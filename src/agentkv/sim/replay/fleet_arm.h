// The fleet arm runner: one arm of a replay (replay.h) on a fresh simulated fleet, whatever feeds
// its requests. Internal to the replay runner; RunAgenticArm and RunOpenLoopArm are its public
// doors.
//
// Every arm runs the same steps: check the workload, size the engines (an infinite-cache arm
// large enough to hold the whole workload), build the fleet and the gateway model in front of
// it, install the oracle's ranking (oracle arms), attach the workload's source, run the event
// loop until idle, check conservation and the engines' invariants, and summarize
// (arm_summary.h). The one thing that differs between workloads is the GatewayFeed: what submits
// requests into the gateway model (the closed-loop agent driver, agent_driver_feed.h, or the
// open-loop request feed, open_loop_feed.h) and what it knows of the requests it submitted.
//
// Deterministic and single-threaded: the whole arm runs on the caller's thread. A feed and its
// arm are used by one thread; distinct arms share nothing mutable.
#ifndef AGENTKV_SIM_REPLAY_FLEET_ARM_H_
#define AGENTKV_SIM_REPLAY_FLEET_ARM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/block_key_set.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/fleet_next_use.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/replay/request_tally.h"

namespace agentkv::sim {

// Everything one arm runs on, built fresh per arm. Owns the loop, the fleet and the gateway
// model; not copyable.
struct ArmFleet {
  // The oracle arm's ranking, set on every engine's cache (declared first: it outlives them).
  std::unique_ptr<FleetNextUse> oracle;
  EventLoop loop;
  std::unique_ptr<FleetModel> fleet;
  std::unique_ptr<GatewayModel> gateway;
};

// How many requests a feed submitted to the gateway model and how many completed.
struct FedCounts {
  int64_t issued = 0;
  int64_t completed = 0;
};

// What the summary reads of a finished feed's sessions (arm_summary.h); its requests were
// folded into the arm's RequestTally as they completed.
struct FedSessions {
  // Sessions (main agents; an open-loop request is its own) and conversations (agents, main
  // and sub-agents alike).
  int64_t sessions = 0;
  int64_t conversations = 0;
  // Per session, from its start to its last completion, in seconds.
  std::vector<double> session_times;
  // From the first start to the last completion.
  TimeNs makespan;
};

// What feeds requests into one arm's gateway model. RunFleetArm calls, in this order:
// Validate, tokens_per_block, InfiniteCapacityBlocks (infinite-cache arms), Future (oracle
// arms), Attach, CompletedFraction (while the loop runs), Ended, Sessions, SummarizeWorkload.
// One feed serves one arm once. Thread-compatible.
class GatewayFeed {
 public:
  virtual ~GatewayFeed() = default;

  // InvalidArgument when the workload cannot be replayed (empty, or a token count out of
  // bound, so that the report's sums over requests cannot overflow).
  virtual Status Validate() const = 0;
  // The workload's block size in tokens. Precondition: Validate() is OK.
  virtual int32_t tokens_per_block() const = 0;
  // Device blocks that hold every distinct prompt block of the requests the feed submits that
  // fit one engine of `device_blocks` (FitsOneEngine), plus the uncommitted blocks of each at
  // once (InfiniteCapacityBlocks): an engine that large never evicts.
  virtual int64_t InfiniteCapacityBlocks(int64_t device_blocks) const = 0;
  // The future of the workload as the feed will submit it from `origin` (fleet_next_use.h),
  // unsealed, with the keys `hasher` chains (none for a request that does not fit an engine of
  // `device_blocks`). The runner installs it as ArmFleet::oracle before Attach.
  virtual std::unique_ptr<FleetNextUse> Future(const kv::BlockKeyHasher& hasher,
                                               int64_t device_blocks, TimeNs origin) = 0;
  // Schedules the workload's requests on `arm_fleet`'s loop into its gateway model (reporting
  // submissions and completions to arm_fleet.oracle when set), and adds each request that
  // completes with an engine record to `tally` from its completion callback (the arm's
  // gateway model and engines forget a request's records once the callback returned),
  // with its session's index in [0, Sessions().sessions). `arm_fleet` and `tally` outlive
  // every later call. InvalidArgument when the feed refuses the workload on this fleet.
  virtual Status Attach(ArmFleet& arm_fleet, RequestTally& tally) = 0;
  // The fraction of the workload's requests completed so far, in [0, 1].
  virtual double CompletedFraction() const = 0;
  // After the loop went idle: the counts, or the first submission error, or Internal when
  // the feed did not finish its workload.
  virtual StatusOr<FedCounts> Ended() const = 0;
  // After a successful Ended and the arm's end checks: what the summary reads of the sessions.
  virtual FedSessions Sessions() const = 0;
  // Adds the workload's own metrics to `result` (after the common summary). Default: none.
  virtual void SummarizeWorkload(const ArmFleet& /*arm_fleet*/, ArmResult& /*result*/) const {}
};

// Runs `arm` with requests from `feed` (see the top of this file). InvalidArgument for bad
// options or a workload the feed refuses; Internal when a conservation check fails (a bug).
// `progress`, when set, gets the completed fraction now and then and 1 at the end.
StatusOr<ArmRun> RunFleetArm(GatewayFeed& feed, const ReplayOptions& options, const ArmSpec& arm,
                             const std::function<void(double)>& progress);

// --- Sizing helpers the feeds share ---

// Whether a request the feeds submit with `prompt_tokens` and `output_tokens` (each at least
// 1) fits one engine's `device_blocks` at once, as StepScheduler::Submit requires. One that
// does not is rejected by every engine of the configured fleet (counted in requests_refused,
// as SGLang answers it 400), and the infinite-cache arm is sized without it, so that no arm
// allocates a cache for an absurd request.
bool FitsOneEngine(int64_t prompt_tokens, int64_t output_tokens, int64_t device_blocks,
                   int32_t tokens_per_block);

// SubmittedPromptTokens (the prompt length the feeds submit) is the drivers': agent_driver.h.

// Device blocks that hold every distinct block of the requests added, each in its namespace,
// plus its tail tokens' worth of uncommitted blocks (output and partial tail) of every request at
// once, capped at engine::kMaxKvPoolBlocks. Requests are added one at a time, so that a streamed
// workload is counted without holding it; memory follows the distinct blocks.
class InfiniteCapacityCount {
 public:
  explicit InfiniteCapacityCount(int32_t tokens_per_block);
  void Add(std::span<const uint64_t> ids, uint64_t namespace_id, int64_t tail_tokens);
  int64_t Blocks() const;

 private:
  const kv::BlockKeyHasher hasher_;
  int32_t tokens_per_block_;
  kv::BlockKeySet unique_;  // about 16 bytes a distinct key
  int64_t tails_ = 0;
};

// Device blocks that hold every distinct block of `namespaced_ids[i]` (in namespace
// `namespaces[i]`) plus `tail_tokens[i]` worth of uncommitted blocks (output and partial tail)
// of every request at once, capped at engine::kMaxKvPoolBlocks. All three of one size.
int64_t InfiniteCapacityBlocks(const std::vector<std::vector<uint64_t>>& namespaced_ids,
                               const std::vector<uint64_t>& namespaces,
                               const std::vector<int64_t>& tail_tokens, int32_t tokens_per_block);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_FLEET_ARM_H_
