// Range checks of a workload generator's options (synthetic_agentic.h, rollout_workload.h).
// Each error names the options struct, the field and the value, e.g.
// `RolloutWorkloadOptions.turns.sigma: must be in [0, 10], got 11`. Every floating-point check
// is written so that NaN fails it. Pure; thread-safe.
#ifndef AGENTKV_SIM_WORKLOAD_OPTION_CHECKS_H_
#define AGENTKV_SIM_WORKLOAD_OPTION_CHECKS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/sim/workload/synthetic_agentic.h"

namespace agentkv::sim {

class OptionChecks {
 public:
  // `options_name` (e.g. "SyntheticAgenticOptions") must outlive the checker.
  explicit OptionChecks(std::string_view options_name) : options_name_(options_name) {}

  // InvalidArgument `<options>.<field>: must be in <range>, got <value>`.
  Status OutOfRange(std::string_view field, std::string_view range, const std::string& value) const;
  // OK when v is in [lo, hi].
  Status Int(std::string_view field, int64_t v, int64_t lo, int64_t hi) const;
  // OK when v is in [0, 1].
  Status Probability(std::string_view field, double v) const;
  // OK when the median is finite and > 0 and sigma is in [0, 10] (LogNormal's valid ranges);
  // the error names `<field>.median` or `<field>.sigma`.
  Status Distribution(std::string_view field, const LogNormal& d) const;

  // `v` as the errors print it (shortest form, e.g. "0.5", "1e+06", "nan").
  static std::string Num(double v);

 private:
  std::string_view options_name_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_OPTION_CHECKS_H_
