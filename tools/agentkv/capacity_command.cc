#include "tools/agentkv/capacity_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "agentkv/report/capacity_report.h"
#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "tools/agentkv/arm_threads.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/progress_line.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Sessions served at SLO: for each policy arm, the highest session arrival rate (sessions "
    "per hour per engine) at which TTFT p95 stays within its SLO, found by bisection over "
    "replays";

// The arms run when --arms is not given.
const std::vector<std::string>& DefaultCapacityArms() {
  static const std::vector<std::string> arms = {"baseline", "agentkv", "+host-tier",
                                                "agentkv+host-tier", "infinite-cache"};
  return arms;
}

// The largest SessionInterarrivalS a probe may ask of a workload generator (its
// --session-interarrival-s bound).
constexpr double kMaxInterarrivalS = 1e6;

constexpr const char* kFooter = R"(Method:
  Load is sessions per hour per engine. A probe at rate r is one `agentkv replay` arm of the
  workload with sessions starting 3600 / (r x --num-engines) seconds apart on average (its
  --session-interarrival-s), everything else as the replay flags say; the SLO metric is
  measured over the whole replay. Per arm and seed the search probes --start-rate (default:
  the rate of --session-interarrival-s, i.e. the workload's default load), doubles the rate
  while the SLO is met (up to --max-rate) or halves it while it is missed (down to
  --min-rate), then bisects the bracket until (lowest miss - highest meet) <= --tolerance x
  highest meet. The capacity is the highest rate found to meet the SLO: ">= max" when it is
  met at --max-rate, 0 when it is missed even at --min-rate. Latency need not grow with load
  (a finite workload saturates, denser starts share more prefix): the search reports the
  bracket it found and every probe, all consistent with it, and does not look for rates that
  meet the SLO above the lowest miss.

  A workload is a fixed number of sessions (--sessions, or the trace's files): at a high rate
  they all start at once and the load stops growing, so a capacity at --max-rate says the
  workload, not the fleet, ran out. The same seed gives the same sessions at every rate (only
  their start times scale), so the curve is not noise from one probe to the next.

Workloads: synthetic and weka (their sessions start --session-interarrival-s apart). rollout,
bailian and mooncake are refused: their starts come from steps or recorded times.

Arms (--arms, as `agentkv replay --help` lists them; default: baseline, agentkv, +host-tier,
agentkv+host-tier, infinite-cache; infinite-cache is the bound).

Seeds: --seeds 1,2,3 runs every search once per seed (the synthetic generator's and the WEKA
start times' seed); each arm reports its median capacity [min, max] over seeds, and its ratio
to the baseline arm's of the same seed, median [min, max]. Default: --seed.

Output:
  stdout   the arm table: capacity median [min, max], vs baseline, the SLO metric at the
           capacity, probes run
  --json   every probe (rate, interarrival, TTFT p50/p95/p99, server time mean, met) and the
           result per arm and seed, with the options and seeds (default agentkv-capacity.json;
           "" to skip)
  --html   a self-contained page with the capacity curve: the SLO metric against load per
           arm, log axes, the SLO as a line (default agentkv-capacity.html; "" to skip)
  stderr   progress as `agentkv replay` shows it, one search per line (--quiet: none)

Exit codes: 0 success; 2 bad flags, workload or trace (one `agentkv capacity: error:` line on
stderr); 1 internal error.)";

std::string_view UnsupportedWhy(std::string_view workload) {
  if (workload == "rollout") return "its steps start trajectories";
  if (workload == "bailian") return "its conversations start at their recorded times";
  if (workload == "mooncake") return "it is open loop, every request at its recorded time";
  return "";
}

sim::CapacityMetrics MetricsOf(const sim::ArmResult& arm) {
  return sim::CapacityMetrics{.ttft_p50_s = arm.ttft.p50_s,
                              .ttft_p95_s = arm.ttft.p95_s,
                              .ttft_p99_s = arm.ttft.p99_s,
                              .server_time_mean_s = arm.server_time.mean_s};
}

// Searches every (arm, seed) of `result` on `jobs` threads, with a progress line: each
// search's outcome, arm-major.
std::vector<std::optional<StatusOr<sim::CapacitySearchResult>>> RunSearches(
    const ReplayPlan& plan, const sim::CapacityResult& result, int64_t jobs) {
  // One task per (arm, seed), in arm-major order; each writes only its own slot.
  const size_t num_seeds = result.seeds.size();
  const size_t num_tasks = result.arms.size() * num_seeds;
  std::vector<std::optional<StatusOr<sim::CapacitySearchResult>>> searches(num_tasks);
  ProgressLine progress_line(ProgressLine::ModeForStderr(!plan.quiet), CapacityCommand::kName,
                             "search");
  std::mutex progress_mutex;
  std::vector<std::function<void()>> tasks;
  for (size_t task = 0; task < num_tasks; ++task) {
    tasks.emplace_back([&, task] {
      const sim::ArmSpec& arm = plan.options.arms[task / num_seeds];
      const uint64_t seed = result.seeds[task % num_seeds];
      int64_t probe_number = 0;
      const sim::CapacityProbeFn probe = [&](double rate) -> StatusOr<sim::CapacityMetrics> {
        ++probe_number;
        const std::string name =
            fmt::format("{} seed {} probe {} at {:.3g}/h", arm.name, seed, probe_number, rate);
        StatusOr<sim::AgenticWorkload> workload = plan.workload_at_interarrival(
            *plan.agentic, report::SessionInterarrivalS(rate, plan.options.num_engines), seed);
        if (!workload.ok()) return workload.status();
        StatusOr<sim::ArmRun> run =
            sim::RunAgenticArm(*workload, plan.options, arm, [&](double fraction) {
              const std::lock_guard<std::mutex> lock(progress_mutex);
              progress_line.Update(task, num_tasks, name, std::min(fraction, 0.999));
            });
        if (!run.ok()) return run.status();
        return MetricsOf(run->result);
      };
      searches[task] = sim::SearchCapacity(result.options, probe);
      const std::lock_guard<std::mutex> lock(progress_mutex);
      progress_line.Update(task, num_tasks, fmt::format("{} seed {}", arm.name, seed), 1.0);
    });
  }
  RunOnThreads(tasks, ArmJobs(jobs, num_tasks));
  progress_line.Clear();
  return searches;
}

}  // namespace

CapacityCommand::CapacityCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  flags_.Add(*command_);
  const std::string group = "Capacity search";
  command_
      ->add_option("--slo-metric", slo_metric_,
                   "The metric the SLO bounds: ttft-p95, ttft-p99 (per request) or "
                   "server-time-mean (per session)")
      ->check(CLI::IsMember({"ttft-p95", "ttft-p99", "server-time-mean"}))
      ->capture_default_str()
      ->group(group);
  command_->add_option("--slo-s", slo_s_, "The SLO, seconds, in (0, 1e6]")
      ->capture_default_str()
      ->group(group);
  command_
      ->add_option("--start-rate", start_rate_,
                   "First rate probed, sessions/h/engine; 0 = the rate of "
                   "--session-interarrival-s (the workload's default load)")
      ->capture_default_str()
      ->group(group);
  command_->add_option("--min-rate", min_rate_, "Lowest rate probed, sessions/h/engine, > 0")
      ->capture_default_str()
      ->group(group);
  command_
      ->add_option("--max-rate", max_rate_,
                   "Highest rate probed, sessions/h/engine, in [--min-rate, 1e9]")
      ->capture_default_str()
      ->group(group);
  command_
      ->add_option("--tolerance", tolerance_,
                   "Bisection stops once the bracket is within this fraction of the capacity, "
                   "in [0.001, 1]")
      ->capture_default_str()
      ->group(group);
  command_
      ->add_option("--seeds", seeds_,
                   "Seeds, each a full search per arm (default: --seed); instead of --seed")
      ->delimiter(',')
      ->type_name("LIST")
      ->group(group);
}

