#include "agentkv/load/ramp.h"

#include <algorithm>
#include <string>

namespace agentkv::load {
namespace {

constexpr int64_t kMaxUsers = 1000;

}  // namespace

Status RampOptions::Validate() const {
  if (start_users < 1 || start_users > kMaxUsers) {
    return InvalidArgumentError("the ramp's start users must be in [1, 1000], got " +
                                std::to_string(start_users));
  }
  if (step_users < 1 || step_users > kMaxUsers) {
    return InvalidArgumentError("the ramp's step users must be in [1, 1000], got " +
                                std::to_string(step_users));
  }
  if (period < TimeNs::Millis(1) || period > TimeNs::Seconds(86'400)) {
    return InvalidArgumentError("the ramp's period must be in [0.001, 86400] s, got " +
                                std::to_string(period.seconds()));
  }
  if (ttft_slo <= TimeNs(0) || ttft_slo > TimeNs::Seconds(86'400)) {
    return InvalidArgumentError("the ramp's TTFT SLO must be in (0, 86400] s, got " +
                                std::to_string(ttft_slo.seconds()));
  }
  return Status();
}

std::vector<TimeNs> RampStarts(int64_t conversations, const RampOptions& options) {
  std::vector<TimeNs> starts;
  starts.reserve(static_cast<size_t>(std::max<int64_t>(conversations, 0)));
  for (int64_t k = 0; k < conversations; ++k) {
    const int64_t step =
        k < options.start_users ? 0 : (k - options.start_users) / options.step_users + 1;
    starts.emplace_back(step * options.period.ns());
  }
  return starts;
}

RampMonitor::RampMonitor(const RampOptions& options, int64_t conversations)
    : options_(options), conversations_(conversations) {
  result_.period_s = options.period.seconds();
  result_.ttft_slo_s = options.ttft_slo.seconds();
}

int64_t RampMonitor::UsersAt(int64_t step) const {
  return std::min(conversations_, options_.start_users + step * options_.step_users);
}

void RampMonitor::Judge(int64_t step, TimeNs begin, TimeNs end,
                        const std::vector<MeasuredRequest>& measured) {
  std::vector<double> ttft;
  for (const MeasuredRequest& r : measured) {
    if (r.cancelled || r.failed || r.engine.report.rejected || !r.engine.first_token.has_value()) {
      continue;
    }
    const TimeNs first = *r.engine.first_token;
    if (first >= begin && first < end) ttft.push_back((first - r.gateway.received).seconds());
  }
  const sim::DurationSummary summary = sim::SummarizeDurations(ttft);
  result_.steps.push_back(sim::RampStep{UsersAt(step), summary.count, summary.p95_s});
  if (summary.count > 0 && summary.p95_s > options_.ttft_slo.seconds()) {
    result_.slo_exceeded = true;
    return;
  }
  result_.users_held = UsersAt(step);
}

bool RampMonitor::Advance(TimeNs now, const std::vector<MeasuredRequest>& measured) {
  while (!result_.slo_exceeded) {
    const TimeNs end((steps_judged_ + 1) * options_.period.ns());
    if (now < end) break;
    Judge(steps_judged_, TimeNs(steps_judged_ * options_.period.ns()), end, measured);
    ++steps_judged_;
  }
  return result_.slo_exceeded;
}

void RampMonitor::Finish(TimeNs now, const std::vector<MeasuredRequest>& measured) {
  if (Advance(now, measured)) return;
  const TimeNs begin(steps_judged_ * options_.period.ns());
  // The partial step counts only when something was measured in it.
  for (const MeasuredRequest& r : measured) {
    if (!r.cancelled && r.engine.first_token.has_value() && *r.engine.first_token >= begin) {
      Judge(steps_judged_, begin, TimeNs(now.ns() + 1), measured);
      ++steps_judged_;
      return;
    }
  }
}

}  // namespace agentkv::load
