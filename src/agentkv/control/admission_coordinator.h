// AdmissionCoordinator: program-aware admission for the whole fleet (seed 000's
// AdmissionCoordinator logic, without threads or I/O).
//
// Each backend attempt asks to be admitted before it reaches the engines. The coordinator
// decides in the seed's exact order: protected work bypasses (`protected`); a degraded
// ledger bypasses (`degraded`); an older waiter, or a capacity or pressure refusal, waits in
// the one global FIFO; a waiter that reached the maximum wait bypasses (`aged`); otherwise the
// attempt is admitted with a lease it holds until the attempt ends. The FIFO is strict
// head-of-line: nothing is admitted ahead of an older waiter. agentkv adds one rule the seed
// lacks: with a fresh ledger, a reservation larger than the whole ceiling is refused at once
// (`oversized`), and a waiter that the ceiling shrank below is refused when it reaches the
// head, so that no request that can never be admitted holds the FIFO until max-wait. Waiters are
// drained on every release, cancel, reconcile and tick; a caller whose Acquire returned kWait gets
// its final decision from TakeResolved() after a later call resolved it. Disabled admission or an
// out-of-scope request never reaches the coordinator (see AgenticOptions). Time is passed in.
// Thread-compatible (single writer); deterministic.
#ifndef AGENTKV_CONTROL_ADMISSION_COORDINATOR_H_
#define AGENTKV_CONTROL_ADMISSION_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/budget_ledger.h"

namespace agentkv::control {

// kRefuse (agentkv's addition): the attempt must not run; the caller answers its client with
// an error (the gateway: HTTP 400). Only reason kOversized refuses.
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
  // The admission ceiling that refused it (kRefuse only).
  std::optional<int64_t> ceiling;

  friend bool operator==(const AdmissionDecision&, const AdmissionDecision&) = default;
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

  // Decisions of waiters resolved since the last call, in the order they were resolved.
  std::vector<AdmissionDecision> TakeResolved();

  int64_t waiting() const { return static_cast<int64_t>(waiters_.size()); }
  const AdmissionCounters& counters() const { return counters_; }
  void ResetCounters() { counters_ = AdmissionCounters{}; }
  BudgetLedger& ledger() { return ledger_; }
  const BudgetLedger& ledger() const { return ledger_; }

  // The seed's `agentic_kv/` series at `now` (AgenticKvMetrics over this coordinator's
  // counters, waiters and ledger). With `reset_step`, as once per rollout step, the counters
  // restart and the ledger's usage window is drained after reading.
  std::vector<std::pair<std::string, double>> StepMetrics(const AgenticOptions& options, TimeNs now,
                                                          bool reset_step);

  // Internal when the waiter bookkeeping disagrees with itself (for tests).
  Status CheckInvariants() const;

 private:
  struct Waiter {
    int64_t tokens = 0;
    TimeNs enqueued_at;
    // Position in the FIFO; a FIFO entry whose sequence differs is stale.
    uint64_t seq = 0;
  };

  void Drain(TimeNs now);
  AdmissionDecision Bypass(std::string_view ticket, int64_t tokens, AdmissionReason reason,
                           TimeNs waited) const;
  // kRefuse kOversized when the ledger is fresh and `tokens` exceed its whole ceiling.
  std::optional<AdmissionDecision> RefuseIfOversized(std::string_view ticket, int64_t tokens,
                                                     TimeNs waited, TimeNs now);
  void Resolve(AdmissionDecision decision);
  void PruneCancels(TimeNs now);

  CoordinatorParams params_;
  BudgetLedger ledger_;
  // The single global FIFO: (ticket, sequence) in arrival order; entries whose waiter is gone
  // (cancelled, or the ticket waits again later) are skipped when they reach the head.
  std::deque<std::pair<std::string, uint64_t>> order_;
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
