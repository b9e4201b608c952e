// InstanceRegistry: which callers of a shared admission coordinator are alive, and which
// tickets each of them acquired, so that the leases of a caller that died without returning
// them (a gateway killed with SIGKILL) are ended after a short instance timeout rather than the
// lease TTL.
//
// A caller names itself with an instance id (RemoteAdmission draws a random one per process,
// so a restarted gateway is a new instance and never inherits or double-counts the old one's
// leases). An instance is known from its first sign of life, a heartbeat or an acquire naming
// it, and is silent once more than `timeout` has passed since its last one; TakeSilent then
// hands its tickets to the caller (the coordinator service), which ends them with
// AdmissionCoordinator::ReleaseTickets. Callers that never name an instance are not tracked:
// the lease TTL stays their backstop. Holding a ticket here does not mean it still holds a
// lease: ended tickets are dropped by Forget or PruneTickets, and ending one twice is harmless.
//
// A sweep that comes more than half a timeout after the previous one means the caller itself
// stalled (a coordinator that was paused or starved): nobody could be heard meanwhile, so
// every instance is given a fresh timeout from that sweep instead of being expired at once.
// Thread-compatible (single writer); deterministic: time is passed in, results come in
// instance id and ticket order.
#ifndef AGENTKV_CONTROL_INSTANCE_REGISTRY_H_
#define AGENTKV_CONTROL_INSTANCE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::control {

// An instance TakeSilent gave up on, with the tickets it still owned (sorted).
struct SilentInstance {
  std::string instance;
  // Its last sign of life.
  TimeNs last_seen;
  std::vector<std::string> tickets;

  friend bool operator==(const SilentInstance&, const SilentInstance&) = default;
};

class InstanceRegistry {
 public:
  // Precondition: timeout > 0 (the service validates its flag).
  explicit InstanceRegistry(TimeNs timeout);

  // Notes a sign of life of `instance` at `now`; an unknown instance becomes known.
  // Precondition: `instance` is not empty.
  void Touch(std::string_view instance, TimeNs now);
  // Notes that `instance` acquired `ticket` at `now` (also a sign of life). A ticket already
  // owned by another instance moves to this one: the last acquire names its owner.
  // Precondition: neither is empty.
  void Own(std::string_view instance, std::string_view ticket, TimeNs now);
  // Forgets `ticket` (it ended: released, cancelled, answered without a lease). Idempotent.
  void Forget(std::string_view ticket);
  // Removes and returns, in instance id order, every instance silent at `now`
  // (now - last sign of life > timeout), each with its tickets. When the previous call was more
  // than timeout / 2 before `now`, the caller stalled: every instance counts as seen at `now`
  // and none is returned.
  [[nodiscard]] std::vector<SilentInstance> TakeSilent(TimeNs now);
  // Forgets every ticket for which `live(ticket)` is false (it ended without a Forget, e.g.
  // its lease was released or reclaimed by the TTL). Instances stay known.
  void PruneTickets(const std::function<bool(const std::string& ticket)>& live);

  TimeNs timeout() const { return timeout_; }
  // Known instances, and the tickets they own.
  int64_t instances() const { return static_cast<int64_t>(instances_.size()); }
  int64_t tickets() const { return static_cast<int64_t>(owner_.size()); }
  // The ticket's owner, or nullopt.
  std::optional<std::string> OwnerOf(std::string_view ticket) const;

  // Internal when a ticket's owner and its instance's ticket set disagree (for tests).
  Status CheckInvariants() const;

 private:
  struct Instance {
    TimeNs last_seen;
    std::set<std::string, std::less<>> tickets;
  };

  TimeNs timeout_;
  std::optional<TimeNs> last_sweep_;
  // Ordered maps: TakeSilent's order must not depend on hashing.
  std::map<std::string, Instance, std::less<>> instances_;
  std::map<std::string, std::string, std::less<>> owner_;  // ticket -> instance
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_INSTANCE_REGISTRY_H_
