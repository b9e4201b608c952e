// AdmissionBackend: how the gateway asks for program-aware admission, whether the coordinator
// runs in the same process (LocalAdmission, admission_local.h) or behind `agentkv coordinator`
// over HTTP (RemoteAdmission, admission_remote.h). Both wrap the pure
// control::AdmissionCoordinator (seed 000): one global FIFO, one token ledger, leases held for
// one backend attempt.
//
// Contract shared by every implementation:
// - Acquire's `done` runs exactly once, on any thread, with the final decision: kAdmit (with a
//   lease) or kBypass (with its reason); never kWait (waiting happens inside). An error of the
//   backend itself (a coordinator that cannot be reached) is reported as kBypass `degraded`:
//   admission fails open.
// - Release and Cancel are idempotent and fire-and-forget; Cancel of a waiting ticket makes its
//   pending Acquire finish with kBypass `cancelled`.
// - Thread-safe. The backend must outlive every pending Acquire (its destructor resolves them
//   as kBypass `degraded`).
#ifndef AGENTKV_SERVICE_ADMISSION_ADMISSION_BACKEND_H_
#define AGENTKV_SERVICE_ADMISSION_ADMISSION_BACKEND_H_

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/engine_gauges.h"

namespace agentkv::service {

// Calls to a remote coordinator that failed (transport error, timeout, non-200 answer,
// unreadable body) since start, by operation. All zero for an in-process backend.
struct AdmissionBackendFailures {
  int64_t acquire = 0;
  int64_t release = 0;
  int64_t cancel = 0;
  int64_t metrics = 0;
  int64_t heartbeat = 0;

  int64_t total() const { return acquire + release + cancel + metrics + heartbeat; }

  friend bool operator==(const AdmissionBackendFailures&,
                         const AdmissionBackendFailures&) = default;
};

// The circuit breaker in front of a remote coordinator (RemoteAdmission): whether it is open
// now, how often it opened, and the acquires it answered `degraded` without asking. All zero
// for an in-process backend.
struct CoordinatorBreakerState {
  bool open = false;
  int64_t opens = 0;
  int64_t bypassed = 0;

  friend bool operator==(const CoordinatorBreakerState&, const CoordinatorBreakerState&) = default;
};

class AdmissionBackend {
 public:
  using AcquireCallback = std::function<void(const control::AdmissionDecision& decision)>;

  virtual ~AdmissionBackend() = default;

  // Asks to admit `request` (ticket = the attempt's rid); `done` runs once with the final
  // decision (see above).
  virtual void Acquire(control::AcquireRequest request, AcquireCallback done) = 0;
  // Returns a lease (idempotent).
  virtual void Release(const std::string& lease_id) = 0;
  // Cancels a ticket: a waiter resolves kBypass `cancelled`, a granted lease is returned.
  virtual void Cancel(const std::string& ticket) = 0;
  // A poll of the fleet (local backends only; remote ones ignore it: the coordinator polls).
  virtual void Reconcile(std::span<const control::EngineSnapshot> snapshots) = 0;
  // The seed's agentic_kv/ series now; with `reset_step`, counters restart after reading
  // (per-step drain semantics for trackers).
  virtual std::vector<std::pair<std::string, double>> StepMetrics(bool reset_step) = 0;
  // The same counts since start, never reset by a step (what /metrics exports as `_total`
  // counters), or nullopt when the decisions are made elsewhere: a remote coordinator exports
  // its own, and a client repeating them would count them twice in a fleet-wide sum.
  virtual std::optional<control::AdmissionCounters> TotalCounters() const { return std::nullopt; }
  // Failed calls to a remote coordinator so far (zeros for an in-process backend).
  virtual AdmissionBackendFailures failures() const { return {}; }
  // The remote coordinator's circuit breaker (all zero for an in-process backend).
  virtual CoordinatorBreakerState breaker() const { return {}; }
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_ADMISSION_BACKEND_H_
