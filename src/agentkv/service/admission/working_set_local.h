// LocalWorkingSet: program-level working-set admission in this process, the pure
// control::WorkingSetAdmission behind one mutex, with callbacks for waits.
//
// The gateway (--agentic-working-set) and the coordinator (POST /admission/program/*) both
// drive one of these. It reads time from an injected clock and turns the working set's kFull
// answers into callbacks: a waiting Acquire's `done` is stored by ticket and runs when a later
// Finish, Cancel, EndAgent, Reconcile or Tick resolves it. A small timer thread calls Tick at
// the working set's NextDeadline (a hold's end, a waiter's aging), woken whenever a call may
// have moved that deadline earlier. Reconcile is fed by whoever polls the fleet.
//
// Callbacks never run under the mutex; resolved waiters are delivered by one thread at a time
// in resolution order, and a callback may call back into LocalWorkingSet. Thread-safe. Owns its
// timer thread; not copyable. Shutdown (also run by the destructor) cancels every waiter
// (kCancelled) before returning.
#ifndef AGENTKV_SERVICE_ADMISSION_WORKING_SET_LOCAL_H_
#define AGENTKV_SERVICE_ADMISSION_WORKING_SET_LOCAL_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/control/working_set.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

struct LocalWorkingSetOptions {
  // The working set's options (tools/agentkv/working_set_flags.h parses them).
  control::WorkingSetOptions working_set;
  // Start the timer thread that ticks at the working set's deadlines; false: tests call Tick.
  // Default: true.
  bool timer = true;
  // The time source. Default (empty): std::chrono::steady_clock.
  std::function<TimeNs()> clock;
};

class LocalWorkingSet {
 public:
  using Callback = std::function<void(const control::WorkingSetDecision& decision)>;

  // InvalidArgument naming the first bad option (WorkingSetOptions::Validate); starts the timer.
  static StatusOr<std::unique_ptr<LocalWorkingSet>> Create(LocalWorkingSetOptions options);

  LocalWorkingSet(const LocalWorkingSet&) = delete;
  LocalWorkingSet& operator=(const LocalWorkingSet&) = delete;
  // Shutdown, then joins the timer.
  ~LocalWorkingSet();

  // Asks to admit `request`. OK: `done` runs exactly once with the final decision, admitted
  // (at once, on this thread, or later when the waiter is resolved) or kCancelled (Cancel,
  // EndAgent of its agent, Shutdown). Not OK (InvalidArgument for a bad field or an agent named
  // with another program, AlreadyExists for a live ticket): `done` never runs and nothing
  // changed. After Shutdown every request is admitted `no_capacity` at once, untracked.
  [[nodiscard]] Status Acquire(const control::ProgramRequest& request, Callback done);

  // Cancels a waiting ticket (its `done` runs with kCancelled). Returns whether it was waiting;
  // an admitted or unknown ticket is left alone (Finish it instead).
  bool Cancel(const std::string& ticket);

  // The admitted request `ticket` ended (control::WorkingSetAdmission::Finish): its agent holds
  // `end.context_tokens` for the predicted pause. A waiting ticket is cancelled; unknown: no-op.
  void Finish(const std::string& ticket, const control::RequestEnd& end);

  // The agent ended (its session closed): its hold is released, its waiters cancelled.
  void EndAgent(const std::string& agent);

  // A poll of the fleet: the engines' capacities.
  void Reconcile(std::span<const control::EngineSnapshot> snapshots);

  // Ends holds past their prediction and admits waiters that fit or aged, at the clock's now
  // (the timer calls it at each deadline).
  void Tick();

  // Stops the timer and cancels every waiter. Idempotent; may be called from a callback.
  void Shutdown();

  // Whether `ticket` waits now.
  bool Waiting(const std::string& ticket) const;
  control::WorkingSetGauges Gauges() const;
  control::WorkingSetCounters Counters() const;
  // The working set's invariants, and that the stored callbacks are exactly its waiters.
  Status CheckInvariants() const;

 private:
  explicit LocalWorkingSet(const LocalWorkingSetOptions& options);

  // Moves the working set's resolved waiters and their callbacks into deliveries_.
  void CollectResolvedLocked() AGENTKV_REQUIRES(mu_);
  // Runs queued deliveries unless another thread is already doing so. Must not hold mu_.
  void Deliver();
  void TimerLoop();
  void WakeTimer();

  struct Delivery {
    control::WorkingSetDecision decision;
    Callback callback;
  };

  std::function<TimeNs()> clock_;

  mutable sync::Mutex mu_;
  control::WorkingSetAdmission working_set_ AGENTKV_GUARDED_BY(mu_);
  std::map<std::string, Callback, std::less<>> waiting_ AGENTKV_GUARDED_BY(mu_);
  std::deque<Delivery> deliveries_ AGENTKV_GUARDED_BY(mu_);
  bool delivering_ AGENTKV_GUARDED_BY(mu_) = false;
  bool shut_down_ AGENTKV_GUARDED_BY(mu_) = false;

  sync::Mutex timer_mu_;
  sync::CondVar timer_wake_;
  bool timer_stop_ AGENTKV_GUARDED_BY(timer_mu_) = false;
  // Bumped by every call that may move the next deadline earlier.
  uint64_t timer_generation_ AGENTKV_GUARDED_BY(timer_mu_) = 0;
  std::thread timer_;
};

// The working set's Prometheus families (docs/GATEWAY.md, "Working-set admission"), as the
// gateway and the coordinator both export them: the gauges
// agentic_kv_working_set_{held_tokens, active_tokens, live_programs, waiting_programs,
// capacity_tokens}, and the counters agentic_kv_working_set_admitted_total{reason},
// _waits_total, _cancelled_total and _holds_total{end} (returned, expired, ended).
std::vector<protocol::MetricFamily> WorkingSetFamilies(const control::WorkingSetGauges& gauges,
                                                       const control::WorkingSetCounters& counters);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_WORKING_SET_LOCAL_H_
