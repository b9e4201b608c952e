#include "tools/agentkv/working_set_flags.h"

#include <fmt/format.h>

#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {

void WorkingSetFlags::Add(CLI::App& app, const std::string& group) {
  app.add_option("--agentic-working-set-headroom", options_.headroom,
                 "Working set: the share of each engine's device KV the live programs' "
                 "footprints may fill (plus the host tier where there is one), in (0, 8]; above "
                 "1 overcommits (held contexts that do not fit are recomputed on return)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-hold-quantile", options_.hold_quantile,
                 "Working set: a paused program holds its context until this quantile of its "
                 "pause kind's learned pauses, in (0, 1)")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-default-hold-s", default_hold_s_,
                 "Working set: the hold after a pause kind with too few samples to learn from, "
                 "seconds, in [0, --agentic-working-set-max-hold-s]")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-max-hold-s", max_hold_s_,
                 "Working set: the longest hold, seconds, in [0, 86400]")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-max-wait-s", max_wait_s_,
                 "Working set: the longest a new program waits before it is admitted anyway "
                 "(the aging bound), seconds, in [0, 86400]")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-reserve-expected-peak", options_.reserve_expected_peak,
                 "Working set: a new program is admitted only when the footprint programs reach "
                 "(the median peak of recently ended ones) fits, not just its first request")
      ->capture_default_str()
      ->group(group);
  app.add_option("--agentic-working-set-returning-waits", options_.returning_waits,
                 "Working set: a started program whose holds expired waits like a new one on "
                 "its return (true), or goes at once (false)")
      ->capture_default_str()
      ->group(group);
}

StatusOr<control::WorkingSetOptions> WorkingSetFlags::Options() const {
  control::WorkingSetOptions options = options_;
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--agentic-working-set-headroom", options.headroom, 0.0,
                                         8.0, LowerBound::kOpen));
  if (!(options.hold_quantile > 0.0 && options.hold_quantile < 1.0)) {
    return InvalidArgumentError(fmt::format(
        "--agentic-working-set-hold-quantile must be in (0, 1), got {}", options.hold_quantile));
  }
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--agentic-working-set-max-hold-s", max_hold_s_, 0.0, 86400.0));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--agentic-working-set-default-hold-s", default_hold_s_, 0.0, max_hold_s_));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--agentic-working-set-max-wait-s", max_wait_s_, 0.0, 86400.0));
  options.default_hold = TimeNs::Seconds(default_hold_s_);
  options.max_hold = TimeNs::Seconds(max_hold_s_);
  options.max_wait = TimeNs::Seconds(max_wait_s_);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return options;
}

}  // namespace agentkv::tools
