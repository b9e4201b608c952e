// LocalAdmission: program-aware admission in this process, an AdmissionBackend over the pure
// control::AdmissionCoordinator (seed 000).
//
// The coordinator is one single-writer state machine; LocalAdmission puts it behind one mutex,
// reads time from an injected clock, and turns its kWait results into callbacks: a waiting
// Acquire's `done` is stored by ticket and run when a later Release, Cancel, Reconcile, Tick
// or Acquire resolves the waiter. A small timer thread calls Tick every `tick_interval`, so
// waiters age to the `aged` bypass at max_wait even when nothing else happens. Reconcile is
// fed by whoever polls the fleet (CoordinatorServer, or the gateway when it runs admission in
// process); TTL reclaim of leases happens there.
//
// Callers that name an instance (the coordinator's remote gateways: an acquire's `instance`,
// and Heartbeat) are tracked by a control::InstanceRegistry: each Tick ends the leases and
// waiters of every instance silent for longer than instance_timeout_s
// (AdmissionCoordinator::ReleaseTickets) and reports it to on_instance_expired.
//
// Callbacks never run under the mutex. Resolved waiters are delivered by one thread at a time
// from one queue, so their `done` callbacks run in the order the coordinator resolved them,
// even across threads; a callback may call back into LocalAdmission (e.g. Release) and must
// not block. Thread-safe. Owns its timer thread; not copyable. Destruction (or Shutdown)
// resolves every waiter kBypass `degraded` before returning.
#ifndef AGENTKV_SERVICE_ADMISSION_ADMISSION_LOCAL_H_
#define AGENTKV_SERVICE_ADMISSION_ADMISSION_LOCAL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/instance_registry.h"
#include "agentkv/service/admission/admission_backend.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// One instance that went silent, and what ending its tickets released.
struct InstanceExpiry {
  std::string instance;
  // Since its last sign of life.
  TimeNs silent_for;
  control::TicketsReleased released;
};

// Instances given up on since start, and what that released.
struct InstanceExpiryTotals {
  int64_t instances = 0;
  int64_t leases = 0;
  int64_t tokens = 0;
  int64_t waiters = 0;

  friend bool operator==(const InstanceExpiryTotals&, const InstanceExpiryTotals&) = default;
};

struct LocalAdmissionOptions {
  // The seed's options. agentic_program_admission is treated as set (an admission backend
  // exists only when admission is on), so the numeric ranges are always validated.
  // agentic_session_lifecycle only decides whether session/lifecycle_enabled is reported.
  control::AgenticOptions agentic;
  // Between two Tick() calls of the timer thread; 0 starts no timer (tests drive Tick
  // themselves). Default: 100 ms. Range: >= 0.
  std::chrono::milliseconds tick_interval{100};
  // The time source. Default (empty): std::chrono::steady_clock.
  std::function<TimeNs()> clock;
  // --instance-timeout-s: an instance silent (no heartbeat, no acquire) for longer than this
  // has its leases released and its waiters cancelled. Default: 10. Range: (0, 86400].
  double instance_timeout_s = 10.0;
  // Called, outside every lock and on the ticking thread, for each instance given up on.
  // Default: empty.
  std::function<void(const InstanceExpiry& expiry)> on_instance_expired;
};

class LocalAdmission final : public AdmissionBackend {
 public:
  using Clock = std::function<TimeNs()>;
  using ResultCallback = std::function<void(StatusOr<control::AdmissionDecision> result)>;

  // Validates the options (InvalidArgument naming the flag, e.g.
  // "--agentic-admission-headroom must be in (0, 1], got 1.5") and starts the timer.
  static StatusOr<std::unique_ptr<LocalAdmission>> Create(LocalAdmissionOptions options);

  LocalAdmission(const LocalAdmission&) = delete;
  LocalAdmission& operator=(const LocalAdmission&) = delete;
  // Stops and joins the timer, then Shutdown().
  ~LocalAdmission() override;

  // AdmissionBackend. Acquire reports a ticket retried with a different reservation (the
  // coordinator's InvalidArgument) as kBypass `degraded`: the caller's attempt goes on without
  // a lease, as for any other backend error.
  void Acquire(control::AcquireRequest request, AcquireCallback done) override;
  void Release(const std::string& lease_id) override;
  void Cancel(const std::string& ticket) override;
  void Reconcile(std::span<const control::EngineSnapshot> snapshots) override;
  // The coordinator's agentic_kv/ series at the clock's now, with the session closes counted
  // by CountSessionClose merged in (session/close, session/close_failure). With `reset_step`,
  // the counters (both kinds) restart and the ledger's usage window drains.
  std::vector<std::pair<std::string, double>> StepMetrics(bool reset_step) override;
  // The counters of StepMetrics (CountSessionClose's included) summed over every step since
  // Create: a reset_step read carries the step's counts into them. Never nullopt.
  std::optional<control::AdmissionCounters> TotalCounters() const override;

