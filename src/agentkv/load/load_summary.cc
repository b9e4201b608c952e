#include "agentkv/load/load_summary.h"

#include <algorithm>
#include <map>
#include <utility>

#include "agentkv/sim/replay/arm_summary.h"
#include "agentkv/sim/replay/request_tally.h"

namespace agentkv::load {
namespace {

bool Counted(const std::vector<MeasuredRequest>& measured, size_t slot) {
  return slot < measured.size() && !measured[slot].cancelled &&
         measured[slot].engine.finished.has_value();
}

}  // namespace

LoadTraffic AgenticTraffic(const sim::AgentDriverResult& driven,
                           const std::vector<MeasuredRequest>& measured) {
  LoadTraffic traffic;
  // Sessions: main agents by workload index; conversations: every agent that sent a request.
  std::map<int32_t, size_t> session_of_workload;
  TimeNs first_start = driven.makespan_end;
  for (const sim::DriverConversationResult& c : driven.conversations) {
    if (c.requests_issued == 0) continue;
    ++traffic.conversations;
    first_start = std::min(first_start, c.start);
    if (c.subagent >= 0) continue;
    session_of_workload.emplace(c.workload_index, session_of_workload.size());
    if (c.end.has_value()) traffic.session_times.push_back((*c.end - c.start).seconds());
  }
  std::map<int64_t, size_t> session_of_conversation;
  for (const sim::DriverConversationResult& c : driven.conversations) {
    auto it = session_of_workload.find(c.workload_index);
    if (it != session_of_workload.end()) {
      session_of_conversation.emplace(c.conversation.value(), it->second);
    }
  }
  traffic.sessions = static_cast<int64_t>(session_of_workload.size());
  traffic.makespan = driven.makespan_end - first_start;
  // The pause before each request is its agent's previous request's.
  std::map<std::pair<int64_t, int32_t>, PauseKind> pause_after;
  for (const sim::DriverRequest& r : driven.requests) {
    ++traffic.issued;
    std::optional<PauseKind> before;
    if (auto it = pause_after.find({r.conversation.value(), r.index - 1});
        it != pause_after.end()) {
      before = it->second;
    }
    pause_after[{r.conversation.value(), r.index}] = r.next_pause;
    const auto slot = static_cast<size_t>(r.id.value());
    auto session = session_of_conversation.find(r.conversation.value());
    if (!r.completed.has_value() || !Counted(measured, slot) ||
        session == session_of_conversation.end()) {
      continue;
    }
    traffic.slots.push_back(slot);
    traffic.session_of_request.push_back(session->second);
    traffic.pause_before.push_back(before);
  }
  return traffic;
}

LoadTraffic OpenLoopTraffic(const sim::OpenLoopDriver& driver,
                            const std::vector<sim::OpenLoopRequest>& requests,
                            const std::vector<MeasuredRequest>& measured) {
  LoadTraffic traffic;
  traffic.agentic = false;
  traffic.issued = driver.issued();
  TimeNs first;
  TimeNs last;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!Counted(measured, i)) continue;
    const TimeNs arrival = driver.origin() + requests[i].arrival;
    const TimeNs end = driver.session_end()[i];
    if (traffic.slots.empty() || arrival < first) first = arrival;
    last = std::max(last, end);
    // Each request is its own session, from its arrival to its completion.
    traffic.session_of_request.push_back(traffic.slots.size());
    traffic.slots.push_back(i);
    traffic.pause_before.emplace_back();
    traffic.session_times.push_back((end - arrival).seconds());
  }
  traffic.sessions = static_cast<int64_t>(traffic.slots.size());
  traffic.conversations = traffic.sessions;
  traffic.makespan = traffic.slots.empty() ? TimeNs() : last - first;
  return traffic;
}

sim::ArmResult SummarizeLoad(const LoadTraffic& traffic,
                             const std::vector<MeasuredRequest>& measured,
                             int32_t tokens_per_block) {
  sim::ArmResult result;
  result.sessions = traffic.sessions;
  result.conversations = traffic.conversations;
  result.requests_issued = traffic.issued;
  result.requests_completed = static_cast<int64_t>(traffic.slots.size());
  sim::RequestTally tally(&result);
  for (size_t i = 0; i < traffic.slots.size(); ++i) {
    const MeasuredRequest& m = measured[traffic.slots[i]];
    tally.Add(sim::RequestView{&m.gateway, &m.engine, traffic.agentic, traffic.pause_before[i]},
              traffic.session_of_request[i]);
  }
  sim::SummarizeHitRatios(tokens_per_block, result);
  sim::SummarizeThroughput(traffic.makespan, result);
  tally.Finish(static_cast<size_t>(traffic.sessions), traffic.session_times);
  return result;
}

}  // namespace agentkv::load
