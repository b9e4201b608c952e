// AdmissionCoordinator: program-aware admission for the whole fleet (seed 000's
// AdmissionCoordinator logic, without threads or I/O).
//
// Each backend attempt asks to be admitted before it reaches the engines. The coordinator
// decides in the seed's exact order: protected work bypasses (`protected`); a degraded
// ledger bypasses (`degraded`); an older waiter, or a capacity or pressure refusal, waits in
// the one global FIFO; a waiter that reached the maximum wait bypasses (`aged`); otherwise the
// attempt is admitted with a lease it holds until the attempt ends. The FIFO is strict
// head-of-line: nothing is admitted ahead of an older waiter. agentkv adds two rules the seed
// lacks. (1) With a fresh ledger, a reservation larger than the largest engine the fleet had
// within the lease TTL (BudgetLedger::LargestKnownCapacity) is refused at once (`oversized`):
// it can never run. One that fits an engine but not the ceiling (shrunk by engines that stopped
// reporting, or one engine's headroom) is capped to the ceiling and waits for the budget to
// empty. (2) Fair shares (AdmissionShares): a waiter whose session or client would go over its
// share of the ceiling waits without blocking the FIFO (it is passed over, not head-of-line),
// and is refused (`over_share`) if it is still over at the maximum wait. Waiters are
// drained on every release, cancel, reconcile and tick; a caller whose Acquire returned kWait gets
// its final decision from TakeResolved() after a later call resolved it. Disabled admission or an
// out-of-scope request never reaches the coordinator (see AgenticOptions). Time is passed in.
//
// With AdmissionPolicy::kV2 (agentkv's admission v2) the decision order is the same, and three
// things change. (1) Budget and pressure are checked on the request's target engine when the
// caller knows it (AcquireRequest::engine), on the fleet otherwise (BudgetLedger::ReserveOn),
// and a named shared prefix is reserved once. (2) Waiting is per target: one queue per engine
// and one for the fleet; a refused head blocks only its own queue, so one full engine never
// delays a request bound for another. (3) Within a queue, waiters are ordered by
// (arrival - program_window for a continuing session's request, arrival for a new session's
// first, sequence): a continuing program goes first unless the new one has already waited the
// window (aging: nothing waits behind a request that arrived more than the window after it).
// A reservation over its target's ceiling is capped to it; one over the target engine's whole
// KV capacity (for the fleet: its largest known engine's) is refused at once, kRefuse
// `oversized` with that capacity in `ceiling`. Fair shares apply as in the seed policy, and an
// over-share waiter never blocks its queue.
// Thread-compatible (single writer); deterministic.
#ifndef AGENTKV_CONTROL_ADMISSION_COORDINATOR_H_
#define AGENTKV_CONTROL_ADMISSION_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/admission_shares.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/budget_ledger.h"

namespace agentkv::control {

// kRefuse (agentkv's addition): the attempt must not run; the caller answers its client with
// an error. Reason kOversized (it can never run; the gateway: HTTP 400) or kOverShare (its
// session or client held too much for the whole maximum wait; the gateway: HTTP 429).
enum class AdmissionAction : uint8_t { kAdmit, kBypass, kWait, kRefuse };

// "admit", "bypass", "wait", "refuse".
std::string_view AdmissionActionName(AdmissionAction action);

// The longest ticket Acquire accepts.
inline constexpr size_t kMaxTicketBytes = 1024;

struct AcquireRequest {
  // The attempt's ticket: unique per attempt among the coordinator's callers (the gateway
  // prefixes its backend rid "{request}:{attempt}" with its random instance id). 1 to
  // kMaxTicketBytes bytes.
  std::string ticket;
  // In [0, kMaxTokens] (base/bounds.h).
  int64_t reservation_tokens = 0;
  // Protected work (e.g. a request aborted too often) always bypasses.
  bool is_protected = false;

