// The summary of a finished `agentkv load` run: which measured requests count, to which session
// each belongs, and the replay's own summary (sim/replay/request_tally.h, arm_summary.h) over
// them, so that a measured arm and a simulated one are computed alike. Two drivers send
// requests: the agent driver (agentic workloads) and the open-loop driver (traces replayed by
// timestamp); each has its traffic builder. Pure functions; thread-compatible.
#ifndef AGENTKV_LOAD_LOAD_SUMMARY_H_
#define AGENTKV_LOAD_LOAD_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/time.h"
#include "agentkv/load/live_target.h"
#include "agentkv/sim/fleet/agent_driver.h"
#include "agentkv/sim/fleet/open_loop_driver.h"
#include "agentkv/sim/replay/replay_result.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::load {

// What the summary reads of a finished run, whichever driver sent its requests.
struct LoadTraffic {
  // Per request that completed and was measured (not cancelled), in submission order: its
  // slot in LiveTarget::measured(), its session in [0, sessions), and the pause before it (an
  // agentic workload's; unset for an agent's first request and for open-loop requests).
  std::vector<size_t> slots;
  std::vector<size_t> session_of_request;
  std::vector<std::optional<PauseKind>> pause_before;
  bool agentic = true;
  // Requests submitted; sessions (main agents, or open-loop requests, that sent one) and
  // conversations (every agent that did); the time of every session that ended, seconds; from
  // the first start to the last completion.
  int64_t issued = 0;
  int64_t sessions = 0;
  int64_t conversations = 0;
  std::vector<double> session_times;
  TimeNs makespan;
};

LoadTraffic AgenticTraffic(const sim::AgentDriverResult& driven,
                           const std::vector<MeasuredRequest>& measured);
// Request i of `requests` is measured()[i] (the driver's first_request_id is 0).
LoadTraffic OpenLoopTraffic(const sim::OpenLoopDriver& driver,
                            const std::vector<sim::OpenLoopRequest>& requests,
                            const std::vector<MeasuredRequest>& measured);

// The replay's summary over `traffic`: conservation, prefix cache, throughput, latency and
// server time (the engine and gateway counters stay 0: they are not on the wire).
sim::ArmResult SummarizeLoad(const LoadTraffic& traffic,
                             const std::vector<MeasuredRequest>& measured,
                             int32_t tokens_per_block);

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_LOAD_SUMMARY_H_
