// `agentkv capacity`: sessions served at SLO. For a workload and a set of policy arms it finds,
// per arm and seed, the highest session arrival rate (sessions per hour per engine) at which a
// latency metric (TTFT p95 by default) stays within its SLO, by bracketing and bisection
// (sim::SearchCapacity); every probe is one replay arm (sim::RunAgenticArm) of the workload
// with its sessions starting 3600 / (rate x engines) seconds apart.
//
// It takes every flag of `agentkv replay` (ReplayFlags: the same workload, fleet, arms and
// seed, checked the same way) plus the search's own, runs the (arm, seed) searches on --jobs
// threads, prints the arm table on stdout and writes the JSON and the HTML page with the
// capacity curve (report/capacity_report.h). Owned by main; the CLI::App it registers on holds
// pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_CAPACITY_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_CAPACITY_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/sim/replay/capacity_search.h"
#include "tools/agentkv/replay_flags.h"

namespace agentkv::tools {

class CapacityCommand {
 public:
  static constexpr const char* kName = "capacity";

  // Adds the `capacity` subcommand and its flags to `app`, which must outlive this object.
  explicit CapacityCommand(CLI::App& app);

  CapacityCommand(const CapacityCommand&) = delete;
  CapacityCommand& operator=(const CapacityCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Runs the command with the parsed flags and returns the process exit code: 0 on success,
  // 2 for bad flags, an unsupported workload or an unreadable trace, 1 for an internal failure.
  // Errors are reported as one line on stderr.
  int Run() const;

 private:
  // The search's own flags checked, before the workload is read or built: InvalidArgument
  // naming the flag and its value.
  [[nodiscard]] Status CheckSearchFlags() const;
  // The search of `plan` before it runs: the workload, the search options from the flags, the
  // arms and the seeds. InvalidArgument when the options are out of range.
  [[nodiscard]] StatusOr<sim::CapacityResult> PlanSearch(const ReplayPlan& plan) const;

  CLI::App* command_ = nullptr;
  // Every flag of `agentkv replay`, with this command's report paths.
  ReplayFlags flags_{"agentkv-capacity.json", "agentkv-capacity.html"};
  std::string slo_metric_ = "ttft-p95";
  double slo_s_ = 2.0;
  double start_rate_ = 0;
  double min_rate_ = 1.0;
  double max_rate_ = 3600.0;
  double tolerance_ = 0.05;
  std::vector<uint64_t> seeds_;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_CAPACITY_COMMAND_H_
