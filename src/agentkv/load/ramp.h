// The ramp of `agentkv load --ramp` (kv-cache-tester's method, trace_replay_tester.py): users
// (conversations of the workload, in its order) are added step by step, and after each step
// the TTFT p95 of the requests whose first token came during it is held against the SLO; the
// run stops at the first step past it and reports the users the fleet held.
//
// Users: `start_users` begin at once, then `step_users` more at the start of every period (in
// loop time: `--time-scale` compresses it with everything else). A user whose conversation
// ends is not replaced, so a workload with fewer conversations than the ramp reaches ends the
// ramp first (RampResult::slo_exceeded stays false). Pure: a function of the starts and the
// measured requests. Thread-compatible.
#ifndef AGENTKV_LOAD_RAMP_H_
#define AGENTKV_LOAD_RAMP_H_

#include <cstdint>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/load/live_target.h"
#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::load {

struct RampOptions {
  // Range: [1, 1000] each.
  int64_t start_users = 1;
  int64_t step_users = 1;
  // Range: [1 ms, 1 day].
  TimeNs period = TimeNs::Seconds(60);
  // The TTFT p95 a step must stay within. Range: (0, 1 day].
  TimeNs ttft_slo = TimeNs::Seconds(2);

  Status Validate() const;
};

// Conversation k's start: 0 for k < start_users, else ((k - start_users) / step_users + 1) *
// period.
std::vector<TimeNs> RampStarts(int64_t conversations, const RampOptions& options);

class RampMonitor {
 public:
  // Precondition: options.Validate() is OK, conversations >= 0.
  RampMonitor(const RampOptions& options, int64_t conversations);

  // Judges every step that ended by loop time `now` from `measured`: true once a step's TTFT
  // p95 exceeded the SLO (the run should stop), and stays true.
  bool Advance(TimeNs now, const std::vector<MeasuredRequest>& measured);
  // Judges the step in progress at the end of the run, if it has requests (the workload ran
  // out of users before the SLO did).
  void Finish(TimeNs now, const std::vector<MeasuredRequest>& measured);

  const sim::RampResult& result() const { return result_; }

 private:
  // Users started during step `step` (0-based).
  int64_t UsersAt(int64_t step) const;
  // Judges step `step`, whose window is [begin, end).
  void Judge(int64_t step, TimeNs begin, TimeNs end, const std::vector<MeasuredRequest>& measured);

  RampOptions options_;
  int64_t conversations_;
  int64_t steps_judged_ = 0;
  sim::RampResult result_;
};

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_RAMP_H_
