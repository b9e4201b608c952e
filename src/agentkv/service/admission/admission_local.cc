// Invariants (checked by CheckInvariants, true whenever mu_ is free):
// - waiting_callbacks_ holds exactly the coordinator's waiting tickets, each with at least one
//   callback: every call into the coordinator is followed, under the same lock, by
//   CollectResolvedLocked, which moves a resolved ticket's callbacks into deliveries_.
// - Each callback runs exactly once: it lives in exactly one place (waiting_callbacks_, then
//   deliveries_, then the delivering thread's stack), and deliveries_ is drained by one thread
//   at a time (delivering_), front to back, so waiters are answered in resolution order.
// - No callback runs while mu_ is held.
// - instances_ names, for each tracked instance, a superset of the tickets it holds in the
//   coordinator (ended ones are forgotten on the spot or by the next prune).
#include "agentkv/service/admission/admission_local.h"

#include <utility>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

using control::AdmissionAction;
using control::AdmissionDecision;
using control::AdmissionReason;

TimeNs SteadyNow() {
  return TimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

AdmissionDecision DegradedBypass(const control::AcquireRequest& request) {
  return AdmissionDecision{AdmissionAction::kBypass,
                           AdmissionReason::kDegraded,
                           request.ticket,
                           request.reservation_tokens,
                           std::nullopt,
                           -1,
                           TimeNs(),
                           std::nullopt};
}

}  // namespace

StatusOr<std::unique_ptr<LocalAdmission>> LocalAdmission::Create(LocalAdmissionOptions options) {
  options.agentic.agentic_program_admission = true;
  AGENTKV_RETURN_IF_ERROR(options.agentic.Validate());
  if (!(options.instance_timeout_s > 0.0 && options.instance_timeout_s <= 86400.0)) {
    return InvalidArgumentError("--instance-timeout-s must be in (0, 86400], got " +
                                std::to_string(options.instance_timeout_s));
  }
  if (options.tick_interval.count() < 0) {
    return InvalidArgumentError("tick_interval must be >= 0 ms, got " +
                                std::to_string(options.tick_interval.count()));
  }
  if (!options.clock) options.clock = SteadyNow;
  std::unique_ptr<LocalAdmission> admission(new LocalAdmission(options));
  if (options.tick_interval.count() > 0) {
    admission->timer_ = std::thread(
        [a = admission.get(), interval = options.tick_interval] { a->TimerLoop(interval); });
  }
  return admission;
}

LocalAdmission::LocalAdmission(const LocalAdmissionOptions& options)
    : options_(options.agentic),
      clock_(options.clock),
      coordinator_(control::CoordinatorParamsFrom(options.agentic)),
      instances_(TimeNs::Seconds(options.instance_timeout_s)),
      on_instance_expired_(options.on_instance_expired) {}

LocalAdmission::~LocalAdmission() {
  {
    sync::MutexLock lock(&timer_mu_);
    timer_stop_ = true;
  }
  timer_wake_.SignalAll();
  if (timer_.joinable()) timer_.join();
  Shutdown();
}

void LocalAdmission::Shutdown() {
  {
    sync::MutexLock lock(&timer_mu_);
    timer_stop_ = true;
  }
  timer_wake_.SignalAll();
  {
    sync::MutexLock lock(&mu_);
    if (!shut_down_) {
      shut_down_ = true;
      coordinator_.Shutdown();
      CollectResolvedLocked();
    }
  }
  Deliver();
}

void LocalAdmission::TimerLoop(std::chrono::milliseconds interval) {
  sync::ReleasableMutexLock lock(&timer_mu_);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + interval;
    while (!timer_stop_) {
      if (timer_wake_.WaitWithDeadline(&timer_mu_, deadline)) break;
    }
    if (timer_stop_) return;
    lock.Unlock();
    Tick();
    lock.Lock();
  }
}