Status CapacityCommand::CheckSearchFlags() const {
  const std::string workload = command_->get_option("--workload")->as<std::string>();
  if (const std::string_view why = UnsupportedWhy(workload); !why.empty()) {
    return InvalidArgumentError(
        fmt::format("--workload {} has no session arrival rate ({}); capacity supports --workload "
                    "synthetic and weka, whose sessions start --session-interarrival-s apart",
                    workload, why));
  }
  if (!seeds_.empty() && command_->get_option("--seed")->count() > 0) {
    return InvalidArgumentError("--seed and --seeds: give one (--seeds 1,2,3 or --seed 1)");
  }
  for (size_t i = 0; i < seeds_.size(); ++i) {
    if (std::find(seeds_.begin(), seeds_.begin() + static_cast<std::ptrdiff_t>(i), seeds_[i]) !=
        seeds_.begin() + static_cast<std::ptrdiff_t>(i)) {
      return InvalidArgumentError(fmt::format("--seeds lists {} twice", seeds_[i]));
    }
  }
  Status s = CheckFlagRange("--slo-s", slo_s_, 0.0, 1e6, LowerBound::kOpen);
  if (s.ok()) s = CheckFlagRange("--min-rate", min_rate_, 0.0, 1e9, LowerBound::kOpen);
  if (s.ok() && !(max_rate_ >= min_rate_ && max_rate_ <= 1e9)) {
    s = InvalidArgumentError(fmt::format("--max-rate must be in [--min-rate {}, {}], got {}",
                                         min_rate_, 1e9, max_rate_));
  }
  if (s.ok() && start_rate_ != 0) {
    s = CheckFlagRange("--start-rate", start_rate_, 0.0, 1e9, LowerBound::kOpen);
  }
  if (s.ok()) s = CheckFlagRange("--tolerance", tolerance_, 0.001, 1.0);
  if (s.ok()) s = NameFlag("--slo-metric", sim::ParseSloMetric(slo_metric_)).status();
  return s;
}

