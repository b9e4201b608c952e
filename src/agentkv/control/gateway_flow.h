// GatewayFlow: the gateway's orchestration of sessions and backend attempts as one pure state
// machine (seed 000's session KV lifecycle and the attempt side of program-aware admission).
//
// One instance holds every session and every live attempt of a gateway. An attempt is one
// backend try of a client request, with a unique rid "{request_id}:{n}" (FormatAttemptRid) that
// is also its admission ticket. It goes admitting (waiting for an admission decision) -> ready
// -> dispatched -> finished; it may hold a lease from admit to finish. A session goes active ->
// draining (its queued attempts cancelled, its dispatched ones aborted on every engine, waiting
// for them to finish, at most drain_timeout) -> closing (one close on every engine, lifecycle
// on) -> terminal. Closing is fail-open and idempotent: a failed close still ends the session,
// and a close of an ended session answers its remembered outcome without a second fan-out. A
// request for an ended session starts a new incarnation of it. Sessions idle past
// idle_timeout end, and at max_sessions the longest-idle one makes room for a new one.
//
// Retention (seed 000: "partial rollout and fully async retention keep unfinished sessions
// alive across steps and therefore do not close their KV"): any attempt may mark its session
// retained or clear the mark (AttemptSpec::retain); the mark belongs to the incarnation, so a
// new incarnation starts unretained. A retained session is never ended for idleness nor
// evicted at max_sessions: only Close ends it. At most max_retained_sessions sessions are
// retained at once (a mark past the bound is refused, ResourceExhausted), so retained sessions
// never fill the whole session cap and idle unretained sessions can always make room.
//
// The flow does no I/O and reads no clock: every event takes `now` and the decisions come back
// as values, either as a method's result (an rid, an AdmissionVerdict, the identity of a
// dispatch) or as FlowActions in the outbox (TakeActions) for the caller to perform: cancel an
// admission wait, abort on every engine, cut an upstream call, return a lease, close on every
// engine, answer a close request, deliver a parent's return to every engine. The gateway
// (service/gateway*) performs them with async I/O; the simulator (sim::GatewayModel) on its
// event loop. Both run this code, drain, cancel and parent returns included.
//
// Parent returns (sub-agent demotion delivered, GatewayFlowOptions::parent_return): the flow
// remembers every session an attempt names as its parent (AttemptSpec::parent, a verified
// hint), at most max_sessions of them, oldest forgotten first. When such a parent begins an
// attempt, its return is due: the flow emits DeliverParentReturn, and each engine demotes the
// finished sub-agents of that parent it holds, wherever the router placed them.
//
// `Key` is how the driver names a session: the client's string (the gateway) or a SessionId
// (the simulator); the flow is instantiated for exactly these two. Deterministic: every
// iteration that orders actions runs over ordered maps. Thread-compatible: const methods may
// run concurrently; mutation needs external synchronization (the gateway's session mutex).
#ifndef AGENTKV_CONTROL_GATEWAY_FLOW_H_
#define AGENTKV_CONTROL_GATEWAY_FLOW_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/session_lifecycle.h"

