// An open-loop trace: requests that arrive at recorded times whatever the serving side does,
// each its own one-request session (a Mooncake line). One of the two workload shapes every
// replay reads, beside the closed-loop AgenticWorkload (agentic_workload.h): the simulated
// fleet submits each request at its arrival (replay.h, RunOpenLoopReplay), the instant single
// cache runs them in the order given (instant_sources.h, OpenLoopInOrder). Plain values;
// thread-compatible.
#ifndef AGENTKV_SIM_WORKLOAD_OPEN_LOOP_TRACE_H_
#define AGENTKV_SIM_WORKLOAD_OPEN_LOOP_TRACE_H_

#include <cstdint>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/sim/workload/mooncake_trace.h"

namespace agentkv::sim {

// One open-loop request (a Mooncake line): arrives at `arrival` whatever the fleet does.
struct OpenLoopRequest {
  TimeNs arrival;
  // Prompt block ids (one per full block), chained under one namespace.
  std::vector<uint64_t> hash_ids;
  // Each in [0, kMaxTokens] (base/bounds.h); else the replay is InvalidArgument.
  int64_t prompt_tokens = 1;
  int64_t output_tokens = 1;

  friend bool operator==(const OpenLoopRequest&, const OpenLoopRequest&) = default;
};

// The requests of a Mooncake trace in file order: arrival = timestamp, hash_ids as read,
// prompt_tokens = input_length, output_tokens = output_length.
std::vector<OpenLoopRequest> OpenLoopFromMooncake(const std::vector<MooncakeRequest>& trace);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_OPEN_LOOP_TRACE_H_
