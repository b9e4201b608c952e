// SessionManager: the gateway's thread-safe driver of control::GatewayFlow, the pure state
// machine of its sessions and backend attempts (seed 000's session KV lifecycle as Relax's
// `_finish_session_once` does it, plus the attempt side of admission). The simulator drives
// the same flow on its event loop (sim::GatewayModel), so what is replayed is what is served.
//
// Every request the gateway forwards is one backend attempt with a unique rid
// "{request_id}:{n}". When a session ends (the client's POST /v1/sessions/{id}/close, the idle
// timeout, or eviction at --max-sessions; a session a request marked retained only by the
// close), the flow cancels attempts still waiting for
// admission, aborts dispatched ones on every engine, waits until their upstream responses end
// (bounded by the drain timeout), then closes the session on every engine once. This class
// holds the flow under one mutex, turns steady-clock times into TimeNs, keeps the callbacks
// of close requests, and performs the flow's actions through SessionEffects after the lock is
// released (effects may call back into the manager at once). The network is behind
// SessionEffects, so the whole protocol runs in unit tests without sockets.
//
// Thread-safe: one mutex guards the flow; it is never held while an effect runs or a callback
// is called.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_SESSIONS_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_SESSIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/gateway_flow.h"
#include "agentkv/control/session_lifecycle.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

using SteadyTime = std::chrono::steady_clock::time_point;

// What the manager asks of the fleet. The gateway implements it over HTTP; tests with a fake.
// Methods may be called from any thread and must not block.
class SessionEffects {
 public:
  virtual ~SessionEffects() = default;
  // An attempt that never reached an engine was cancelled by a close: stop its admission wait
  // (the gateway calls AdmissionBackend::Cancel). The attempt still reports Finish later.
  virtual void CancelQueuedAttempt(const std::string& rid) = 0;
  // POST {"rid": rid} to /abort_request on every engine base URL; fire and forget.
  virtual void AbortOnEveryEngine(const std::string& rid) = 0;
  // POST {"session_id": id} to /close_session on every engine base URL under the close
  // timeout; `done` runs once, on any thread, with whether every engine answered 2xx (false
  // when there is no engine).
  virtual void CloseOnEveryEngine(const std::string& session_id,
                                  std::function<void(bool ok)> done) = 0;
  // An attempt that held an admission lease ended: return the lease (AdmissionBackend::
  // Release). Default: nothing (no admission).
  virtual void ReturnLease(const std::string& lease_id) { (void)lease_id; }
  // A parent's return is due (control::DeliverParentReturn): POST {"parent_session_id": parent}
  // to /demote_finished_subagents on every engine base URL; fire and forget. Default: nothing
  // (sub-agent demotion off).
  virtual void DeliverParentReturn(const std::string& parent) { (void)parent; }
};

// The answer of a close request.
struct SessionCloseResult {
  std::string session_id;
  // The close succeeded on every engine (true with the lifecycle off: nothing to close).
  bool closed = false;
  // In-flight attempts aborted by this termination.
  int64_t aborted = 0;

  friend bool operator==(const SessionCloseResult&, const SessionCloseResult&) = default;
};

struct SessionManagerOptions {
  // --agentic-session-lifecycle: attempts carry session_id and ended sessions are closed on
  // every engine. Off, sessions are still tracked so that a close aborts their requests.
  bool lifecycle = false;
  // Idle sessions end after this; zero disables.
  std::chrono::steady_clock::duration idle_timeout = std::chrono::seconds(900);
  // A closing session waits at most this long for its aborted attempts.
  std::chrono::steady_clock::duration drain_timeout = std::chrono::seconds(30);
  // Ended sessions remembered for idempotent closes. Range: >= 1.
  int64_t max_closed_sessions = 8192;
  // Active sessions (accepting attempts), at most. Opening one more first ends the session
  // idle the longest (no attempt in flight, not retained), as the idle timeout would; when none
  // is idle the new session is refused. Range: >= 1.
  int64_t max_sessions = 100'000;
  // Retained sessions at most (control::GatewayFlowOptions::max_retained_sessions). Default:
  // unset, max_sessions / 2. Range: [0, max_sessions] when set.
  std::optional<int64_t> max_retained_sessions;
  // --agentic-subagent-demotion: a parent's first request after a request named it as parent
  // (AttemptSpec::parent) delivers its return to every engine, once per return
  // (control::ParentReturnDelivery::kOncePerReturn). Default: false.
  bool subagent_demotion = false;
  // Called once per close fan-out outcome (any thread, no lock held).
  std::function<void(const std::string& session_id, bool ok)> on_close_outcome;
};