  // Admission v2 only (the seed policy ignores them). The engine the request will land on
  // (an EngineSnapshot::engine_id), when the routing key makes it knowable; unset: the fleet.
  std::optional<std::string> engine = std::nullopt;
  // The request continues a session that already sent one (program-aware order).
  bool continuing = false;
  // A shared prefix the prompt starts with, named by the caller, reserved once per key while
  // any lease uses it; `reservation_tokens` then excludes it (control::UncachedReservation).
  // Key and engine: at most kMaxTicketBytes bytes; prefix_tokens in [0, kMaxTokens].
  std::optional<std::string> prefix_key = std::nullopt;
  int64_t prefix_tokens = 0;

  // Fair shares (both policies): the session and the client the lease is charged to; unset:
  // not bounded by that share. Each at most kMaxTicketBytes bytes, not empty.
  ShareHolder holder = {};
};

struct AdmissionDecision {
  AdmissionAction action = AdmissionAction::kBypass;
  AdmissionReason reason = AdmissionReason::kDegraded;
  std::string ticket;
  int64_t reservation_tokens = 0;
  // Set when admitted.
  std::optional<std::string> lease_id;
  // The ledger epoch of the lease; -1 without one.
  int64_t owner_epoch = -1;
  // Time spent in the FIFO.
  TimeNs wait;
  // What refused it (kRefuse only): for kOversized the largest engine's whole KV capacity (v2:
  // the target's), for kOverShare the share's bound in tokens.
  std::optional<int64_t> ceiling;

  friend bool operator==(const AdmissionDecision&, const AdmissionDecision&) = default;
};

// What ReleaseTickets ended.
struct TicketsReleased {
  int64_t leases = 0;
  int64_t tokens = 0;
  int64_t waiters = 0;

  friend bool operator==(const TicketsReleased&, const TicketsReleased&) = default;
};

struct CoordinatorParams {
  LedgerParams ledger;
  // agentic_admission_max_wait_s: FIFO wait after which a waiter bypasses `aged`.
  // Default: 30 s. Range: >= 0.
  TimeNs max_wait = TimeNs::Seconds(30);
  // How long a cancel that arrived before its acquire is remembered. Default: 600 s.
  TimeNs cancel_tombstone_retention = TimeNs::Seconds(600);
  // At most this many such cancels are remembered (oldest forgotten first). Default: 65536.
  int64_t max_cancel_tombstones = 65536;
  // agentic_admission_policy. Default: kSeed.
  AdmissionPolicy policy = AdmissionPolicy::kSeed;
  // agentic_admission_program_window_s (v2). Default: 5 s. Range: >= 0.
  TimeNs program_window = TimeNs::Seconds(5);
  // agentic_admission_session_share and agentic_admission_client_share. Default: 1.0 each
  // (CoordinatorParamsFrom copies the options' 0.5).
  ShareLimits shares;
};

// The coordinator parameters `options` (validated) call for.
CoordinatorParams CoordinatorParamsFrom(const AgenticOptions& options);

class AdmissionCoordinator {
 public:
  explicit AdmissionCoordinator(const CoordinatorParams& params);

  // Decides for `request` at `now`: kAdmit, kBypass or kRefuse now, or kWait (the final
  // decision comes later through TakeResolved). A retry of an admitted ticket returns its
  // lease again; a retry of a waiting ticket with the same reservation waits on; with a
  // different one it is InvalidArgument (a ticket's reservation never changes).
  // InvalidArgument, with nothing changed, for an empty or over-long ticket or a reservation
  // outside [0, kMaxTokens].
  StatusOr<AdmissionDecision> Acquire(const AcquireRequest& request, TimeNs now);
  // Returns a lease (idempotent) and drains the FIFO.
  void Release(std::string_view lease_id, TimeNs now);
  // Cancels a ticket: a waiter is resolved kBypass `cancelled`; a lease granted concurrently
  // is released; a ticket not seen yet is remembered so that its later Acquire bypasses
  // `cancelled`. Drains the FIFO.
  void Cancel(std::string_view ticket, TimeNs now);
  // Takes a poll of the fleet, reclaims leases past their TTL, forgets old cancels and drains.
  void Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now);
  // Drains the FIFO (ages waiters) at `now`.
  void Tick(TimeNs now);
  // Resolves every waiter kBypass `degraded` and forgets every lease: no waiter is left
  // hanging when the service stops.
  void Shutdown();