  // Acquire with the coordinator's error kept: `done` runs once with the final decision, or
  // with InvalidArgument (and no state change) for a ticket waiting with another reservation.
  // The server answers that 400. A non-empty `instance` names the caller: the ticket is its
  // own (ended if it goes silent), and the call is a sign of life.
  void AcquireWithStatus(control::AcquireRequest request, ResultCallback done,
                         const std::string& instance = std::string());

  // A sign of life of `instance` (not empty): an unknown one becomes known.
  void Heartbeat(const std::string& instance);

  // Ages waiters and ends the tickets of silent instances at the clock's now (the timer calls
  // this every tick_interval).
  void Tick();

  // Reports one session close fanned out by the gateway (seed 000 section 7): `ok` false when
  // it did not succeed on every engine. Counted into agentic_kv/session/close and
  // session/close_failure of StepMetrics, next to the admission series.
  void CountSessionClose(bool ok);

  // Stops the timer, resolves every waiter kBypass `degraded` and forgets every lease.
  // Afterwards Acquire answers kBypass `degraded` at once and Reconcile is ignored.
  // Idempotent; may be called from a callback (the timer is joined by the destructor).
  void Shutdown();

  // Tokens held by leases, waiters in the FIFO, live leases (for tests and /health).
  int64_t reserved() const;
  int64_t waiting() const;
  int64_t lease_count() const;
  // Whether the ledger is degraded at the clock's now (no fresh capacity snapshot).
  bool degraded() const;
  // Instances heard from within the instance timeout, and those given up on since start.
  int64_t instances() const;
  InstanceExpiryTotals instance_expiry_totals() const;
  // The validated options (agentic_program_admission set).
  const control::AgenticOptions& options() const { return options_; }
  // The clock's now.
  TimeNs Now() const { return clock_(); }

  // Internal when the coordinator's bookkeeping, or the callbacks stored here, disagree with
  // the coordinator's waiters.
  Status CheckInvariants() const;

 private:
  explicit LocalAdmission(const LocalAdmissionOptions& options);

  // Moves the coordinator's resolved waiters and their callbacks into deliveries_.
  // Requires mu_.
  void CollectResolvedLocked() AGENTKV_REQUIRES(mu_);
  // The counters of the current step: the coordinator's and the session closes.
  control::AdmissionCounters StepCountersLocked() const AGENTKV_REQUIRES(mu_);
  // Runs queued deliveries unless another thread is already doing so. Must not hold mu_.
  void Deliver();
  void TimerLoop(std::chrono::milliseconds interval);

  struct Delivery {
    control::AdmissionDecision decision;
    std::vector<ResultCallback> callbacks;
  };

  control::AgenticOptions options_;
  Clock clock_;

  mutable sync::Mutex mu_;
  control::AdmissionCoordinator coordinator_ AGENTKV_GUARDED_BY(mu_);
  control::InstanceRegistry instances_ AGENTKV_GUARDED_BY(mu_);
  std::function<void(const InstanceExpiry&)> on_instance_expired_;
  InstanceExpiryTotals expiry_totals_ AGENTKV_GUARDED_BY(mu_);
  // When the registry last dropped the tickets that ended without its hearing (e.g. released).
  std::optional<TimeNs> last_prune_ AGENTKV_GUARDED_BY(mu_);
  // Callbacks of waiting tickets (a retried waiting ticket adds one). Guarded by mu_.
  std::unordered_map<std::string, std::vector<ResultCallback>> waiting_callbacks_
      AGENTKV_GUARDED_BY(mu_);
  std::deque<Delivery> deliveries_ AGENTKV_GUARDED_BY(mu_);
  bool delivering_ AGENTKV_GUARDED_BY(mu_) = false;
  bool shut_down_ AGENTKV_GUARDED_BY(mu_) = false;
  int64_t session_close_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t session_close_failure_ AGENTKV_GUARDED_BY(mu_) = 0;
  // The counts of every step already reset (TotalCounters adds the current one).
  control::AdmissionCounters earlier_steps_ AGENTKV_GUARDED_BY(mu_);

  sync::Mutex timer_mu_;
  sync::CondVar timer_wake_;
  bool timer_stop_ AGENTKV_GUARDED_BY(timer_mu_) = false;
  std::thread timer_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_ADMISSION_LOCAL_H_