namespace agentkv::control {

// When the flow delivers a returning parent's return to every engine (header comment).
enum class ParentReturnDelivery : uint8_t {
  // Never: sub-agent demotion is off, or each engine demotes a parent's finished sub-agents
  // only when the parent's own request reaches it.
  kOff,
  // Once per return: at the parent's first attempt after an attempt named it as parent. The
  // served gateway: one fan-out per return, not one per request of the parent. A sub-agent
  // still running at that delivery is demoted at the parent's next return after another hinted
  // attempt (marking the sub-agent's end instead would race with the client, which may send
  // the parent's turn before the gateway books the sub-agent's reply).
  kOncePerReturn,
  // At every attempt of a session once an attempt named it as parent. The simulator: as an
  // engine's own demotion runs at every admission of the parent, a sub-agent still running or
  // not idle long enough at one delivery is demoted at a later one.
  kEveryAttempt,
};

// "off", "once-per-return", "every-attempt".
std::string_view ParentReturnDeliveryName(ParentReturnDelivery delivery);

struct GatewayFlowOptions {
  // The seed's --agentic-session-lifecycle: dispatched attempts carry the session and ended
  // sessions are closed on every engine. Off, sessions are still tracked so that a close
  // cancels and aborts their attempts. Default: false.
  bool lifecycle = false;
  // An active session with no live attempt for this long ends (kDropped). Zero disables.
  // Default: 900 s. Range: >= 0.
  TimeNs idle_timeout = TimeNs::Seconds(900);
  // A draining session waits at most this long for its aborted attempts, then closes anyway.
  // Default: 30 s. Range: >= 0.
  TimeNs drain_timeout = TimeNs::Seconds(30);
  // Ended sessions remembered for idempotent closes (one more while the newest is being ended).
  // Default: 8192. Range: >= 1.
  int64_t max_closed_sessions = 8192;
  // Active sessions at most; one more ends the longest-idle unretained one first, or is
  // refused when every active session has a live attempt or is retained. Default: 100000.
  // Range: >= 1.
  int64_t max_sessions = 100'000;
  // Retained sessions (AttemptSpec::retain) at most; they count in max_sessions too. Default:
  // unset, meaning max_sessions / 2 (RetainedSessionBound). Range: [0, max_sessions] when set;
  // 0 refuses every retention.
  std::optional<int64_t> max_retained_sessions;
  // When a parent's return is delivered to every engine (DeliverParentReturn). Default: kOff.
  ParentReturnDelivery parent_return = ParentReturnDelivery::kOff;

  // max_retained_sessions, or max_sessions / 2 when unset.
  int64_t RetainedSessionBound() const;

