#include "agentkv/sim/replay/request_tally.h"

#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::sim {
namespace {

bool Refused(const RequestView& r) { return r.gateway->refused || r.engine->report.rejected; }

// Adds `tokens` of evicted recompute to the counter of `pause_before` (unset: an agent's first
// request).
void AddEvictedRecompute(std::optional<PauseKind> pause_before, int64_t tokens, ArmResult& result) {
  switch (pause_before.value_or(PauseKind::kUnknown)) {
    case PauseKind::kUnknown:
    case PauseKind::kSessionEnd:  // Nothing follows an end: only a first request.
      result.evicted_recompute_first += tokens;
      break;
    case PauseKind::kToolCall:
      result.evicted_recompute_after_tool_call += tokens;
      break;
    case PauseKind::kSubagentWait:
      result.evicted_recompute_after_subagent_wait += tokens;
      break;
    case PauseKind::kHumanTurn:
      result.evicted_recompute_after_human_turn += tokens;
      break;
  }
}

}  // namespace

RequestTally::RequestTally(ArmResult* result) : result_(result) {
  AGENTKV_CHECK(result != nullptr);
}

void RequestTally::Add(const RequestView& r, size_t session) {
  AGENTKV_CHECK(!finished_) << "a request added after Finish";
  AGENTKV_CHECK(r.gateway != nullptr && r.engine != nullptr && r.engine->finished.has_value());
  ++requests_;
  const GatewayRecord& g = *r.gateway;
  const EngineRequestRecord& e = *r.engine;
  const engine::RequestReport& report = e.report;
  ArmResult& result = *result_;

  if (g.dispatched.has_value()) admission_wait_.push_back((*g.dispatched - g.received).seconds());
  const TimeNs server = *e.finished - g.received;
  AGENTKV_CHECK(server >= TimeNs(0)) << "request " << g.id << " finished before it arrived";
  if (session >= session_server_.size()) session_server_.resize(session + 1);
  session_server_[session] = SaturatingAdd(session_server_[session], server);
  request_server_.push_back(server.seconds());

  if (Refused(r)) {
    // Refused work is one metric, whoever refused it; it looked nothing up.
    AGENTKV_CHECK(report.cached_device_tokens == 0 && report.cached_host_tokens == 0 &&
                  report.uncached_tokens == 0 && e.cold_tokens == 0 &&
                  e.evicted_recompute_tokens == 0)
        << "refused request " << g.id << " has prefix cache counts";
    ++result.requests_refused;
    result.refused_prompt_tokens += g.prompt_tokens;
    return;
  }
  result.prompt_tokens += g.prompt_tokens;
  result.prompt_blocks += g.prompt_blocks;
  result.cached_device_tokens += report.cached_device_tokens;
  result.cached_host_tokens += report.cached_host_tokens;
  result.uncached_tokens += report.uncached_tokens;
  result.cold_tokens += e.cold_tokens;
  result.evicted_recompute_tokens += e.evicted_recompute_tokens;
  if (r.agentic) AddEvictedRecompute(r.pause_before, e.evicted_recompute_tokens, result);
  result.preempted_recompute_tokens += report.recomputed_tokens;
  result.output_tokens += report.output_tokens;
  result.preemptions += report.preemptions;
  if (e.first_scheduled.has_value()) {
    queueing_.push_back((*e.first_scheduled - g.received).seconds());
  }
  if (e.first_token.has_value()) ttft_.push_back((*e.first_token - g.received).seconds());
}

void RequestTally::Finish(size_t num_sessions, std::vector<double> session_times) {
  AGENTKV_CHECK(!finished_) << "Finish called twice";
  AGENTKV_CHECK_LE(session_server_.size(), num_sessions) << "a request of an unknown session";
  finished_ = true;
  ArmResult& result = *result_;
  result.session_time = SummarizeDurations(session_times);
  result.session_times_s = std::move(session_times);
  result.queueing_delay = SummarizeDurations(queueing_);
  result.ttft = SummarizeDurations(ttft_);
  result.admission_wait = SummarizeDurations(admission_wait_);
  std::vector<double> server_time;
  server_time.reserve(num_sessions);
  for (size_t s = 0; s < num_sessions; ++s) {
    server_time.push_back(s < session_server_.size() ? session_server_[s].seconds() : 0.0);
  }
  result.server_time = SummarizeDurations(server_time);
  result.request_server_time = SummarizeDurations(request_server_);
}

}  // namespace agentkv::sim
