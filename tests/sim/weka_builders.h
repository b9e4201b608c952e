// Builders of WEKA trace values for the simulator's tests: a sub-agent spawned at a time and a
// conversation (main-agent requests plus sub-agents). Requests are built by each test, whose
// token shapes differ.
#ifndef AGENTKV_TESTS_SIM_WEKA_BUILDERS_H_
#define AGENTKV_TESTS_SIM_WEKA_BUILDERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim::testing_support {

// A completed sub-agent spawned at `spawn_s` on the parent's timeline: as WEKA writes it, its
// entry's completion is the spawn plus its duration, the end of its last request (its `t` plus
// its api_time; 0 without requests).
inline WekaSubagent Subagent(std::string id, double spawn_s, std::vector<WekaRequest> requests) {
  WekaSubagent s;
  s.agent_id = std::move(id);
  s.duration = requests.empty() ? TimeNs() : requests.back().t + requests.back().api_time;
  s.completion = TimeNs(static_cast<int64_t>(spawn_s * 1e9)) + s.duration;
  s.status = SubagentStatus::kCompleted;
  s.requests = std::move(requests);
  return s;
}

inline WekaConversation Conversation(std::string source, std::vector<WekaRequest> requests,
                                     std::vector<WekaSubagent> subagents = {}) {
  WekaConversation c;
  c.source = std::move(source);
  c.requests = std::move(requests);
  c.subagents = std::move(subagents);
  return c;
}

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_WEKA_BUILDERS_H_
