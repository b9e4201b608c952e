// RunLoad: `agentkv load`'s run. The simulator's AgentDriver replays an agentic workload (the
// same readers, seeds, session starts, sub-agent spawns and joins as `agentkv replay`) on an
// EventLoop kept on real time, into a LiveTarget (live_target.h) that sends every request to a
// live endpoint; the measured requests are summarized by the replay's own summary functions
// into one ArmResult, so the JSON and HTML are the replay's and `agentkv compare` reads both.
//
// Time. Loop time runs `time_scale` times faster than the wall clock: every recorded gap, start
// and spawn delay takes 1/time_scale of its time, and every measured duration is reported
// multiplied by time_scale. Against an emulated fleet started with the same --time-scale (its
// engines then run the cost model that much faster), a compressed run reports the times the
// cost model gives at scale 1; against a real engine keep 1.
//
// What differs from a replay arm, by construction: the engine's split of uncached tokens into
// cold and evicted recompute, preemptions and queueing delay are not on the wire (cold tokens
// are every uncached token, the others 0 or empty); cached tokens are the server's count.
//
// Stopping. When *stop becomes true (Ctrl-C), or a ramp's step exceeds its TTFT SLO, the run
// stops sending, cancels what is in flight, closes the sessions it opened and summarizes what
// completed (MeasuredRun::stopped; MeasuredRun::ramp says what the ramp found).
#ifndef AGENTKV_LOAD_LOAD_RUN_H_
#define AGENTKV_LOAD_LOAD_RUN_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/load/live_target.h"
#include "agentkv/load/ramp.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/replay/replay_result.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::load {

// How far a run is, for a progress line.
struct LoadProgress {
  double wall_s = 0;
  // Loop time reached, seconds.
  double loop_s = 0;
  int64_t issued = 0;
  int64_t completed = 0;
  int64_t in_flight = 0;
  // Requests of the workload (sub-agents included), and failed attempts so far.
  int64_t total = 0;
  int64_t errors = 0;
};

struct LoadOptions {
  LiveTargetOptions target;
  sim::AgentDriverOptions driver;
  // Loop seconds per wall second. Range: (0, 10000].
  double time_scale = 1;
  // The arm's name in the result ("measured"; name it as the replay arm it measures, e.g.
  // "baseline", for `agentkv compare` to pair them).
  std::string label = "measured";
  // The setup's workload line and seed.
  std::string description;
  uint64_t seed = 1;
  // A ramp (ramp.h) instead of the workload's own session starts; unset: the workload's.
  std::optional<RampOptions> ramp;
  // Set (from any thread, a signal handler) to stop the run; may be null.
  const std::atomic<bool>* stop = nullptr;
  // Called about once a second, and once at the end; may be empty.
  std::function<void(const LoadProgress&)> progress;

  Status Validate() const;
};

// Runs `workload` against options.target.url and returns the result with one arm. The status
// of bad options or a workload the driver refuses (block size, ids); a server that cannot be
// reached is not an error: its requests fail and are counted.
StatusOr<sim::ReplayResult> RunLoad(const sim::AgenticWorkload& workload,
                                    const LoadOptions& options);

// RunLoad for an open-loop trace (Mooncake): request i is sent at its recorded time as its own
// session, whatever the endpoint did with the earlier ones (sim/fleet/open_loop_driver.h), its
// blocks in one namespace. options.driver and a ramp do not apply (a ramp is InvalidArgument).
StatusOr<sim::ReplayResult> RunOpenLoopLoad(const std::vector<sim::OpenLoopRequest>& requests,
                                            const LoadOptions& options);

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_LOAD_RUN_H_
