// The rate at which each client may open new sessions (--max-new-sessions-per-s,
// --new-sessions-burst): a token bucket per client. Opening sessions in a tight loop would
// otherwise end every idle session of every other client at --max-sessions (the longest-idle
// one makes room for each new one).
//
// Pure: time is passed in (TimeNs, e.g. steady-clock nanoseconds), nothing is read or locked.
// Thread-compatible: the gateway calls it under its own mutex.
#ifndef AGENTKV_SERVICE_GATEWAY_SESSION_RATE_LIMIT_H_
#define AGENTKV_SERVICE_GATEWAY_SESSION_RATE_LIMIT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "agentkv/base/time.h"

namespace agentkv::service {

// A token bucket: holds up to `burst` tokens, starts full, refills at `rate_per_s` tokens a
// second; each Take spends one.
class TokenBucket {
 public:
  // Preconditions: rate_per_s finite and > 0, burst >= 1 (GatewayOptions::Validate checks the
  // flags).
  TokenBucket(double rate_per_s, int64_t burst, TimeNs now);

  // Spends one token when a whole one is there and returns true; false (nothing spent) when the
  // bucket holds less than one. A `now` earlier than the last call's counts as the last's.
  bool Take(TimeNs now);
  // The tokens held at `now` (refilled, not spent), in [0, burst].
  double tokens(TimeNs now) const;

 private:
  double Refilled(TimeNs now) const;

  double rate_per_s_;
  double burst_;
  double tokens_;
  TimeNs last_;
};

// One TokenBucket per client name, created full on the client's first request. The clients
// are the configured tenants plus a few fixed names (the admin, unauthenticated callers), so
// the table is bounded by the tenant list.
class NewSessionLimiter {
 public:
  // rate_per_s == 0 disables the limit (Allow always answers true). Preconditions: rate_per_s
  // finite and >= 0, burst >= 1.
  NewSessionLimiter(double rate_per_s, int64_t burst);

  // Whether `client` may open one more session at `now`; spends a token when it may.
  bool Allow(std::string_view client, TimeNs now);
  // Buckets created so far.
  size_t clients() const { return buckets_.size(); }

 private:
  double rate_per_s_;
  int64_t burst_;
  std::map<std::string, TokenBucket, std::less<>> buckets_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_SESSION_RATE_LIMIT_H_
