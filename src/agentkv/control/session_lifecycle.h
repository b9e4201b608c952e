// SessionLifecyclePlanner: when a session ends, release its KV on every engine (seed 000's
// session KV lifecycle, Relax's `_finish_session_once`).
//
// The planner keeps a registry of sessions (keyed by the client's session id string) and of
// their backend attempts, each with a unique rid "{request}:{attempt}" that doubles as the
// admission ticket. When a session becomes terminal (finished, discarded, failed) or is dropped
// at step end, it cancels attempts that never reached an engine, asks for an abort of each
// dispatched one, waits until every dispatched attempt is reported finished, and then asks for
// exactly one close of the session (only when `agentic_session_lifecycle` is on). Close is
// fail-open: its outcome is counted but never blocks the terminal state. Sessions marked
// keep-alive (partial rollout, fully async retention) survive step end unclosed.
//
// The planner does no I/O: it emits LifecycleActions as values (TakeActions) and consumes their
// outcomes through methods. Targets are engine-independent; fanning an abort or a close out to
// every engine is the caller's job, and CloseSucceededOnEveryEngine aggregates the per-engine
// results. Pure and deterministic. Thread-compatible: const methods may run concurrently;
// mutation needs external synchronization (the gateway's session strand).
#ifndef AGENTKV_CONTROL_SESSION_LIFECYCLE_H_
#define AGENTKV_CONTROL_SESSION_LIFECYCLE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::control {

// The unique backend request id of attempt `attempt` of request `request_id`:
// "{request_id}:{attempt}", e.g. "request-1:0". It is both the generate `rid` and the
// admission ticket. Precondition: attempt >= 0.
std::string FormatAttemptRid(std::string_view request_id, int64_t attempt);

// Where one backend attempt stands.
enum class AttemptState : uint8_t {
  // Created but not yet posted to an engine; termination cancels it locally.
  kQueued,
  // Posted to an engine (generate is in flight); termination aborts it on every engine.
  kDispatched,
  // Reported finished (completed, aborted, failed or joined). Terminal.
  kFinished,
  // Cancelled by termination before it was dispatched. Terminal.
  kCancelled,
};

// "queued", "dispatched", "finished", "cancelled".
std::string_view AttemptStateName(AttemptState state);

// Where one session stands.
enum class SessionPhase : uint8_t {
  // Accepting attempts.
  kActive,
  // Terminating: aborts were requested; waiting for dispatched attempts to finish.
  kDraining,
  // Terminating: one close was emitted; waiting for its outcome.
  kClosing,
  // Logically ended. A close failure still ends here.
  kTerminal,
};

// "active", "draining", "closing", "terminal".
std::string_view SessionPhaseName(SessionPhase phase);

// Why a session is being terminated.
enum class TerminalReason : uint8_t {
  kFinished,
  kDiscarded,
  kFailed,
  // Ended by the rollout step without keep-alive.
  kDropped,
};

// "finished", "discarded", "failed", "dropped".
std::string_view TerminalReasonName(TerminalReason reason);

// Cancel the local runner of an attempt that never reached an engine (no engine is told).
struct CancelAttemptAction {
  std::string session_id;
  std::string rid;
  friend bool operator==(const CancelAttemptAction&, const CancelAttemptAction&) = default;
};

// Post {"rid": rid} to /abort_request on every engine; report the attempt with MarkFinished
// (or OnAbortsJoined) once its runner has ended.
struct AbortRequestAction {
  std::string session_id;
  std::string rid;
  friend bool operator==(const AbortRequestAction&, const AbortRequestAction&) = default;
};

// Post {"session_id": session_id} to /close_session on every engine; report the aggregate with
// OnCloseOutcome.
struct CloseSessionAction {
  std::string session_id;
  friend bool operator==(const CloseSessionAction&, const CloseSessionAction&) = default;
};

using LifecycleAction = std::variant<CancelAttemptAction, AbortRequestAction, CloseSessionAction>;

// The identity fields of a generate payload for one attempt.
struct GenerateIdentity {
  std::string rid;
  // The session's id, present only when the lifecycle is enabled (the engine then tracks the
  // session's KV so a later close can release it).
  std::optional<std::string> session_id;
  friend bool operator==(const GenerateIdentity&, const GenerateIdentity&) = default;
};

// Whether a close fanned out to every engine succeeded: true only if there was at least one
// engine and every engine's post returned OK (Relax's close_session returns false on any
// exception or the timeout; an empty worker list is an error there too).
bool CloseSucceededOnEveryEngine(std::span<const Status> per_engine_results);

