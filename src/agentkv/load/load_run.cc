#include "agentkv/load/load_run.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/replay/arm_summary.h"
#include "agentkv/sim/replay/fleet_arm.h"

namespace agentkv::load {
namespace {

constexpr double kMaxTimeScale = 10'000;
// The longest wait between two looks at the stop flag and the progress line.
constexpr std::chrono::milliseconds kTick{100};

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::vector<std::pair<std::string, int64_t>> Sorted(const std::map<std::string, int64_t>& m) {
  return {m.begin(), m.end()};
}

}  // namespace

Status LoadOptions::Validate() const {
  if (!(time_scale > 0) || time_scale > kMaxTimeScale) {
    return InvalidArgumentError("time_scale must be in (0, " + std::to_string(kMaxTimeScale) +
                                "], got " + std::to_string(time_scale));
  }
  if (label.empty()) return InvalidArgumentError("the label is empty");
  if (Status s = driver.Validate(); !s.ok()) return s;
  return target.Validate();
}

sim::ArmResult SummarizeLoad(const sim::AgentDriverResult& driven,
                             const std::vector<MeasuredRequest>& measured, int32_t tokens_per_block,
                             TimeNs makespan) {
  sim::ArmResult result;
  // Sessions: main agents by workload index; conversations: every agent that began.
  std::map<int32_t, size_t> session_of_workload;
  std::map<int64_t, size_t> session_of_conversation;
  std::vector<double> session_times;
  for (const sim::DriverConversationResult& c : driven.conversations) {
    if (c.requests_issued == 0) continue;
    ++result.conversations;
    if (c.subagent < 0) {
      session_of_workload.emplace(c.workload_index, session_of_workload.size());
      if (c.end.has_value()) session_times.push_back((*c.end - c.start).seconds());
    }
  }
  for (const sim::DriverConversationResult& c : driven.conversations) {
    auto it = session_of_workload.find(c.workload_index);
    if (it != session_of_workload.end()) {
      session_of_conversation.emplace(c.conversation.value(), it->second);
    }
  }
  result.sessions = static_cast<int64_t>(session_of_workload.size());
  // The pause before each request is its agent's previous request's.
  std::map<std::pair<int64_t, int32_t>, PauseKind> pause_after;
  std::vector<sim::RequestView> views;
  std::vector<size_t> session_of_request;
  for (const sim::DriverRequest& r : driven.requests) {
    ++result.requests_issued;
    const size_t slot = static_cast<size_t>(r.id.value());
    std::optional<PauseKind> before;
    if (auto it = pause_after.find({r.conversation.value(), r.index - 1});
        it != pause_after.end()) {
      before = it->second;
    }
    pause_after[{r.conversation.value(), r.index}] = r.next_pause;
    if (slot >= measured.size() || measured[slot].cancelled || !r.completed.has_value()) continue;
    auto session = session_of_conversation.find(r.conversation.value());
    if (session == session_of_conversation.end()) continue;
    ++result.requests_completed;
    views.push_back(
        sim::RequestView{&measured[slot].gateway, &measured[slot].engine, true, before});
    session_of_request.push_back(session->second);
  }
  sim::SummarizeRequestCounts(views, result);
  sim::SummarizeHitRatios(tokens_per_block, result);
  sim::SummarizeThroughput(makespan, result);
  sim::SummarizeLatency(views, std::move(session_times), result);
  sim::SummarizeServerTime(views, session_of_request, static_cast<size_t>(result.sessions), result);
  return result;
}

namespace {

// The run's result: the summary of what completed, and the measured block.
sim::ReplayResult ResultOf(const LoadOptions& options, const sim::AgentDriverResult& driven,
                           const LiveTarget& live, double wall_s, double cpu_s, bool stopped) {
  TimeNs first_start = driven.makespan_end;
  for (const sim::DriverConversationResult& c : driven.conversations) {
    if (c.requests_issued > 0) first_start = std::min(first_start, c.start);
  }
  sim::ReplayResult result;
  result.setup.workload = options.description;
  result.setup.seed = options.seed;
  result.setup.router = options.target.url;
  result.setup.tokens_per_block = options.target.tokens_per_block;
  sim::ArmResult arm = SummarizeLoad(driven, live.measured(), options.target.tokens_per_block,
                                     driven.makespan_end - first_start);
  arm.arm = options.label;
  arm.description =
      "measured: " + options.target.url + " (" + std::string(LoadApiName(options.target.api)) + ")";
  sim::MeasuredRun m;
  m.target = options.target.url + " " + std::string(LoadApiName(options.target.api));
  m.time_scale = options.time_scale;
  m.wall_s = wall_s;
  m.client_cpu_s = cpu_s;
  std::vector<double> inter_token;
  for (const MeasuredRequest& r : live.measured()) {
    if (r.cancelled) ++m.requests_cancelled;
    if (r.failed) ++m.requests_failed;
    if (r.inter_token_s.has_value()) inter_token.push_back(*r.inter_token_s);
  }
  m.inter_token = sim::SummarizeDurations(inter_token);
  const LiveCounters counters = live.counters();
  m.attempts = counters.attempts;
  m.retries = counters.retries;
  m.errors = Sorted(counters.errors);
  m.sessions_closed = counters.sessions_closed;
  m.close_errors = Sorted(counters.close_errors);
  m.stopped = stopped;
  arm.measured = std::move(m);
  result.arms.push_back(std::move(arm));
  return result;
}

}  // namespace

StatusOr<sim::ReplayResult> RunLoad(const sim::AgenticWorkload& workload,
                                    const LoadOptions& options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  sim::EventLoop loop;
  const WallClock::time_point origin = WallClock::now();
  const double scale = options.time_scale;
  const auto to_loop = [origin, scale](WallClock::time_point t) {
    const double wall_ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin).count());
    return TimeNs(static_cast<int64_t>(std::max(0.0, wall_ns) * scale));
  };
  const auto to_wall = [origin, scale](TimeNs t) {
    return origin +
           std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(t.ns()) / scale));
  };
  StatusOr<std::unique_ptr<LiveTarget>> target = LiveTarget::Create(options.target, to_loop);
  if (!target.ok()) return target.status();
  LiveTarget& live = **target;
  StatusOr<std::unique_ptr<sim::AgentDriver>> driver =
      sim::AgentDriver::Create(&loop, &live, &workload, options.driver);
  if (!driver.ok()) return driver.status();
  const double cpu_before = ProcessCpuSeconds();
  if (Status s = (*driver)->Start(); !s.ok()) return s;

  int64_t total = 0;
  for (const sim::WekaConversation& c : workload.conversations) total += c.TotalRequests();
  const auto progress = [&](WallClock::time_point now) {
    if (!options.progress) return;
    LoadProgress p;
    p.wall_s = std::chrono::duration<double>(now - origin).count();
    p.loop_s = loop.now().seconds();
    p.issued = (*driver)->result().requests_issued;
    p.completed = (*driver)->result().requests_completed;
    p.in_flight = live.in_flight();
    p.total = total;
    for (const auto& [kind, count] : live.counters().errors) p.errors += count;
    options.progress(p);
  };
  bool stopped = false;
  WallClock::time_point next_progress = origin + std::chrono::seconds(1);
  while (true) {
    const WallClock::time_point now = WallClock::now();
    if (!stopped && options.stop != nullptr && options.stop->load()) {
      stopped = true;
      live.Stop();
    }
    if (!stopped) loop.RunUntil(std::max(loop.now(), to_loop(now)));
    live.DeliverCompletions();
    const bool finished = stopped ? live.in_flight() == 0 : (*driver)->done();
    if (finished && live.closes_pending() == 0) break;
    if (now >= next_progress) {
      progress(now);
      next_progress = now + std::chrono::seconds(1);
    }
    WallClock::time_point wake = now + kTick;
    if (!stopped && loop.pending() > 0) wake = std::min(wake, to_wall(loop.next_time()));
    if (wake > WallClock::now()) live.WaitForOutcome(wake);
  }
  const WallClock::time_point end = WallClock::now();
  progress(end);

  return ResultOf(options, (*driver)->result(), live,
                  std::chrono::duration<double>(end - origin).count(),
                  ProcessCpuSeconds() - cpu_before, stopped);
}

}  // namespace agentkv::load