  // InvalidArgument naming the first bad field.
  Status Validate() const;
};

// Where a live attempt stands.
enum class AttemptPhase : uint8_t {
  // Waiting for its admission decision (OnAdmission).
  kAdmitting,
  // Admitted, bypassed, or without admission: may be dispatched.
  kReady,
  // Posted to an engine; a close aborts it on every engine and waits for it.
  kDispatched,
};

// "admitting", "ready", "dispatched".
std::string_view AttemptPhaseName(AttemptPhase phase);

// What the driver does with an attempt once its admission decision arrived.
enum class AdmissionVerdict : uint8_t {
  // Dispatch it (Dispatch may still refuse if its session closed meanwhile).
  kDispatch,
  // Admission refused it (kRefuse, oversized): answer an error, do not dispatch.
  kRefused,
  // Its admission wait was cancelled (by a session close, whatever the decision, or by the
  // driver's shutdown).
  kCancelled,
  // Its client left while it waited: end it without an answer.
  kClientGone,
};

// "dispatch", "refused", "cancelled", "client_gone".
std::string_view AdmissionVerdictName(AdmissionVerdict verdict);

// --- Actions (the driver performs them in outbox order) ---

// An attempt that never reached an engine was cancelled by a close. When `awaiting_admission`,
// cancel its admission ticket; either way it reports Finish later (its Dispatch is refused).
struct CancelAttempt {
  std::string rid;
  bool awaiting_admission = false;
  friend bool operator==(const CancelAttempt&, const CancelAttempt&) = default;
};

// POST {"rid": rid} to /abort_request on every engine (fire and forget).
struct AbortOnEveryEngine {
  std::string rid;
  friend bool operator==(const AbortOnEveryEngine&, const AbortOnEveryEngine&) = default;
};

// The client of a dispatched attempt left: cut its upstream call now (the attempt then
// finishes, returning its lease, even if the engine hangs).
struct CutUpstream {
  std::string rid;
  friend bool operator==(const CutUpstream&, const CutUpstream&) = default;
};

// Return an admission lease.
struct ReturnLease {
  std::string lease_id;
  friend bool operator==(const ReturnLease&, const ReturnLease&) = default;
};

// POST {"session_id"} to /close_session on every engine; report with OnCloseOutcome.
template <typename Key>
struct CloseOnEveryEngine {
  Key session;
  friend bool operator==(const CloseOnEveryEngine&, const CloseOnEveryEngine&) = default;
};

// The outcome of a session close request.
template <typename Key>
struct CloseOutcome {
  Key session;
  // The close succeeded on every engine (true with the lifecycle off: nothing to close).
  bool closed = false;
  // Dispatched attempts aborted by this termination.
  int64_t aborted = 0;
  friend bool operator==(const CloseOutcome&, const CloseOutcome&) = default;
};

// Answer the close request the driver numbered `request` (Close's argument).
template <typename Key>
struct AnswerClose {
  uint64_t request = 0;
  CloseOutcome<Key> outcome;
  friend bool operator==(const AnswerClose&, const AnswerClose&) = default;
};

// A parent's return is due (GatewayFlowOptions::parent_return): POST {"parent_session_id":
// parent} to /demote_finished_subagents on every engine (fire and forget); each engine demotes
// the finished sub-agents of `parent` it holds.
template <typename Key>
struct DeliverParentReturn {
  Key parent;
  friend bool operator==(const DeliverParentReturn&, const DeliverParentReturn&) = default;
};

template <typename Key>
using FlowAction =
    std::variant<CancelAttempt, AbortOnEveryEngine, CutUpstream, ReturnLease,
                 CloseOnEveryEngine<Key>, AnswerClose<Key>, DeliverParentReturn<Key>>;

// What the driver needs to post a dispatched attempt.
template <typename Key>
struct DispatchIdentity {
  std::string rid;
  // The session, only with the lifecycle on (the engine then tracks the session's KV).
  std::optional<Key> session;
  friend bool operator==(const DispatchIdentity&, const DispatchIdentity&) = default;
};

// How an attempt is to be served.
template <typename Key>
struct AttemptSpec {
  // It asks for admission first (admission on and in scope): it starts kAdmitting.
  bool awaits_admission = false;
  // Streamed: a client that leaves cuts the stream, which the engine sees and aborts itself;
  // a non-streamed attempt is also aborted on every engine.
  bool streamed = false;
  // The attempt's prompt tokens (as admission counts them). When it is dispatched, its session
  // holds that prompt on its engine (SessionHistory::held_prompt_tokens). Range: >= 0.
  int64_t prompt_tokens = 0;
  // Marks its session retained (true) or clears the mark (false) once the attempt is begun;
  // unset leaves the session as it is (a new incarnation: unretained). Only with a session.
  std::optional<bool> retain = std::nullopt;
  // The session the attempt names as its parent (a verified sub-agent hint; with or without a
  // session of its own): with parent_return on, that parent's next attempt delivers its return.
  std::optional<Key> parent = std::nullopt;
};

// What admission v2 knows of a session before its next attempt (GatewayFlow::History).
struct SessionHistory {
  // The session sent a request before, in this incarnation: the next one continues a program.
  bool continuing = false;
  // The prompt of its last dispatched attempt: what it holds on its engine's radix cache,
  // unless evicted since (0 for a new session).
  int64_t held_prompt_tokens = 0;

  friend bool operator==(const SessionHistory&, const SessionHistory&) = default;
};

template <typename Key>
class GatewayFlow {
 public:
  using Action = FlowAction<Key>;

  // Precondition (CHECKed): options.Validate() is OK.
  explicit GatewayFlow(GatewayFlowOptions options);
  GatewayFlow(const GatewayFlow&) = delete;
  GatewayFlow& operator=(const GatewayFlow&) = delete;

  const GatewayFlowOptions& options() const { return options_; }

  // --- Attempts ---

