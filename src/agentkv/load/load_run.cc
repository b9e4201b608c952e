#include "agentkv/load/load_run.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/load/load_summary.h"
#include "agentkv/load/ramp.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/open_loop_driver.h"

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

// What sends the requests (the agent driver or the open-loop driver), as the loop sees it.
struct Feed {
  std::function<bool()> done;
  std::function<int64_t()> issued;
  std::function<int64_t()> completed;
  // Requests of the workload, for the progress line.
  int64_t total = 0;
};

// What one run drives: the loop, the feed on it, the live target and the ramp when there is
// one.
struct Run {
  const LoadOptions& options;
  LoadClock clock;
  sim::EventLoop& loop;
  Feed feed;
  LiveTarget& live;
  RampMonitor* ramp = nullptr;
};

void ReportProgress(const Run& run, WallClock::time_point now) {
  if (!run.options.progress) return;
  LoadProgress p;
  p.wall_s = std::chrono::duration<double>(now - run.clock.origin).count();
  p.loop_s = run.loop.now().seconds();
  p.issued = run.feed.issued();
  p.completed = run.feed.completed();
  p.in_flight = run.live.in_flight();
  p.total = run.feed.total;
  for (const auto& [kind, count] : run.live.counters().errors) p.errors += count;
  run.options.progress(p);
}

// Runs the loop on the wall clock until the feed is done (or, stopped by the flag or the
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
    const bool finished = stopped ? run.live.in_flight() == 0 : run.feed.done();
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

// The client's side of a finished run: its time scale, wall and CPU time, rates, inter-token
// latency, attempts, errors and closes.
sim::MeasuredRun MeasuredRunOf(const LoadOptions& options, const LiveTarget& live, double wall_s,
                               double cpu_s, bool stopped) {
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
  return m;
}

// Runs `feed` (started on `loop` into `live`) to its end and returns the result with one arm,
// summarized from the traffic `traffic_of` builds once it ended.
sim::ReplayResult Drive(const LoadOptions& options, const LoadClock& clock, sim::EventLoop& loop,
                        Feed feed, LiveTarget& live, RampMonitor* ramp, double cpu_before,
                        const std::function<LoadTraffic()>& traffic_of) {
  Run run{options, clock, loop, std::move(feed), live, ramp};
  const bool stopped = RunOnWallClock(run);
  const double wall_s = std::chrono::duration<double>(WallClock::now() - clock.origin).count();
  sim::ReplayResult result;
  result.setup.workload = options.description;
  result.setup.seed = options.seed;
  result.setup.router = options.target.url;
  result.setup.tokens_per_block = options.target.tokens_per_block;
  sim::ArmResult arm =
      SummarizeLoad(traffic_of(), live.measured(), options.target.tokens_per_block);
  arm.arm = options.label;
  arm.description =
      "measured: " + options.target.url + " (" + std::string(LoadApiName(options.target.api)) + ")";
  arm.measured = MeasuredRunOf(options, live, wall_s, ProcessCpuSeconds() - cpu_before, stopped);
  if (ramp != nullptr) {
    ramp->Finish(loop.now(), live.measured());
    arm.measured->ramp = ramp->result();
  }
  result.arms.push_back(std::move(arm));
  return result;
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
  sim::AgentDriver& agents = **driver;
  Feed feed{[&agents] { return agents.done(); },
            [&agents] { return agents.result().requests_issued; },
            [&agents] { return agents.result().requests_completed; }};
  for (const sim::WekaConversation& c : driven.conversations) feed.total += c.TotalRequests();
  LiveTarget& live = **target;
  return Drive(options, clock, loop, std::move(feed), live, ramp.has_value() ? &*ramp : nullptr,
               cpu_before, [&] { return AgenticTraffic(agents.result(), live.measured()); });
}

StatusOr<sim::ReplayResult> RunOpenLoopLoad(const std::vector<sim::OpenLoopRequest>& requests,
                                            const LoadOptions& options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  if (options.ramp.has_value()) {
    return InvalidArgumentError(
        "a ramp starts users (conversations); an open-loop trace has none, its requests arrive "
        "at their recorded times");
  }
  sim::EventLoop loop;
  const LoadClock clock{WallClock::now(), options.time_scale};
  StatusOr<std::unique_ptr<LiveTarget>> target = LiveTarget::Create(
      options.target, [clock](WallClock::time_point t) { return clock.ToLoop(t); });
  if (!target.ok()) return target.status();
  LiveTarget& live = **target;
  sim::OpenLoopDriver driver(&loop, &live, &requests, options.target.tokens_per_block);
  const double cpu_before = ProcessCpuSeconds();
  driver.Start();
  Feed feed{[&driver] { return driver.done(); }, [&driver] { return driver.issued(); },
            [&driver] { return driver.completed(); }, static_cast<int64_t>(requests.size())};
  return Drive(options, clock, loop, std::move(feed), live, nullptr, cpu_before,
               [&] { return OpenLoopTraffic(driver, requests, live.measured()); });
}

}  // namespace agentkv::load
