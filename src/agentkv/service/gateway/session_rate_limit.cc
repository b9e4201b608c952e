#include "agentkv/service/gateway/session_rate_limit.h"

#include <algorithm>

#include "agentkv/base/check.h"

// Invariant: 0 <= tokens_ <= burst_ after every call; last_ never goes backwards.

namespace agentkv::service {

TokenBucket::TokenBucket(double rate_per_s, int64_t burst, TimeNs now)
    : rate_per_s_(rate_per_s),
      burst_(static_cast<double>(burst)),
      tokens_(static_cast<double>(burst)),
      last_(now) {
  AGENTKV_CHECK(rate_per_s > 0);
  AGENTKV_CHECK(burst >= 1);
}

double TokenBucket::Refilled(TimeNs now) const {
  const int64_t elapsed_ns = std::max<int64_t>(0, now.ns() - last_.ns());
  return std::min(burst_, tokens_ + static_cast<double>(elapsed_ns) * 1e-9 * rate_per_s_);
}

bool TokenBucket::Take(TimeNs now) {
  tokens_ = Refilled(now);
  if (now.ns() > last_.ns()) last_ = now;
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

double TokenBucket::tokens(TimeNs now) const { return Refilled(now); }

NewSessionLimiter::NewSessionLimiter(double rate_per_s, int64_t burst)
    : rate_per_s_(rate_per_s), burst_(burst) {
  AGENTKV_CHECK(rate_per_s >= 0);
  AGENTKV_CHECK(burst >= 1);
}

bool NewSessionLimiter::Allow(std::string_view client, TimeNs now) {
  if (rate_per_s_ == 0) return true;
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    it = buckets_.emplace(std::string(client), TokenBucket(rate_per_s_, burst_, now)).first;
  }
  return it->second.Take(now);
}

}  // namespace agentkv::service
