// Invariants: consecutive_failures_ counts the failed probes since the last answered one;
// open_ became true exactly opens_ times, each when consecutive_failures_ reached failures_
// while closed.
#include "agentkv/service/admission/coordinator_breaker.h"

#include "agentkv/base/check.h"

namespace agentkv::service {

CoordinatorBreaker::CoordinatorBreaker(int failures, TimeNs cooldown)
    : failures_(failures), cooldown_(cooldown) {
  AGENTKV_CHECK(failures >= 1) << "the breaker needs at least one failure to open";
  AGENTKV_CHECK(cooldown > TimeNs()) << "the breaker's cool-down must be > 0";
}

CoordinatorBreaker::Change CoordinatorBreaker::OnProbe(bool answered, TimeNs now) {
  if (answered) {
    consecutive_failures_ = 0;
    if (!open_ || now < closed_no_earlier_than_) return Change::kNone;
    open_ = false;
    return Change::kClosed;
  }
  ++consecutive_failures_;
  if (open_) {
    // A probe that fails after the cool-down starts another one.
    if (now >= closed_no_earlier_than_) closed_no_earlier_than_ = now + cooldown_;
    return Change::kNone;
  }
  if (consecutive_failures_ < failures_) return Change::kNone;
  open_ = true;
  ++opens_;
  opened_at_ = now;
  closed_no_earlier_than_ = now + cooldown_;
  return Change::kOpened;
}

}  // namespace agentkv::service
