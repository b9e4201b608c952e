// RequestTally: the per-request families of an arm's summary (arm_summary.h) folded one
// finished request at a time, so that a replay keeps nothing of a request once it completed
// but the few durations its percentiles need.
//
// A feed adds each request as it completes (its gateway and engine records are alive then and
// forgotten after, GatewayModelOptions::keep_finished_records); the counts go straight into the
// arm's result, the durations into per-family samples that Finish summarizes. Every family is
// independent of the order requests are added in: counts and per-session server time are
// integer sums, and SummarizeDurations sorts before it sums. Deterministic; thread-compatible.
#ifndef AGENTKV_SIM_REPLAY_REQUEST_TALLY_H_
#define AGENTKV_SIM_REPLAY_REQUEST_TALLY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/gateway_model.h"
#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::sim {

// One finished request as the tally reads it: both records outlive the call to Add only.
struct RequestView {
  const GatewayRecord* gateway = nullptr;
  const EngineRequestRecord* engine = nullptr;
  // Closed-loop agentic workloads: the pause before the request (the agent's previous
  // request's next_pause), unset for an agent's first request. Open-loop traces: neither.
  bool agentic = false;
  std::optional<PauseKind> pause_before;
};

class RequestTally {
 public:
  // The counts are added to `result`'s prefix cache, recompute, output and refusal fields;
  // `result` must outlive the tally.
  explicit RequestTally(ArmResult* result);
  RequestTally(const RequestTally&) = delete;
  RequestTally& operator=(const RequestTally&) = delete;

  // Folds finished request `r` of session `session` (for a sub-agent's request, its main
  // agent's): refused work apart (conservation), the prefix cache counts, evicted recompute by
  // the pause before the request, preempted recompute, output tokens and preemptions; its
  // queueing delay, TTFT and admission wait; its server time (finished - gateway arrival), in
  // exact nanoseconds into its session's sum. Aborts when a refused request has prefix cache
  // counts or a request finished before it arrived (bugs). Precondition: before Finish.
  void Add(const RequestView& r, size_t session);

  // Requests added so far.
  int64_t requests() const { return requests_; }

  // Writes the latency family (`session_times`: per session, start to last completion, in
  // seconds, any order) and the server times of `num_sessions` sessions (one with nothing
  // added counts 0). Precondition: every session added is below `num_sessions`; once.
  void Finish(size_t num_sessions, std::vector<double> session_times);

 private:
  ArmResult* result_;
  bool finished_ = false;
  int64_t requests_ = 0;
  std::vector<double> queueing_;
  std::vector<double> ttft_;
  std::vector<double> admission_wait_;
  std::vector<double> request_server_;
  // Indexed by session, grown as sessions are added.
  std::vector<TimeNs> session_server_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_REQUEST_TALLY_H_