// What terminating a session would do, computed by PlanTermination without mutation.
struct TerminationPlan {
  std::string session_id;
  TerminalReason reason = TerminalReason::kFinished;
  // True when the session is already terminating or terminal: applying does nothing.
  bool already_terminating = false;
  // Attempts to cancel locally (queued), then to abort on every engine (dispatched), in the
  // order they began.
  std::vector<std::string> cancel_rids;
  std::vector<std::string> abort_rids;
  // True when no attempt is in flight, so the close (lifecycle on) or the terminal state
  // (lifecycle off) follows immediately.
  bool close_immediately = false;
  // The session's revision when planned; ApplyTermination refuses a stale plan.
  uint64_t revision = 0;
};

// Close counters as the agentic_kv/session/ metrics report them.
struct SessionLifecycleCounters {
  // Close outcomes consumed (agentic_kv/session/close). Counted only when a close was emitted,
  // so always 0 with the lifecycle off.
  int64_t close = 0;
  // Close outcomes that failed (agentic_kv/session/close_failure).
  int64_t close_failure = 0;
  // Sessions that reached kTerminal.
  int64_t terminated = 0;
  friend bool operator==(const SessionLifecycleCounters&,
                         const SessionLifecycleCounters&) = default;
};

// An active session remembers at most this many ended (finished or cancelled) attempts: older
// ones are forgotten, oldest first, so that a session that lives for millions of requests
// holds memory for its live attempts plus this many. A forgotten rid may be begun again.
inline constexpr int64_t kMaxEndedAttemptsPerSession = 1024;

struct SessionLifecycleOptions {
  // The seed's --agentic-session-lifecycle: send session_id on generate and close sessions when
  // they end. Default: false.
  bool agentic_session_lifecycle = false;
};

class SessionLifecyclePlanner {
 public:
  explicit SessionLifecyclePlanner(SessionLifecycleOptions options = {});
  SessionLifecyclePlanner(const SessionLifecyclePlanner&) = delete;
  SessionLifecyclePlanner& operator=(const SessionLifecyclePlanner&) = delete;

  bool lifecycle_enabled() const { return options_.agentic_session_lifecycle; }
  // Whether a generate payload carries `session_id`: exactly when the lifecycle is enabled.
  bool generate_carries_session_id() const { return lifecycle_enabled(); }

  // --- Registry ---

  // Registers an active session. InvalidArgument for an empty id; AlreadyExists if the id is
  // registered (in any phase, until ForgetSession).
  [[nodiscard]] Status OpenSession(std::string_view session_id);

  // Marks whether the session survives step end unclosed (partial rollout, fully async
  // retention). NotFound for an unknown session. Allowed in any phase; it only affects EndStep.
  [[nodiscard]] Status SetKeepAlive(std::string_view session_id, bool keep_alive);

  // Removes a terminal session and its attempts from the registry (the teardown drops the
  // session record). NotFound for an unknown session; FailedPrecondition if not terminal.
  [[nodiscard]] Status ForgetSession(std::string_view session_id);

  // --- Attempts ---

  // Starts attempt `attempt` of request `request_id` in the session, queued, and returns its rid
  // (FormatAttemptRid). InvalidArgument for an empty request id or a negative attempt; NotFound
  // for an unknown session; FailedPrecondition unless the session is active; AlreadyExists if
  // the rid is live or among the session's remembered ended attempts.
  [[nodiscard]] StatusOr<std::string> BeginAttempt(std::string_view session_id,
                                                   std::string_view request_id, int64_t attempt);

  // Records that the attempt is about to be posted to an engine, and returns the identity fields
  // of its generate payload. This is the re-check under the session lock: FailedPrecondition if
  // the session is no longer active or the attempt is not queued (cancelled, finished or already
  // dispatched), in which case the caller must not post. NotFound for an unknown rid.
  [[nodiscard]] StatusOr<GenerateIdentity> MarkDispatched(std::string_view rid);

  // Records that the attempt's runner ended (completed, engine-aborted, failed, or never
  // dispatched). For a draining session, the last dispatched attempt to finish emits the close
  // (lifecycle on) or makes the session terminal (lifecycle off). Idempotent: an attempt already
  // finished or cancelled is unchanged. NotFound for an unknown rid (also one forgotten past
  // kMaxEndedAttemptsPerSession).
  [[nodiscard]] Status MarkFinished(std::string_view rid);

  // The identity fields of the generate payload for `rid` without changing state. NotFound for
  // an unknown rid.
  [[nodiscard]] StatusOr<GenerateIdentity> GenerateIdentityFor(std::string_view rid) const;

  // --- Termination ---

  // What Terminate would do. NotFound for an unknown session.
  [[nodiscard]] StatusOr<TerminationPlan> PlanTermination(std::string_view session_id,
                                                          TerminalReason reason) const;