  // Registers a new attempt of `request_id` (in `session` when set; a session is opened on its
  // first attempt, an ended one is opened again as a new incarnation) and returns its rid:
  // FormatAttemptRid(request_id, n) with the lowest n used neither by a live attempt nor by
  // the session's remembered ones (its last kMaxEndedAttemptsPerSession ended attempts), and
  // applies spec.retain to the session. With parent_return on it remembers spec.parent and, when
  // the session is a remembered parent whose return is due, emits DeliverParentReturn (after
  // the actions of any session it ended to make room). Checked in this order, each refusal changing
  // nothing: InvalidArgument for an empty request id or spec.retain set without a session;
  // FailedPrecondition while the session is terminating; ResourceExhausted (counted in
  // retain_refused()) when spec.retain would mark a session retained past
  // RetainedSessionBound(); Unavailable (counted in refused()) when opening a session at
  // max_sessions finds no idle unretained one to end (an idle one is ended, counted in
  // evicted()); ResourceExhausted for a request id with 2^20 live attempts.
  [[nodiscard]] StatusOr<std::string> BeginAttempt(const std::optional<Key>& session,
                                                   std::string_view request_id,
                                                   AttemptSpec<Key> spec, TimeNs now);

  // The admission decision of a kAdmitting attempt arrived: the attempt becomes kReady and
  // keeps the decision's lease (returned by Finish). NotFound for an unknown rid;
  // FailedPrecondition unless the attempt is kAdmitting.
  [[nodiscard]] StatusOr<AdmissionVerdict> OnAdmission(std::string_view rid,
                                                       const AdmissionDecision& decision);

  // The attempt is about to be posted: it becomes kDispatched. FailedPrecondition (do not
  // post) when a close cancelled it, its client left, or it is not kReady. NotFound for an
  // unknown rid.
  [[nodiscard]] StatusOr<DispatchIdentity<Key>> Dispatch(std::string_view rid);

  // The attempt's client left. kAdmitting: emits CancelAttempt (awaiting admission).
  // kDispatched: emits AbortOnEveryEngine (not streamed) and CutUpstream. kReady: Dispatch
  // will refuse it. Idempotent; an unknown rid is a no-op.
  void OnClientGone(std::string_view rid);

  // The attempt ended, however (answered, failed, refused, cancelled, never dispatched):
  // emits ReturnLease for its lease, and the last attempt of a draining session to end moves
  // it on to its close. Idempotent; an unknown rid is a no-op.
  void Finish(std::string_view rid, TimeNs now);

  // --- Sessions ---

  // Ends `session` and closes it on every engine; AnswerClose{request} is emitted once the
  // session has ended (at once when nothing is in flight and the lifecycle is off). An unknown
  // session is opened and closed (a restarted gateway forgets sessions engines still hold);
  // an ended one is answered its remembered outcome at once, with no second fan-out.
  void Close(const Key& session, TerminalReason reason, uint64_t request, TimeNs now);

  // The aggregate outcome of a CloseOnEveryEngine (CloseSucceededOnEveryEngine). Counts close
  // and close_failure; the session ends either way. FailedPrecondition unless a close is
  // outstanding for `session`.
  [[nodiscard]] Status OnCloseOutcome(const Key& session, bool succeeded);

  // Ends active unretained sessions idle past idle_timeout (kDropped) and closes draining
  // sessions whose drain deadline passed (their aborted attempts are no longer waited for;
  // their late Finish is still accepted). Returns how many sessions it acted on.
  int64_t Sweep(TimeNs now);

  // The earliest time Sweep would act on a draining session; nullopt when none drains.
  std::optional<TimeNs> NextDrainDeadline() const;
  // The earliest time Sweep would end an idle session; nullopt with idle_timeout 0 or when no
  // unretained session is idle.
  std::optional<TimeNs> NextIdleDeadline() const;

  // --- Outbox and queries ---

  // The actions emitted since the last call, in emission order; the outbox is then empty.
  [[nodiscard]] std::vector<Action> TakeActions();