void LocalAdmission::Acquire(control::AcquireRequest request, AcquireCallback done) {
  control::AcquireRequest fallback{request.ticket, request.reservation_tokens, false};
  AcquireWithStatus(std::move(request), [done = std::move(done), fallback = std::move(fallback)](
                                            StatusOr<AdmissionDecision> result) {
    if (result.ok()) return done(*result);
    done(DegradedBypass(fallback));
  });
}

void LocalAdmission::AcquireWithStatus(control::AcquireRequest request, ResultCallback done,
                                       const std::string& instance) {
  std::optional<StatusOr<AdmissionDecision>> immediate;
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) {
      immediate.emplace(DegradedBypass(request));
    } else {
      const TimeNs now = clock_();
      if (!instance.empty()) instances_.Own(instance, request.ticket, now);
      StatusOr<AdmissionDecision> result = coordinator_.Acquire(request, now);
      if (result.ok() && result->action == AdmissionAction::kWait) {
        waiting_callbacks_[request.ticket].push_back(std::move(done));
      } else {
        // Answered without a lease: nothing of it is left to end.
        if (!result.ok() || !result->lease_id.has_value()) instances_.Forget(request.ticket);
        immediate.emplace(std::move(result));
      }
      CollectResolvedLocked();
    }
  }
  if (immediate.has_value()) done(*std::move(immediate));
  Deliver();
}

void LocalAdmission::Heartbeat(const std::string& instance) {
  sync::MutexLock lock(&mu_);
  if (shut_down_ || instance.empty()) return;
  instances_.Touch(instance, clock_());
}

void LocalAdmission::Release(const std::string& lease_id) {
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) return;
    coordinator_.Release(lease_id, clock_());
    CollectResolvedLocked();
  }
  Deliver();
}

void LocalAdmission::Cancel(const std::string& ticket) {
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) return;
    coordinator_.Cancel(ticket, clock_());
    instances_.Forget(ticket);
    CollectResolvedLocked();
  }
  Deliver();
}

void LocalAdmission::Reconcile(std::span<const control::EngineSnapshot> snapshots) {
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) return;
    coordinator_.Reconcile(snapshots, clock_());
    CollectResolvedLocked();
  }
  Deliver();
}

void LocalAdmission::Tick() {
  std::vector<InstanceExpiry> expired;
  {
    sync::MutexLock lock(&mu_);
    if (shut_down_) return;
    const TimeNs now = clock_();
    coordinator_.Tick(now);
    for (control::SilentInstance& silent : instances_.TakeSilent(now)) {
      InstanceExpiry expiry{std::move(silent.instance), now - silent.last_seen,
                            coordinator_.ReleaseTickets(silent.tickets, now)};
      ++expiry_totals_.instances;
      expiry_totals_.leases += expiry.released.leases;
      expiry_totals_.tokens += expiry.released.tokens;
      expiry_totals_.waiters += expiry.released.waiters;
      expired.push_back(std::move(expiry));
    }
    // Tickets released or reclaimed without the registry hearing of it are dropped once per
    // timeout, which bounds the registry by the tickets of about one timeout.
    if (!last_prune_.has_value() || now - *last_prune_ >= instances_.timeout()) {
      // The predicate runs here, under mu_; a pointer, because the analysis cannot see into
      // the lambda that a held lock covers it.
      const control::AdmissionCoordinator* coordinator = &coordinator_;
      instances_.PruneTickets(
          [coordinator](const std::string& ticket) { return coordinator->Holds(ticket); });
      last_prune_ = now;
    }
    CollectResolvedLocked();
  }
  Deliver();
  if (on_instance_expired_) {
    for (const InstanceExpiry& expiry : expired) on_instance_expired_(expiry);
  }
}

void LocalAdmission::CountSessionClose(bool ok) {
  sync::MutexLock lock(&mu_);
  ++session_close_;
  if (!ok) ++session_close_failure_;
}