  // Ends every ticket of `tickets` whose holder is known to be gone (a gateway instance that
  // stopped heartbeating, control::InstanceRegistry): its lease is returned, or its waiter is
  // resolved kBypass `cancelled` (counted as cancelled). Unlike Cancel, a ticket that neither
  // waits nor holds a lease is ignored, not remembered. Drains the FIFO once, at the end.
  TicketsReleased ReleaseTickets(std::span<const std::string> tickets, TimeNs now);
  // Whether `ticket` waits in the FIFO or holds a lease.
  bool Holds(std::string_view ticket) const;

  // Decisions of waiters resolved since the last call, in the order they were resolved.
  std::vector<AdmissionDecision> TakeResolved();

  int64_t waiting() const { return static_cast<int64_t>(waiters_.size()); }
  const AdmissionCounters& counters() const { return counters_; }
  void ResetCounters() { counters_ = AdmissionCounters{}; }
  BudgetLedger& ledger() { return ledger_; }
  const BudgetLedger& ledger() const { return ledger_; }
  const AdmissionShares& shares() const { return shares_; }

  // The seed's `agentic_kv/` series at `now` (AgenticKvMetrics over this coordinator's
  // counters, waiters and ledger). With `reset_step`, as once per rollout step, the counters
  // restart and the ledger's usage window is drained after reading.
  std::vector<std::pair<std::string, double>> StepMetrics(const AgenticOptions& options, TimeNs now,
                                                          bool reset_step);

  // Internal when the waiter bookkeeping disagrees with itself (for tests).
  Status CheckInvariants() const;

 private:
  struct Waiter {
    // The tokens it will reserve (admission v2: capped to its target's ceiling), and those
    // it asked for (a retry must ask the same).
    int64_t tokens = 0;
    int64_t requested = 0;
    TimeNs enqueued_at;
    // Position in the FIFO; a FIFO entry whose sequence differs is stale.
    uint64_t seq = 0;
    // Admission v2: the target, and the waiter's place in v2_order_.
    ReserveTarget target;
    TimeNs order_at;
    ShareHolder holder;
  };
  // Admission v2's order: (order time, sequence, ticket).
  using V2Key = std::tuple<TimeNs, uint64_t, std::string>;

  bool v2() const { return params_.policy == AdmissionPolicy::kV2; }
  void Drain(TimeNs now);
  void DrainV2(TimeNs now);
  StatusOr<AdmissionDecision> AcquireV2(const AcquireRequest& request, TimeNs now);
  // v2: caps `tokens` and the prefix to the target's ceiling, or refuses (kRefuse oversized)
  // when they exceed its whole capacity. nullopt without a usable poll (nothing to check).
  std::optional<AdmissionDecision> CapOrRefuseV2(std::string_view ticket, int64_t& tokens,
                                                 ReserveTarget& target, TimeNs waited, TimeNs now);
  // v2: the queue a target waits in ("" = the fleet, else "engine:" + id).
  std::string QueueOf(const ReserveTarget& target) const;
  AdmissionDecision Bypass(std::string_view ticket, int64_t tokens, AdmissionReason reason,
                           TimeNs waited) const;
  // After a new waiter's drain (seed or v2): its decision when the drain resolved it, else kWait
  // with `refusal` for `tokens`.
  AdmissionDecision WaitOrResolved(const std::string& ticket, AdmissionReason refusal,
                                   int64_t tokens);
  // Seed policy, with a fresh ledger: kRefuse kOversized when `tokens` exceed the largest known
  // engine's capacity; else `tokens` capped to the ceiling. nullopt when not refused.
  std::optional<AdmissionDecision> CapOrRefuseSeed(std::string_view ticket, int64_t& tokens,
                                                   TimeNs waited, TimeNs now);
  // The share `holder` would go over with `tokens` more (kNone with a stale ledger).
  ShareExcess OverShare(const ShareHolder& holder, int64_t tokens, TimeNs now) const;
  // kRefuse kOverShare for a waiter still over its share at the maximum wait.
  AdmissionDecision RefuseOverShare(std::string_view ticket, int64_t tokens, ShareExcess excess,
                                    TimeNs waited);
  // The decision for a granted reservation, its lease charged to `holder`'s shares.
  AdmissionDecision Granted(std::string_view ticket, const GrantResult& grant,
                            const ShareHolder& holder, TimeNs waited);
  void Resolve(AdmissionDecision decision);
  void PruneCancels(TimeNs now);