StatusOr<sim::CapacityResult> CapacityCommand::PlanSearch(const ReplayPlan& plan) const {
  sim::CapacityResult result;
  result.num_engines = plan.options.num_engines;
  result.sessions = static_cast<int64_t>(plan.agentic->conversations.size());
  result.workload = fmt::format("{}: {} sessions", plan.workload, result.sessions);
  result.options.metric = sim::ParseSloMetric(slo_metric_).value();
  result.options.slo_s = slo_s_;
  result.options.start_rate =
      start_rate_ != 0
          ? start_rate_
          : 3600.0 / (plan.session_interarrival_s * static_cast<double>(plan.options.num_engines));
  result.options.min_rate = min_rate_;
  result.options.max_rate = max_rate_;
  result.options.tolerance = tolerance_;
  AGENTKV_RETURN_IF_ERROR(result.options.Validate());
  result.seeds = seeds_.empty() ? std::vector<uint64_t>{plan.seed} : seeds_;
  for (const sim::ArmSpec& arm : plan.options.arms) result.arms.push_back(arm.name);
  return result;
}

int CapacityCommand::Run() const {
  const auto start = std::chrono::steady_clock::now();
  if (Status s = CheckSearchFlags(); !s.ok()) return ReportError(kName, s);
  StatusOr<ReplayPlan> plan = flags_.Plan();
  if (!plan.ok()) return ReportError(kName, plan.status());
  if (!plan->agentic.has_value() || !plan->workload_at_interarrival) {
    return ReportError(kName, "internal: the workload has no session arrival rate", kExitInternal);
  }
  const int32_t engines = plan->options.num_engines;
  if (min_rate_ * engines < 3600.0 / kMaxInterarrivalS) {
    return ReportError(
        kName, InvalidArgumentError(fmt::format(
                   "--min-rate {} on {} engines would start sessions {:g} s apart, more than "
                   "the {:g} s --session-interarrival-s allows",
                   min_rate_, engines, report::SessionInterarrivalS(min_rate_, engines),
                   kMaxInterarrivalS)));
  }
  if (command_->get_option("--arms")->count() == 0) {
    StatusOr<std::vector<sim::ArmSpec>> arms = sim::ParseArms(DefaultCapacityArms());
    if (!arms.ok()) return ReportError(kName, arms.status());
    plan->options.arms = *std::move(arms);
  }
  if (Status s = plan->options.Validate(); !s.ok()) return ReportError(kName, s);

  StatusOr<sim::CapacityResult> planned = PlanSearch(*plan);
  if (!planned.ok()) return ReportError(kName, planned.status());
  sim::CapacityResult result = *std::move(planned);

  const size_t num_seeds = result.seeds.size();
  const size_t num_tasks = result.arms.size() * num_seeds;
  std::vector<std::optional<StatusOr<sim::CapacitySearchResult>>> searches =
      RunSearches(*plan, result, flags_.jobs());
  int64_t probes = 0;
  result.searches.assign(result.arms.size(), {});
  for (size_t task = 0; task < num_tasks; ++task) {
    StatusOr<sim::CapacitySearchResult>& search = *searches[task];
    if (!search.ok()) {
      return ReportError(
          kName, Status(search.status().code(),
                        fmt::format("arm {} seed {}: {}", result.arms[task / num_seeds],
                                    result.seeds[task % num_seeds], search.status().message())));
    }
    probes += static_cast<int64_t>(search->probes.size());
    result.searches[task / num_seeds].push_back(*std::move(search));
  }
  fmt::print("{}", report::FormatCapacityTable(result));
  std::fflush(stdout);
  for (const auto& [path, render] : {std::pair{plan->json_path, &report::CapacityResultJson},
                                     std::pair{plan->html_path, &report::CapacityResultHtml}}) {
    if (path.empty()) continue;
    if (Status s = WriteFileAtomically(path, render(result)); !s.ok()) {
      return ReportError(kName, s);
    }
    if (!plan->quiet) fmt::print(stderr, "agentkv {}: wrote {}\n", kName, path);
  }
  if (!plan->quiet) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "agentkv {}: {} searches, {} probes in {:.1f} s\n", kName, num_tasks, probes,
               seconds);
  }
  return kExitOk;
}

}  // namespace agentkv::tools
