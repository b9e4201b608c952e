// The small synthetic agentic workload the replay tests share: 6 sessions of about 10 turns at
// a tenth of the real context sizes, with sub-agents, started a second apart.
#ifndef AGENTKV_TESTS_SIM_SMALL_WORKLOAD_H_
#define AGENTKV_TESTS_SIM_SMALL_WORKLOAD_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/synthetic_agentic.h"

namespace agentkv::sim::testing_support {

inline AgenticWorkload SmallWorkload(uint64_t seed) {
  SyntheticAgenticOptions options;
  options.seed = seed;
  options.sessions = 6;
  options.turns = LogNormal{10.0, 0.3};
  options.max_turns = 16;
  options.context_scale = 0.1;
  // At most 100 blocks (6,400 tokens) per prompt after scaling, so every prompt fits an engine.
  options.max_context_blocks = 1000;
  options.mean_session_interarrival = TimeNs::Seconds(1);
  options.subagent_spawn_probability = 0.3;
  options.subagent_requests = LogNormal{3.0, 0.2};
  options.max_subagent_requests = 4;
  options.subagent_duration_s = LogNormal{20.0, 0.3};
  options.subagent_new_input_tokens = LogNormal{2000.0, 0.5};
  options.human_gap_s = LogNormal{30.0, 0.5};
  options.tool_gap_s = LogNormal{0.5, 0.5};
  StatusOr<AgenticWorkload> workload = GenerateSyntheticAgentic(options);
  EXPECT_TRUE(workload.ok()) << workload.status();
  return *std::move(workload);
}

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_SMALL_WORKLOAD_H_