class SessionManager {
 public:
  // `effects` must outlive the manager.
  SessionManager(SessionManagerOptions options, SessionEffects* effects);
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // Registers a new attempt of `request_id` (in `session_id` when set; a session is opened on
  // its first attempt, and an ended one is opened again as a new incarnation) and returns its
  // rid: FormatAttemptRid(request_id, n) with the lowest n not used by a live attempt or by
  // the session's remembered attempts. `spec` says whether it waits for admission first,
  // whether it streams, whether it sets or clears its session's retention and which session
  // it names as its parent (with subagent_demotion, a parent's return is then delivered
  // through SessionEffects::DeliverParentReturn before this returns).
  // FailedPrecondition while the session is closing; ResourceExhausted, counted in
  // retain_refused(), when spec.retain would retain more than max_retained_sessions sessions.
  // Opening a session at max_sessions ends the longest-idle unretained one (counted in
  // evicted()); Unavailable, counted in refused(), when every active session has work in flight
  // or is retained. InvalidArgument for spec.retain = true without a session.
  [[nodiscard]] StatusOr<std::string> BeginAttempt(const std::optional<std::string>& session_id,
                                                   std::string_view request_id, SteadyTime now,
                                                   control::AttemptSpec<std::string> spec = {});

  // Whether an attempt in `session_id` would open a session (a new one, or a new incarnation
  // of an ended one); false without a session. A concurrent BeginAttempt may open it first.
  [[nodiscard]] bool WouldOpen(const std::optional<std::string>& session_id) const;

  // What the session dispatched before in its current incarnation (admission v2's held prefix
  // and program order); a default SessionHistory without a session or for an unknown one.
  [[nodiscard]] control::SessionHistory History(const std::optional<std::string>& session_id) const;

  // Program-level FCFS: the arrival of live attempt `rid`'s program
  // (control::GatewayFlow::ProgramArrival): its `parent` session's incarnation when the parent
  // is active, else the attempt's own program. nullopt for an unknown rid.
  [[nodiscard]] std::optional<uint64_t> ProgramArrival(
      std::string_view rid, const std::optional<std::string>& parent) const;

  // The admission decision of an attempt begun with awaits_admission arrived: what to do with
  // it (control::GatewayFlow::OnAdmission). The attempt keeps the decision's lease until Finish
  // returns it through SessionEffects::ReturnLease.
  [[nodiscard]] StatusOr<control::AdmissionVerdict> OnAdmission(
      std::string_view rid, const control::AdmissionDecision& decision);

  // Marks the attempt as posted and returns the identity fields of its body (session_id only
  // with the lifecycle on). FailedPrecondition when a close cancelled it or its client left
  // meanwhile: do not post. NotFound for an unknown rid.
  [[nodiscard]] StatusOr<control::GenerateIdentity> Dispatch(std::string_view rid);

  // The attempt's client left. Returns what the caller must do for that attempt, in order:
  // CancelAttempt (its admission wait), AbortOnEveryEngine, CutUpstream (its upstream call).
  [[nodiscard]] std::vector<control::FlowAction<std::string>> ClientGone(std::string_view rid);

  // The attempt ended, however (answered, failed, cancelled, never dispatched). Idempotent.
  void Finish(std::string_view rid, SteadyTime now);

  // Ends the session and closes it on every engine; `done` runs once with the outcome (on this
  // thread when nothing is in flight and the close effect answers at once, else later on the
  // thread that completes it). An unknown session is registered and closed (a gateway restart
  // forgets sessions the engines still hold); an ended one answers its remembered outcome.
  void Close(const std::string& session_id, control::TerminalReason reason, SteadyTime now,
             std::function<void(SessionCloseResult)> done);

  // Ends sessions idle past the idle timeout and closes draining sessions whose drain timeout
  // passed. Returns how many sessions it acted on.
  int64_t Sweep(SteadyTime now);

  control::SessionLifecycleCounters counters() const;
  // Sessions accepting attempts.
  int64_t active_sessions() const;
  // Active sessions marked retained.
  int64_t retained_sessions() const;
  // Attempts begun and not finished, with or without a session.
  int64_t live_attempts() const;
  // Sessions ended early to make room under max_sessions, and new sessions refused because
  // none could be, since start.
  int64_t evicted() const;
  int64_t refused() const;
  // Retention marks refused at max_retained_sessions, since start.
  int64_t retain_refused() const;
  // The rids of live attempts, sorted (for shutdown and tests).
  std::vector<std::string> live_rids() const;

  // Aborts with a message when the registry disagrees with the planner. For tests.
  void CheckInvariants() const;

 private:
  // Work decided under the lock and done after it is released.
  struct Pending {
    std::vector<control::FlowAction<std::string>> actions;
    // The callbacks of the AnswerClose actions, taken under the lock.
    std::map<uint64_t, std::function<void(SessionCloseResult)>> answers;
  };

  // Takes the flow's actions and the callbacks they answer.
  void CollectLocked(Pending& pending) AGENTKV_REQUIRES(mu_);
  void Run(Pending pending);
  void OnCloseDone(const std::string& session_id, bool ok);

  const SessionManagerOptions options_;
  SessionEffects* const effects_;

  mutable sync::Mutex mu_;
  control::GatewayFlow<std::string> flow_ AGENTKV_GUARDED_BY(mu_);
  // Close requests waiting for their answer, by the number given to the flow.
  std::map<uint64_t, std::function<void(SessionCloseResult)>> close_waiters_
      AGENTKV_GUARDED_BY(mu_);
  uint64_t next_close_request_ AGENTKV_GUARDED_BY(mu_) = 1;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_SESSIONS_H_