  // The session's history for admission v2: what it dispatched before in its current
  // incarnation; a default SessionHistory for an unknown, ended or new session.
  SessionHistory History(const Key& session) const;

  // Whether an attempt in `session` would open an active session (a new one or a new
  // incarnation of an ended one).
  bool Opens(const Key& session) const;
  // Program-level FCFS on the served path: the order in which programs arrived. Each session
  // incarnation is a program numbered when it opens; an attempt without a session is a program
  // of its own, numbered when it begins (0, 1, 2, ... over the flow's life). The arrival of the
  // active incarnation of `session`; nullopt for an unknown, terminating or ended session. The
  // numbers live in the session and attempt records, so they are bounded as those are.
  std::optional<uint64_t> ProgramArrival(const Key& session) const;
  // The arrival of live attempt `rid`'s program (its session's incarnation, else its own);
  // nullopt for an unknown rid.
  std::optional<uint64_t> AttemptProgramArrival(std::string_view rid) const;
  // Whether `session` is registered (in any phase, ended ones while remembered).
  bool Knows(const Key& session) const { return sessions_.contains(session); }
  // NotFound for an unknown session / rid.
  [[nodiscard]] StatusOr<SessionPhase> phase(const Key& session) const;
  [[nodiscard]] StatusOr<AttemptPhase> attempt_phase(std::string_view rid) const;
  // The lease the attempt holds, if any; nullopt for an unknown rid too.
  std::optional<std::string> lease_of(std::string_view rid) const;

  const SessionLifecycleCounters& counters() const { return counters_; }
  // Sessions accepting attempts.
  int64_t active_sessions() const { return active_; }
  // Active sessions marked retained (at most RetainedSessionBound()).
  int64_t retained_sessions() const { return retained_; }
  // Whether `session` is active and retained.
  bool retained(const Key& session) const;
  // Sessions draining or closing.
  int64_t terminating_sessions() const;
  // Attempts begun and not finished, with or without a session.
  int64_t live_attempts() const { return static_cast<int64_t>(live_.size()); }
  // The rids of live attempts, sorted.
  std::vector<std::string> live_rids() const;
  // Sessions ended to make room under max_sessions, and new sessions refused, since start.
  int64_t evicted() const { return evicted_; }
  int64_t refused() const { return refused_; }
  // Retention marks refused at RetainedSessionBound(), since start.
  int64_t retain_refused() const { return retain_refused_; }

  // Sessions remembered as parents (parent_return on; at most max_sessions).
  int64_t remembered_parents() const { return static_cast<int64_t>(parents_.size()); }

  // Aborts with a message if an invariant of the .cc does not hold. For tests.
  void CheckInvariants() const;

 private:
  struct Attempt {
    std::optional<Key> session;
    AttemptPhase phase = AttemptPhase::kReady;
    bool streamed = false;
    bool client_gone = false;
    // Cancelled by its session's close before it was dispatched.
    bool cancelled = false;
    // Dispatched and still counted in its session's in_flight (a drain timeout stops that).
    bool in_flight = false;
    std::optional<std::string> lease;
    // Begin order within the flow.
    uint64_t seq = 0;
    // Its program's arrival (ProgramArrival).
    uint64_t program_arrival = 0;
    int64_t prompt_tokens = 0;
  };
  struct Session {
    SessionPhase phase = SessionPhase::kActive;
    std::optional<TerminalReason> reason;
    // Live attempts naming it, by begin order.
    std::map<uint64_t, std::string> live;
    // Live attempts counted in the drain.
    int64_t in_flight = 0;
    TimeNs last_activity;
    std::optional<TimeNs> drain_deadline;
    // Close requests to answer when the session ends.
    std::vector<uint64_t> waiters;
    int64_t aborted = 0;
    std::optional<bool> last_close_ok;
    // Non-zero while the ended session is remembered in closed_.
    uint64_t tombstone = 0;
    // Rids of this incarnation that may not be used again: live ones and the newest ended.
    std::set<std::string, std::less<>> used;
    std::deque<std::string> ended;
    // Per request id, the next attempt number to try (a hint, cleared when it grows past
    // kMaxEndedAttemptsPerSession entries; probing from 0 finds the same rids).
    std::unordered_map<std::string, int64_t> next_attempt;
    // Set while the session is in idle_: active, unretained, with no live attempt, since this
    // time.
    std::optional<TimeNs> idle_since;
    // Marked retained (only while active): never idled out nor evicted.
    bool retained = false;
    // This incarnation's program arrival (ProgramArrival).
    uint64_t program_arrival = 0;
    // Attempts dispatched in this incarnation, and the last one's prompt (SessionHistory).
    int64_t dispatched = 0;
    int64_t held_prompt_tokens = 0;
  };

