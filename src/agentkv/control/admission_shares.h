// AdmissionShares: what each session and each client holds of the admission ceiling, lease by
// lease, so that no one of them can reserve the whole fleet (AgenticOptions'
// --agentic-admission-session-share and --agentic-admission-client-share).
//
// The coordinator charges every lease it grants to the holder its request named and returns
// the charge when the lease goes (release, cancel, TTL, shutdown). A holder is over its share
// when it already holds a lease and one more reservation would take it past
// floor(share x ceiling): its first lease is never held back, so a share never refuses a
// request that would run alone. The shares are a bound, not a queue: the coordinator decides
// what an over-share waiter does. Thread-compatible; deterministic.
#ifndef AGENTKV_CONTROL_ADMISSION_SHARES_H_
#define AGENTKV_CONTROL_ADMISSION_SHARES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"

namespace agentkv::control {

// Who a reservation is charged to. Either may be unset (not bounded by that share).
struct ShareHolder {
  std::optional<std::string> client = std::nullopt;
  std::optional<std::string> session = std::nullopt;

  friend bool operator==(const ShareHolder&, const ShareHolder&) = default;
};

struct ShareLimits {
  // Shares of the ceiling, each in (0, 1]. Default: 1.0 (a holder may take the whole ceiling,
  // yet still not past it).
  double session_share = 1.0;
  double client_share = 1.0;
};

// Which share a reservation would go over.
enum class ShareExcess : uint8_t { kNone, kSession, kClient };

class AdmissionShares {
 public:
  explicit AdmissionShares(const ShareLimits& limits) : limits_(limits) {}

  // Whether `tokens` more for `holder` would go over a share of `ceiling` (see above); the
  // session's share is checked first. kNone for a ceiling <= 0 (no capacity signal: the ledger
  // decides) and for a holder that names nothing.
  ShareExcess Check(const ShareHolder& holder, int64_t tokens, int64_t ceiling) const;
  // The tokens `excess`'s share allows of `ceiling`: floor(share x ceiling).
  int64_t Bound(ShareExcess excess, int64_t ceiling) const;

  // Charges lease `lease_id` of `tokens` (>= 0) to `holder`; a holder that names nothing is not
  // recorded. Precondition: the lease is not charged yet.
  void Charge(const std::string& lease_id, const ShareHolder& holder, int64_t tokens);
  // Returns a lease's charge. Idempotent: an unknown id is a no-op.
  void Release(std::string_view lease_id);

  int64_t session_held(std::string_view session) const;
  int64_t client_held(std::string_view client) const;
  int64_t leases() const { return static_cast<int64_t>(leases_.size()); }
  // Calls `visit(lease_id)` for every charged lease, in id order (the coordinator checks that
  // the ledger still holds each).
  template <typename Visit>
  void ForEachLease(Visit visit) const {
    for (const auto& [id, entry] : leases_) visit(id);
  }

  // Internal when a per-session or per-client sum is not the sum of its leases' tokens.
  Status CheckInvariants() const;

 private:
  struct Entry {
    ShareHolder holder;
    int64_t tokens = 0;
  };
  ShareLimits limits_;
  // Ordered maps: nothing here may depend on hashing order.
  std::map<std::string, Entry, std::less<>> leases_;
  std::map<std::string, int64_t, std::less<>> by_session_;  // Entries at 0 are erased.
  std::map<std::string, int64_t, std::less<>> by_client_;
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_ADMISSION_SHARES_H_