  CoordinatorParams params_;
  BudgetLedger ledger_;
  // Every lease the ledger holds that names a session or client, charged to them.
  AdmissionShares shares_;
  // The single global FIFO: (ticket, sequence) in arrival order; entries whose waiter is gone
  // (cancelled, or the ticket waits again later) are skipped when they reach the head.
  std::deque<std::pair<std::string, uint64_t>> order_;
  // Admission v2: every waiter once, in decision order (the queues interleaved).
  std::set<V2Key> v2_order_;
  // Admission v2: waiters per target engine (nullopt: the fleet), so that a drain knows how
  // many queues there are without walking every waiter, and stops once each is blocked.
  std::map<std::optional<std::string>, int64_t> v2_targets_;
  void AddV2Waiter(const std::string& ticket, const Waiter& waiter);
  // Erases `w` from v2_order_, the target counts and waiters_; returns the next order entry.
  std::set<V2Key>::iterator EraseV2Waiter(std::unordered_map<std::string, Waiter>::iterator w);
  uint64_t next_seq_ = 0;
  std::unordered_map<std::string, Waiter> waiters_;
  // Cancels that arrived before their acquire: ticket -> time, plus arrival order for pruning.
  std::unordered_map<std::string, TimeNs> cancelled_;
  std::deque<std::pair<std::string, TimeNs>> cancel_order_;
  std::vector<AdmissionDecision> resolved_;
  AdmissionCounters counters_;
};

// AttemptLease: holds one backend attempt's admission lease and returns it on every exit path
// (seed 000: "release in every exit path"). Release(now) returns it explicitly; a lease still
// held when the guard is destroyed (an error or early return) is returned at the time it was
// granted, the last time the guard knows, and the next drain ages waiters correctly.
// Move-only; must not outlive its coordinator.
class AttemptLease {
 public:
  AttemptLease(AdmissionCoordinator& coordinator, const AdmissionDecision& decision, TimeNs now)
      : coordinator_(&coordinator),
        lease_id_(decision.lease_id.value_or(std::string())),
        granted_at_(now) {}
  AttemptLease(AttemptLease&& other) noexcept
      : coordinator_(other.coordinator_),
        lease_id_(std::exchange(other.lease_id_, std::string())),
        granted_at_(other.granted_at_) {}
  AttemptLease& operator=(AttemptLease&&) = delete;
  AttemptLease(const AttemptLease&) = delete;
  AttemptLease& operator=(const AttemptLease&) = delete;
  ~AttemptLease() { Release(granted_at_); }

  bool holds_lease() const { return !lease_id_.empty(); }
  // Returns the lease, if still held. Idempotent.
  void Release(TimeNs now) {
    if (lease_id_.empty()) return;
    coordinator_->Release(lease_id_, now);
    lease_id_.clear();
  }

 private:
  AdmissionCoordinator* coordinator_;
  // Empty when no lease is held (lease ids are never empty: "{epoch}:{ticket}").
  std::string lease_id_;
  TimeNs granted_at_;
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_ADMISSION_COORDINATOR_H_