  // Applies a plan from PlanTermination: cancels queued attempts, emits their cancel and the
  // dispatched attempts' abort actions, and, if nothing is in flight, emits the close or ends
  // the session. A plan with already_terminating set is a no-op. NotFound if the session was
  // forgotten; FailedPrecondition if the session changed since the plan (plan again).
  [[nodiscard]] Status ApplyTermination(const TerminationPlan& plan);

  // PlanTermination then ApplyTermination. Terminating a session that is already terminating
  // or terminal is a no-op returning OK, so the body runs once. NotFound for an unknown session.
  [[nodiscard]] Status Terminate(std::string_view session_id, TerminalReason reason);

  // Records that every runner of the draining session was joined: its dispatched attempts are
  // finished (as MarkFinished on each). NotFound for an unknown session; FailedPrecondition
  // unless the session is draining.
  [[nodiscard]] Status OnAbortsJoined(std::string_view session_id);

  // Consumes the aggregate outcome of the session's close (see CloseSucceededOnEveryEngine):
  // counts close, and close_failure when !succeeded; the session becomes terminal either way.
  // NotFound for an unknown session; FailedPrecondition unless a close is outstanding for it.
  [[nodiscard]] Status OnCloseOutcome(std::string_view session_id, bool succeeded);

  // --- Step end ---

  // The active sessions EndStep would drop: those not marked keep-alive, by session id.
  std::vector<std::string> PlanStepEnd() const;

  // Terminates every session from PlanStepEnd with kDropped; returns how many. Keep-alive
  // sessions stay active and are not closed.
  int64_t EndStep();

  // --- Outbox and queries ---

  // The actions emitted since the last call, in emission order; the outbox is then empty.
  [[nodiscard]] std::vector<LifecycleAction> TakeActions();
  int64_t pending_action_count() const { return static_cast<int64_t>(outbox_.size()); }

  // NotFound for an unknown session / rid.
  [[nodiscard]] StatusOr<SessionPhase> phase(std::string_view session_id) const;
  [[nodiscard]] StatusOr<AttemptState> attempt_state(std::string_view rid) const;
  // The reason the session was terminated; nullopt while active. NotFound if unknown.
  [[nodiscard]] StatusOr<std::optional<TerminalReason>> terminal_reason(
      std::string_view session_id) const;

  int64_t session_count() const { return static_cast<int64_t>(sessions_.size()); }
  // Attempts remembered over every session (live and ended).
  int64_t attempt_count() const { return static_cast<int64_t>(session_of_rid_.size()); }
  const SessionLifecycleCounters& counters() const { return counters_; }

  // Aborts with a message if an invariant of the .cc does not hold. For tests.
  void CheckInvariants() const;

 private:
  struct Attempt {
    std::string rid;
    AttemptState state = AttemptState::kQueued;
  };
  struct Session {
    SessionPhase phase = SessionPhase::kActive;
    bool keep_alive = false;
    std::optional<TerminalReason> reason;
    // Attempts in the order they began.
    std::vector<Attempt> attempts;
    // Dispatched attempts not yet finished.
    int64_t in_flight = 0;
    // Attempts finished or cancelled (still in `attempts`).
    int64_t ended = 0;
    // Bumped on every change to the session; guards ApplyTermination against stale plans.
    uint64_t revision = 0;
  };

  StatusOr<Session*> FindSession(std::string_view session_id);
  StatusOr<const Session*> FindSession(std::string_view session_id) const;
  // The session and attempt holding `rid`.
  StatusOr<std::pair<const std::string*, Attempt*>> FindAttempt(std::string_view rid);
  StatusOr<std::pair<const std::string*, const Attempt*>> FindAttempt(std::string_view rid) const;
  // Once nothing is in flight: emits the close (lifecycle on) or ends the session (off).
  void FinishDraining(const std::string& session_id, Session& session);
  void EndSession(Session& session);
  // In an active session past 2 x kMaxEndedAttemptsPerSession ended attempts, forgets the
  // oldest ended ones down to kMaxEndedAttemptsPerSession (amortized O(1) per attempt).
  void ForgetOldEndedAttempts(Session& session);

  SessionLifecycleOptions options_;
  // Ordered maps: iteration order (EndStep) must not depend on hashing.
  std::map<std::string, Session, std::less<>> sessions_;
  // rid -> session id.
  std::map<std::string, std::string, std::less<>> session_of_rid_;
  std::vector<LifecycleAction> outbox_;
  SessionLifecycleCounters counters_;
  // Close actions ever emitted, and terminal sessions removed by ForgetSession; both let
  // CheckInvariants reconcile the counters with the registry.
  int64_t closes_emitted_ = 0;
  int64_t forgotten_ = 0;
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_SESSION_LIFECYCLE_H_