  Session& Open(const Key& session, TimeNs now);
  void UpdateIdle(const Key& key, Session& session);
  Status MakeRoom(TimeNs now);
  // Applies a retention mark to an active session (the bound was checked).
  void SetRetained(const Key& key, Session& session, bool retained);
  void Terminate(const Key& key, Session& session, TerminalReason reason, TimeNs now);
  // Once nothing is in flight: emits the close (lifecycle on) or ends the session (off).
  void FinishDraining(const Key& key, Session& session);
  void EndSession(const Key& key, Session& session);
  // Remembers the ended session (tombstone) and forgets the oldest beyond the bound.
  void Remember(const Key& key, Session& session);
  // A begun attempt of `session` naming `parent`: remembers the parent and emits the session's
  // return when due (parent_return).
  void NoteParentReturn(const std::optional<Key>& session, const std::optional<Key>& parent);

  // CheckInvariants, by topic. The attempts' counts per session (live, in flight), checked
  // against each session's own by CheckSession.
  struct AttemptCounts {
    std::map<Key, int64_t> live;
    std::map<Key, int64_t> in_flight;
  };
  AttemptCounts CheckAttempts() const;
  void CheckAttemptOfSession(const std::string& rid, const Attempt& attempt) const;
  void CheckSession(const Key& key, const Session& session, const AttemptCounts& counts) const;
  void CheckSessionPhase(const Key& key, const Session& session) const;
  void CheckSessionTotals() const;
  void CheckParentReturns() const;

  const GatewayFlowOptions options_;
  std::map<Key, Session> sessions_;
  // Live attempts by rid.
  std::map<std::string, Attempt, std::less<>> live_;
  uint64_t next_seq_ = 0;
  // The next program arrival number.
  uint64_t next_program_ = 0;
  // Ended sessions in the order they ended: (key, tombstone); stale entries are skipped.
  std::deque<std::pair<Key, uint64_t>> closed_;
  uint64_t next_tombstone_ = 1;
  // Active unretained sessions with no live attempt, by when they became idle (oldest first):
  // the sessions the idle timeout and the session cap may end.
  std::set<std::pair<TimeNs, Key>> idle_;
  // Draining sessions by drain deadline (earliest first): NextDrainDeadline and Sweep read
  // them without walking every session, so that a burst of n sessions costs n log n.
  std::set<std::pair<TimeNs, Key>> draining_;
  int64_t active_ = 0;
  int64_t retained_ = 0;
  int64_t retain_refused_ = 0;
  int64_t evicted_ = 0;
  int64_t refused_ = 0;
  std::vector<Action> outbox_;
  SessionLifecycleCounters counters_;
  // Sessions attempts named as their parent (parent_return on), each with whether its return
  // is due, and the same keys oldest first (the bound forgets the oldest).
  std::map<Key, bool> parents_;
  std::deque<Key> parents_order_;
};

extern template class GatewayFlow<std::string>;
extern template class GatewayFlow<SessionId>;

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_GATEWAY_FLOW_H_
