// The working set's options (control::WorkingSetOptions) on the command line, declared in one
// place for every command that runs it (replay's +working-set arms, the gateway, the
// coordinator): the same names, defaults, help text and checks everywhere.
//
// A command adds them to its CLI::App and, after parsing, reads them back with Options(),
// checked flag by flag (each error names its flag and value). Owned by its command; not
// copyable (CLI11 holds pointers into it).
#ifndef AGENTKV_TOOLS_AGENTKV_WORKING_SET_FLAGS_H_
#define AGENTKV_TOOLS_AGENTKV_WORKING_SET_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "agentkv/base/status.h"
#include "agentkv/control/working_set.h"

namespace agentkv::tools {

class WorkingSetFlags {
 public:
  WorkingSetFlags() = default;
  WorkingSetFlags(const WorkingSetFlags&) = delete;
  WorkingSetFlags& operator=(const WorkingSetFlags&) = delete;

  // Adds --agentic-working-set-{headroom, hold-quantile, default-hold-s, max-hold-s,
  // max-wait-s, returning-waits} to `app`, in option group `group`. Call once, before parsing.
  void Add(CLI::App& app, const std::string& group);

  // The options given, checked: InvalidArgument naming the first flag out of range and its
  // value. host_tier_ratio is left 0 (the caller knows its host tier). Call after parsing.
  [[nodiscard]] StatusOr<control::WorkingSetOptions> Options() const;

 private:
  // Whole seconds: a default read back through TimeNs::seconds() may exceed its bound by an
  // ulp (30 s -> 30.000000000000004) and fail its own range check.
  static double Seconds(TimeNs t) { return static_cast<double>(t.ns()) / 1e9; }

  control::WorkingSetOptions options_;
  double default_hold_s_ = Seconds(options_.default_hold);
  double max_hold_s_ = Seconds(options_.max_hold);
  double max_wait_s_ = Seconds(options_.max_wait);
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_WORKING_SET_FLAGS_H_