std::vector<std::pair<std::string, double>> LocalAdmission::StepMetrics(bool reset_step) {
  sync::MutexLock lock(&mu_);
  const control::BudgetSnapshot s = coordinator_.ledger().Snapshot(clock_(), reset_step);
  const control::BudgetView view{
      s.epoch,       s.capacity,      s.reserved_tokens, s.available_tokens,
      s.lease_count, s.kv_usage_mean, s.kv_usage_max,    s.degraded};
  const control::AdmissionCounters counters = StepCountersLocked();
  std::vector<std::pair<std::string, double>> metrics =
      control::AgenticKvMetrics(options_, counters, coordinator_.waiting(), view);
  if (reset_step) {
    earlier_steps_ += counters;
    coordinator_.ResetCounters();
    session_close_ = 0;
    session_close_failure_ = 0;
  }
  return metrics;
}

std::optional<control::AdmissionCounters> LocalAdmission::TotalCounters() const {
  sync::MutexLock lock(&mu_);
  control::AdmissionCounters total = earlier_steps_;
  total += StepCountersLocked();
  return total;
}

control::AdmissionCounters LocalAdmission::StepCountersLocked() const {
  control::AdmissionCounters counters = coordinator_.counters();
  counters.session_close += session_close_;
  counters.session_close_failure += session_close_failure_;
  return counters;
}

void LocalAdmission::CollectResolvedLocked() {
  for (AdmissionDecision& decision : coordinator_.TakeResolved()) {
    if (!decision.lease_id.has_value()) instances_.Forget(decision.ticket);
    auto it = waiting_callbacks_.find(decision.ticket);
    if (it == waiting_callbacks_.end()) continue;  // Answered at once by its own Acquire.
    Delivery delivery{std::move(decision), std::move(it->second)};
    waiting_callbacks_.erase(it);
    deliveries_.push_back(std::move(delivery));
  }
}

void LocalAdmission::Deliver() {
  sync::ReleasableMutexLock lock(&mu_);
  if (delivering_) return;  // That thread delivers ours too, in order.
  delivering_ = true;
  while (!deliveries_.empty()) {
    Delivery delivery = std::move(deliveries_.front());
    deliveries_.pop_front();
    lock.Unlock();
    for (ResultCallback& callback : delivery.callbacks) callback(delivery.decision);
    lock.Lock();
  }
  delivering_ = false;
}

int64_t LocalAdmission::reserved() const {
  sync::MutexLock lock(&mu_);
  return coordinator_.ledger().reserved();
}

int64_t LocalAdmission::waiting() const {
  sync::MutexLock lock(&mu_);
  return coordinator_.waiting();
}

int64_t LocalAdmission::lease_count() const {
  sync::MutexLock lock(&mu_);
  return coordinator_.ledger().lease_count();
}

bool LocalAdmission::degraded() const {
  sync::MutexLock lock(&mu_);
  return coordinator_.ledger().IsStale(clock_());
}

int64_t LocalAdmission::instances() const {
  sync::MutexLock lock(&mu_);
  return instances_.instances();
}

InstanceExpiryTotals LocalAdmission::instance_expiry_totals() const {
  sync::MutexLock lock(&mu_);
  return expiry_totals_;
}

Status LocalAdmission::CheckInvariants() const {
  sync::MutexLock lock(&mu_);
  AGENTKV_RETURN_IF_ERROR(coordinator_.CheckInvariants());
  AGENTKV_RETURN_IF_ERROR(instances_.CheckInvariants());
  if (static_cast<int64_t>(waiting_callbacks_.size()) != coordinator_.waiting()) {
    return InternalError(std::to_string(waiting_callbacks_.size()) +
                         " tickets hold callbacks but the coordinator has " +
                         std::to_string(coordinator_.waiting()) + " waiters");
  }
  for (const auto& [ticket, callbacks] : waiting_callbacks_) {
    if (callbacks.empty()) return InternalError("waiting ticket " + ticket + " has no callback");
  }
  if (coordinator_.ledger().reserved() < 0) return InternalError("negative reservation");
  return Status::Ok();
}

}  // namespace agentkv::service
