#include "agentkv/load/load_run.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/load/ramp.h"
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
  if (ramp.has_value()) AGENTKV_RETURN_IF_ERROR(ramp->Validate());
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
  // Wall seconds from the start of the run to each completion.
  std::vector<double> finished_wall_s;
  for (const MeasuredRequest& r : live.measured()) {
    if (r.cancelled) ++m.requests_cancelled;
    if (r.failed) ++m.requests_failed;
    if (r.inter_token_s.has_value()) inter_token.push_back(*r.inter_token_s);
    if (!r.cancelled && r.engine.finished.has_value()) {
      finished_wall_s.push_back(r.engine.finished->seconds() / options.time_scale);
    }
  }
  if (!finished_wall_s.empty()) {
    const size_t count = (finished_wall_s.size() * 9 + 9) / 10;  // ceil(0.9 n), at least 1.
    std::nth_element(finished_wall_s.begin(),
                     finished_wall_s.begin() + static_cast<std::ptrdiff_t>(count - 1),
                     finished_wall_s.end());
    const double t90 = finished_wall_s[count - 1];
    if (t90 > 0) m.first_90_percent_requests_per_s = static_cast<double>(count) / t90;
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

namespace {

// Loop time from the wall clock: time_scale loop nanoseconds per wall nanosecond since origin.
struct LoadClock {
  WallClock::time_point origin;
  double scale = 1;

  TimeNs ToLoop(WallClock::time_point t) const {
    const double wall_ns = static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin).count());
    return TimeNs(static_cast<int64_t>(std::max(0.0, wall_ns) * scale));
  }
  WallClock::time_point ToWall(TimeNs t) const {
    return origin +
           std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(t.ns()) / scale));
  }
};

// What one run drives: the loop, the driver on it, the live target and the ramp when there is
// one.
struct Run {
  const LoadOptions& options;
  LoadClock clock;
  sim::EventLoop& loop;
  sim::AgentDriver& driver;
  LiveTarget& live;
  RampMonitor* ramp;
  // Requests of the workload, for the progress line.
  int64_t total = 0;
};

void ReportProgress(const Run& run, WallClock::time_point now) {
  if (!run.options.progress) return;
  LoadProgress p;
  p.wall_s = std::chrono::duration<double>(now - run.clock.origin).count();
  p.loop_s = run.loop.now().seconds();
  p.issued = run.driver.result().requests_issued;
  p.completed = run.driver.result().requests_completed;
  p.in_flight = run.live.in_flight();
  p.total = run.total;
  for (const auto& [kind, count] : run.live.counters().errors) p.errors += count;
  run.options.progress(p);
}

// Runs the loop on the wall clock until every agent ended (or, stopped by the flag or the
// ramp, until nothing is in flight) and every close was answered. Returns whether it stopped.
bool RunOnWallClock(Run& run) {
  bool stopped = false;
  WallClock::time_point next_progress = run.clock.origin + std::chrono::seconds(1);
  while (true) {
    const WallClock::time_point now = WallClock::now();
    const bool stop_asked = run.options.stop != nullptr && run.options.stop->load();
    if (!stopped && stop_asked) {
      stopped = true;
      run.live.Stop();
    }
    if (!stopped) run.loop.RunUntil(std::max(run.loop.now(), run.clock.ToLoop(now)));
    run.live.DeliverCompletions();
    if (!stopped && run.ramp != nullptr && run.ramp->Advance(run.loop.now(), run.live.measured())) {
      stopped = true;
      run.live.Stop();
    }
    const bool finished = stopped ? run.live.in_flight() == 0 : run.driver.done();
    if (finished && run.live.closes_pending() == 0) break;
    if (now >= next_progress) {
      ReportProgress(run, now);
      next_progress = now + std::chrono::seconds(1);
    }
    WallClock::time_point wake = now + kTick;
    if (!stopped && run.loop.pending() > 0) {
      wake = std::min(wake, run.clock.ToWall(run.loop.next_time()));
    }
    if (wake > WallClock::now()) run.live.WaitForOutcome(wake);
  }
  ReportProgress(run, WallClock::now());
  return stopped;
}

}  // namespace

StatusOr<sim::ReplayResult> RunLoad(const sim::AgenticWorkload& workload,
                                    const LoadOptions& options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  // A ramp starts the users itself.
  std::optional<sim::AgenticWorkload> ramped;
  std::optional<RampMonitor> ramp;
  if (options.ramp.has_value()) {
    if (workload.gated()) {
      return InvalidArgumentError(
          "a ramp starts the users itself; this workload gates its starts (rollout steps)");
    }
    ramped = workload;
    const auto conversations = static_cast<int64_t>(workload.conversations.size());
    ramped->starts = RampStarts(conversations, *options.ramp);
    ramp.emplace(*options.ramp, conversations);
  }
  const sim::AgenticWorkload& driven = ramped.has_value() ? *ramped : workload;
  sim::EventLoop loop;
  const LoadClock clock{WallClock::now(), options.time_scale};
  StatusOr<std::unique_ptr<LiveTarget>> target = LiveTarget::Create(
      options.target, [clock](WallClock::time_point t) { return clock.ToLoop(t); });
  if (!target.ok()) return target.status();
  StatusOr<std::unique_ptr<sim::AgentDriver>> driver =
      sim::AgentDriver::Create(&loop, target->get(), &driven, options.driver);
  if (!driver.ok()) return driver.status();
  const double cpu_before = ProcessCpuSeconds();
  if (Status s = (*driver)->Start(); !s.ok()) return s;
  Run run{options, clock, loop, **driver, **target, ramp.has_value() ? &*ramp : nullptr};
  for (const sim::WekaConversation& c : driven.conversations) run.total += c.TotalRequests();
  const bool stopped = RunOnWallClock(run);
  const double wall_s = std::chrono::duration<double>(WallClock::now() - clock.origin).count();
  sim::ReplayResult result = ResultOf(options, (*driver)->result(), **target, wall_s,
                                      ProcessCpuSeconds() - cpu_before, stopped);
  if (ramp.has_value()) {
    ramp->Finish(loop.now(), (*target)->measured());
    result.arms.front().measured->ramp = ramp->result();
  }
  return result;
}

}  // namespace agentkv::load
