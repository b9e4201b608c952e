// CoordinatorBreaker: the circuit breaker in front of a remote coordinator (RemoteAdmission).
//
// Its probes are the heartbeats: each answered or failed one is reported with OnProbe. After
// `failures` failed ones in a row the breaker opens: admission fails open at once (bypass
// `degraded`) instead of waiting on a coordinator that stopped answering. It stays open at
// least `cooldown`; then the first answered probe closes it, and a failed one keeps it open for
// another cool-down. Decisions only: the caller sends the probes, cuts the acquires in flight
// when it opens, and logs the changes. Thread-compatible; deterministic (time is passed in).
#ifndef AGENTKV_SERVICE_ADMISSION_COORDINATOR_BREAKER_H_
#define AGENTKV_SERVICE_ADMISSION_COORDINATOR_BREAKER_H_

#include <cstdint>

#include "agentkv/base/time.h"

namespace agentkv::service {

class CoordinatorBreaker {
 public:
  enum class Change : uint8_t { kNone, kOpened, kClosed };

  // Preconditions: failures >= 1, cooldown > 0 (RemoteAdmissionOptions::Validate).
  CoordinatorBreaker(int failures, TimeNs cooldown);

  // Takes one probe's outcome at `now`; returns whether the breaker opened or closed.
  Change OnProbe(bool answered, TimeNs now);

  bool open() const { return open_; }
  // Times it opened since construction.
  int64_t opens() const { return opens_; }
  // Failed probes in a row so far.
  int consecutive_failures() const { return consecutive_failures_; }
  // When it last opened (meaningful once opens() > 0).
  TimeNs opened_at() const { return opened_at_; }

 private:
  int failures_;
  TimeNs cooldown_;
  bool open_ = false;
  int consecutive_failures_ = 0;
  int64_t opens_ = 0;
  TimeNs opened_at_;
  // While open: no probe closes it before this.
  TimeNs closed_no_earlier_than_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_COORDINATOR_BREAKER_H_
