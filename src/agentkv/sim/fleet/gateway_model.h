// GatewayModel: the agentkv gateway in front of a simulated fleet (seed 000 on simulated time).
//
// Every request of the agent driver goes through the gateway's own orchestration,
// control::GatewayFlow (keyed by the typed SessionId), exactly as the served gateway runs it:
// the flow registers the session and one backend attempt per request (rid "{request}:0");
// with program admission the attempt asks the real control::AdmissionCoordinator for a lease
// (reservation = prompt tokens + max_new_tokens, capped by the expected decode cap) and waits
// in the global FIFO when refused; with admission v2 (agentic_admission_policy v2) it reserves
// the expected uncached tokens (control::UncachedReservationTokens: the prompt of the session's
// last dispatched attempt is held, the request's shared prefix is reserved once), names the
// engine the router will pick when the policy makes it knowable (consistent hashing:
// routing::Router::StickyEngine) and says whether the session continues a program; once admitted
// (or bypassed) it is dispatched through the FleetModel's router. The flow returns the lease when
// the request completes. EndSession() closes the session through the flow: attempts still waiting
// for admission are cancelled (their tickets cancelled in the coordinator; they complete with a
// dispatch error), dispatched ones are aborted and waited for, at most `session_drain_timeout`, and
// then, with the lifecycle on, the close is performed on every engine (generate carries
// `session_id`, so engines track the session's KV); with it off the session just ends, as with
// plain SGLang. An abort is posted to every engine (FleetModel::AbortOnEveryEngine): the engine
// holding the request ends it at its next step boundary, as the engine emulator does, and it
// completes through the normal path (its engine record marked aborted, with the tokens produced so
// far), which ends the drain; the drain timeout (scheduled on the loop) closes the session
// first only when it is shorter than the wait for that boundary.
//
// Idle sessions and retention. With `session_idle_timeout` set (the gateway's
// --session-idle-timeout-s; off by default, as simulated agents close every session they use),
// a session with nothing in flight for that long is ended and, with the lifecycle on, closed on
// every engine, exactly as the served gateway's sweeper does (a sweep is scheduled on the loop
// at the flow's next idle deadline); the agent's next request opens a new incarnation, which
// finds its KV released. A request with `retain` set marks its session retained (or clears the
// mark), as X-Agentkv-Session-Retain does: a retained session (a partial rollout kept across
// steps) is never idled out, only EndSession ends it.
//
// Gauge polls. Every `poll_interval_s` of simulated time while the fleet has work (requests
// waiting or in flight) the gateway reads every engine's gauges: the snapshots reconcile the
// coordinator's ledger (with admission on) and one KvUsageSample is recorded. When the fleet
// falls idle polling pauses, and the next request polls at once if the last poll is older
// than the interval: an idle fleet's gauges do not change, so this equals polling throughout
// without events that would keep the loop alive.
//
// TTL pins. With `fixed_ttl` set (the fixed-ttl arm), a request whose turn ends in a tool call
// pins its prompt on the engine that served it (EngineModel::PinPrefix, keyed by the
// conversation whose id equals the session's) when it completes, for that long. With
// `continuum` set (the continuum arm) the decision is engine::ContinuumPolicy's: the pause
// class is kSubagentWaitPause when the turn's next_pause is a sub-agent wait, else the turn's
// agent (kMainAgentPause, or kSubagentPause for a request with a parent conversation); the
// pause is observed when the session's next request reaches the gateway
// (or as never ending when the session ends first); the pinned tokens are the prompt's full
// blocks, the prefill saved the serving engine's cost model estimate for them, the queueing
// saved the same estimate when requests wait on that engine (a returning program would queue
// behind them, about one prefill of its own) and 0 otherwise, and the pressure the engine's
// EngineModel::kv_pressure(). A pin counts as returned when a later request with that
// kv_options.conversation reaches the engine, as the agent driver's requests do. When the
// engines order their queues by program (program_fcfs), a session's end makes every engine
// forget its program.
//
// Sub-agent demotion delivered. With `deliver_subagent_demotion` set, the flow decides when a
// parent's return is due (control::ParentReturnDelivery::kEveryAttempt: every request of a
// session some request named as its authenticated parent; a session's conversation id is its
// session id) and emits DeliverParentReturn when the request arrives, before admission; the
// gateway performs it on every engine (FleetModel::DemoteFinishedSubagentsOnEveryEngine), as the
// served gateway fans /demote_finished_subagents out like /close_session: each engine demotes
// the finished children of that parent it holds, wherever the router placed them (sub-agents
// are routed by their own session, so in a fleet most are not on their parent's engine).
//
// Working set. With `working_set` set (+working-set), every request first passes the real
// control::WorkingSetAdmission, before request-level admission when that is on too: its
// program is the root of its conversation's parent chain (a sub-agent joins its parent's
// program), its agent is its session, its reservation the seed's (prompt + expected decode),
// its target the engine the router will pick when consistent hashing makes it knowable. A new
// program that does not fit waits at the gateway (an admission wait, in its server time and
// TTFT); a request's completion hands its context (prompt + output) and the pause that follows
// (its next_pause; any but a returning pause, e.g. kSessionEnd after the agent's last request,
// ends the hold at once) to the working set,
// which holds it for the predicted pause; a session's end ends its agent. Capacities come from
// the gauge polls; a tick is scheduled at the working set's next deadline (a hold's end, a
// waiter's aging).
//
// Deterministic: a pure function of the options, the fleet and the call sequence with times.
// Single-threaded; not copyable or movable (scheduled events point at it). Owns the fleet's
// completion callback from Create() on; must outlive every run of the loop while requests
// are in flight.
#ifndef AGENTKV_SIM_FLEET_GATEWAY_MODEL_H_
#define AGENTKV_SIM_FLEET_GATEWAY_MODEL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/gateway_flow.h"
#include "agentkv/control/reservation.h"
#include "agentkv/control/working_set.h"
#include "agentkv/engine/continuum_policy.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/pause_estimator.h"
#include "agentkv/sim/fleet/agent_target.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "agentkv/sim/fleet/fleet_model.h"
#include "agentkv/sim/fleet/kv_usage_sample.h"
#include "agentkv/sim/workload/pause_type.h"

namespace agentkv::sim {

// The pause classes the continuum arm keeps apart (engine::ContinuumPolicy keys): a main
// agent's tool call, a sub-agent's tool call, and a wait for sub-agents. A turn that ended in
// a tool call is a tool call's pause, whatever the client later makes of it (an interrupted
// call's human turn), unless the agent then waits for sub-agents.
inline constexpr kv::PauseClass kMainAgentPause{PauseKind::kToolCall};
inline constexpr kv::PauseClass kSubagentPause{PauseKind::kToolCall, /*sub=*/true};
inline constexpr kv::PauseClass kSubagentWaitPause{PauseKind::kSubagentWait};

// Which engines a returning parent's demotion of its finished sub-agents reaches
// (+subagent-demotion): only the engine its own request lands on (kParentEngine,
// "parent-engine": the seed, which knows one engine), or every engine, the gateway delivering
// the parent's return (kEveryEngine, "every-engine").
enum class DemotionDelivery : uint8_t { kParentEngine, kEveryEngine };

// "parent-engine" or "every-engine"; and back (nullopt for any other name).
std::string_view DemotionDeliveryName(DemotionDelivery delivery);
std::optional<DemotionDelivery> ParseDemotionDelivery(std::string_view name);

struct GatewayModelOptions {
  // The seed's flags: agentic_session_lifecycle, agentic_program_admission and the admission
  // parameters (validated by AgenticOptions::Validate). poll_interval_s is the gauge poll.
  control::AgenticOptions agentic;
  // Pin a tool-call turn's prompt for this long after it completes (the fixed-ttl arm).
  // Default: unset (no pins). Range: > 0 when set.
  std::optional<TimeNs> fixed_ttl;
  // Pin a tool-call turn's prompt when and for as long as Continuum's policy says (the
  // continuum arm). Default: unset. Valid per ContinuumPolicyOptions::Validate; not with
  // fixed_ttl.
  std::optional<engine::ContinuumPolicyOptions> continuum;
  // How long a closing session waits for its dispatched attempts (the gateway's
  // --session-drain-timeout-s). Default: 30 s. Range: >= 0.
  TimeNs session_drain_timeout = TimeNs::Seconds(30);
  // Deliver a parent's return to every engine (header comment). Default: false.
  bool deliver_subagent_demotion = false;
  // End sessions with nothing in flight for this long, unless retained (the gateway's
  // --session-idle-timeout-s; header comment). Default: 0 (never: simulated agents close every
  // session they use). Range: >= 0.
  TimeNs session_idle_timeout = TimeNs(0);
  // The engines order their queues by program (program_fcfs): a session's end makes every
  // engine forget its program. Default: false.
  bool program_fcfs = false;
  // Program-level working-set admission (+working-set; header comment): unset, off.
  // Valid per WorkingSetOptions::Validate.
  std::optional<control::WorkingSetOptions> working_set;
  // With working_set: a held context is also pinned on the engine that served it for as long
  // as the working set holds it (EngineModel::PinPrefix), so that the engine's eviction takes
  // unheld blocks first. Default: true.
  bool working_set_pins = true;
  // Keep a request's record (FindRecord, RefusedRecord) once its completion callback returned.
  // Default: true. Off, the gateway's memory follows the requests in flight: the callback is
  // the last sight of a record (the replay folds it then, sim/replay/request_tally.h). The
  // engines have their own switch (EngineModelOptions::keep_finished_records).
  bool keep_finished_records = true;

  // InvalidArgument naming the first bad field.
  Status Validate() const;
};

// One request as the agent driver hands it to the gateway.
struct GatewayRequest {
  // kv_options.session is set by the gateway (only with the lifecycle on); leave it unset.
  engine::SchedulerRequest request;
  // The client's session (one per conversation).
  SessionId session;
  uint64_t routing_key = 0;
  // The trace says this turn ended in a tool call (`stop: tool_use`).
  bool ends_in_tool_call = false;
  // The pause that follows this turn (base/pause.h; kSessionEnd after the agent's last
  // request, kUnknown from a source that does not know it). A gateway reads it from the
  // response: the tool called says whether the agent now waits for sub-agents. The continuum
  // arm's pause class, the working set's hold, and the engine's hint: Dispatch passes it on as
  // request.kv_options.next_pause (whatever that held).
  PauseKind next_pause = PauseKind::kUnknown;
  // The leading prompt blocks every session of the workload may share (the tools+system
  // prompt, a GRPO group's task): admission v2 reserves them once, under the chained key of the
  // last of them, which names the whole prefix. Range: [0, prompt blocks].
  int64_t shared_prefix_blocks = 0;
  // Marks the session retained (true) or clears the mark (false), as the served gateway's
  // X-Agentkv-Session-Retain header does; unset leaves it (control::AttemptSpec::retain).
  std::optional<bool> retain = std::nullopt;
};

// The engine id the gateway's gauge polls and admission v2 name engine `e` by: "engine-{e}".
std::string GatewayEngineName(EngineId engine);

// What the gateway saw of one request.
struct GatewayRecord {
  RequestId id;
  SessionId session;
  // The request's prompt tokens and full prompt blocks (block lookups).
  int64_t prompt_tokens = 0;
  int64_t prompt_blocks = 0;
  // Arrival at the gateway, and dispatch to an engine (after any admission wait).
  TimeNs received;
  std::optional<TimeNs> dispatched;
  std::optional<EngineId> engine;
  // The admission decision (unset without admission).
  std::optional<control::AdmissionAction> admission_action;
  std::optional<control::AdmissionReason> admission_reason;
  // Set when dispatching failed (the engine refused the request); no engine record then.
  Status dispatch_error;
  // Admission refused the request (kRefuse `oversized`: its reservation exceeds the whole
  // admission ceiling). It never reached an engine; RefusedRecord() holds its account, a
  // rejected request that looked nothing up and computed nothing, as the gateway's 400 leaves
  // it (the replay counts it as refused, as it does a request an engine rejects).
  bool refused = false;
};

// The simulator's AgentTarget (agent_target.h): the agent driver submits to it.
class GatewayModel final : public AgentTarget {
 public:
  // Runs when a request completes (engine record set; for a request admission refused, its
  // RefusedRecord), or fails to dispatch after waiting, or had its admission wait cancelled by
  // its session's close (engine record null, record.dispatch_error set).
  using CompletionCallback = AgentTarget::CompletionCallback;

  // Validates `options`, takes over the fleet's completion callback. `loop` and `fleet` must
  // outlive the gateway.
  static StatusOr<std::unique_ptr<GatewayModel>> Create(EventLoop* loop, FleetModel* fleet,
                                                        const GatewayModelOptions& options);

  GatewayModel(const GatewayModel&) = delete;
  GatewayModel& operator=(const GatewayModel&) = delete;

  void set_completion_callback(CompletionCallback callback) override {
    on_complete_ = std::move(callback);
  }
  // Engine 0's hasher and block size (every engine of a fleet has the same).
  const kv::BlockKeyHasher& hasher() const override;
  int32_t tokens_per_block() const override;

  // Receives `request` at loop->now(): registers its session on first use (a session ended
  // before opens again), applies its retention mark, asks admission, and dispatches it now or
  // when the FIFO resolves it. Errors (nothing recorded): AlreadyExists for a reused request id,
  // the flow's refusals (control::GatewayFlow::BeginAttempt: a retention mark past the bound is
  // ResourceExhausted) and, for a request dispatched at once, the engine's Submit error. A request
  // that waited and then fails to dispatch reports through the completion callback instead.
  Status Submit(GatewayRequest request) override;

  // The session ended (its agent finished): closes it through the gateway flow. Attempts of
  // the session still waiting for admission are cancelled (they complete with a dispatch
  // error); dispatched ones are aborted on every engine and drained (each completes, aborted,
  // at its engine's next step boundary); then, with the lifecycle on, the session is closed on
  // every engine. Returns the tokens freed per engine when the close ran now, empty when
  // nothing was closed or the close waits for a drain (tokens_freed_by_close() counts every
  // close). Idempotent: an ended session is not closed again. A session the gateway never saw
  // is a no-op (a simulated agent closes only a session it used).
  std::vector<int64_t> EndSession(SessionId session) override;
  // Every engine forgets `keys` in its miss accounting (FleetModel::RetireKeysOnEveryEngine).
  void RetireKeys(std::span<const kv::BlockKey> keys) override {
    fleet_->RetireKeysOnEveryEngine(keys);
  }

  const FleetModel& fleet() const { return *fleet_; }
  // Requests received and not completed (waiting in the FIFO or on engines).
  int64_t in_flight() const { return in_flight_; }
  // Requests waiting for admission (the working set's or the coordinator's).
  int64_t admission_waiting() const {
    return static_cast<int64_t>(waiting_.size() + ws_waiting_.size());
  }
  // The working set (null without +working-set).
  const control::WorkingSetAdmission* working_set() const {
    return working_set_.has_value() ? &*working_set_ : nullptr;
  }
  const std::vector<KvUsageSample>& kv_usage() const { return kv_usage_; }
  // The coordinator (null without admission) and the gateway flow.
  const control::AdmissionCoordinator* coordinator() const { return coordinator_.get(); }
  const control::GatewayFlow<SessionId>& flow() const { return flow_; }
  // Aborts the flow asked for, each performed on every engine, and those an engine acted on
  // (the others found the request already finished: it completed normally).
  int64_t aborts_requested() const { return aborts_requested_; }
  int64_t aborts_performed() const { return aborts_performed_; }
  // The seed's agentic_kv/ series now (admission counters and ledger view when admission is
  // on, session close counters when the lifecycle is on).
  // Reads the ledger at the loop's now (does not reset anything).
  std::vector<std::pair<std::string, double>> AgenticKvMetrics();
  // Sessions closed on engines (one per session per engine) and their freed tokens.
  int64_t engine_session_closes() const { return engine_session_closes_; }
  int64_t tokens_freed_by_close() const { return tokens_freed_by_close_; }
  // The continuum arm's policy (null otherwise), and the tool-call turns it declined to pin
  // because no TTL's benefit beat its memory cost.
  const engine::ContinuumPolicy* continuum_policy() const {
    return continuum_.has_value() ? &*continuum_ : nullptr;
  }
  int64_t pins_declined_by_cost() const { return pins_declined_by_cost_; }
  // Parent returns delivered to the fleet (one per DeliverParentReturn of the flow, whatever the
  // number of engines), and the children they demoted over every engine.
  int64_t demotion_deliveries() const { return demotion_deliveries_; }
  int64_t children_demoted_by_delivery() const { return children_demoted_by_delivery_; }
  const GatewayRecord* FindRecord(RequestId id) const;
  // The account of a request admission refused (GatewayRecord::refused), or nullptr.
  const EngineRequestRecord* RefusedRecord(RequestId id) const;

  // Internal naming the first broken conservation rule once the run is over: nothing in
  // flight or waiting, every lease returned (the ledger reserves 0 tokens), every session
  // ended, and the flow's and the coordinator's own invariants.
  Status CheckDrained() const;

 private:
  struct Pending {
    GatewayRequest request;
    std::string rid;
  };

  GatewayModel(EventLoop* loop, FleetModel* fleet, const GatewayModelOptions& options);

  // Admission v2: the uncached reservation, shared prefix, target engine and program order of
  // `request` into `acquire`.
  void FillAdmissionV2(const GatewayRequest& request, const control::AttemptShape& shape,
                       control::AcquireRequest& acquire) const;
  // Request-level admission of an attempt the working set admitted (or of every attempt
  // without it): asks the coordinator when there is one, else dispatches at once. An error is
  // the dispatch's (the attempt has been finished).
  Status AdmitRequest(Pending pending);
  // Working set: the program of a request (its conversation's root, remembered until its
  // session ends), and the acquire of an attempt.
  std::string ProgramOf(const kv::RequestOptions& kv_options, SessionId session);
  control::ProgramRequest ProgramRequestOf(const Pending& pending);
  // Hands every working-set decision resolved since the last call on (request admission, or
  // a cancelled completion), until none is left.
  void AdmitResolvedPrograms();
  // Keeps a working-set tick scheduled at its next deadline, while there is one.
  void EnsureWorkingSetTick();
  // Dispatches an admitted or bypassed attempt to the fleet.
  Status Dispatch(Pending pending, const control::AdmissionDecision* decision);
  // Acts on the final admission decision of an attempt that waited.
  void OnResolved(Pending pending, const control::AdmissionDecision& decision);
  // Dispatches every attempt the coordinator resolved since the last call.
  void DispatchResolved();
  void OnEngineComplete(EngineId engine, const EngineRequestRecord& record);
  // Polls now when the last poll is older than the interval (or there was none).
  void PollIfStale();
  // Keeps the next poll scheduled, one interval after the last, while requests are in flight.
  void EnsurePolling();
  // Reads every engine's gauges: one KvUsageSample, and a reconcile of the ledger.
  void Poll();
  // Ends the attempt in the flow and performs what follows.
  void FinishAttempt(const std::string& rid);
  // Performs the flow's actions on the simulated fleet until its outbox is empty.
  void PerformActions();
  // Keeps a sweep scheduled at the flow's next drain or idle deadline, while there is one.
  void EnsureSweep();
  // Ends a request admission refused: records its account and completes it at once.
  void Refuse(const Pending& pending, const control::AdmissionDecision& decision);
  // Ends a request whose admission wait a session close cancelled: it never ran.
  void CompleteCancelled(const Pending& pending, const control::AdmissionDecision& decision);
  // Runs the completion callback of request `id` (its engine record: served, rejected or the
  // refused account; null when it could not be served), then forgets its records unless
  // options_.keep_finished_records.
  void Complete(RequestId id, const EngineRequestRecord* engine_record);

  EventLoop* loop_;
  FleetModel* fleet_;
  GatewayModelOptions options_;
  TimeNs poll_interval_;
  std::unique_ptr<control::AdmissionCoordinator> coordinator_;
  control::GatewayFlow<SessionId> flow_;
  CompletionCallback on_complete_;
  TimeNs origin_;
  std::optional<TimeNs> last_poll_;
  bool poll_scheduled_ = false;
  std::optional<TimeNs> sweep_at_;
  int64_t in_flight_ = 0;
  // Attempts waiting for a FIFO decision, by rid. Looked up only.
  std::unordered_map<std::string, Pending> waiting_;
  // Records by request id, and the rid of each dispatched request and back. Looked up only.
  std::unordered_map<RequestId, GatewayRecord> records_;
  std::unordered_map<RequestId, std::string> rid_of_;
  std::unordered_map<std::string, RequestId> id_of_rid_;
  // A dispatched tool-call turn that may be pinned when it completes.
  struct PinCandidate {
    std::vector<kv::BlockKey> keys;
    kv::PauseClass pause_class = kMainAgentPause;
  };
  // A session paused after a tool-call turn (continuum): since when, and its class.
  struct Pause {
    TimeNs since;
    kv::PauseClass pause_class = kMainAgentPause;
  };
  // Decides and takes the pin of `candidate`, which completed on `engine` (continuum).
  void DecideContinuumPin(EngineId engine, SessionId session, const PinCandidate& candidate);

  // Working set (+working-set): attempts waiting for it by rid, the pause after each admitted
  // attempt by rid, each live conversation's program, and the scheduled tick. Looked up only.
  std::optional<control::WorkingSetAdmission> working_set_;
  std::unordered_map<std::string, Pending> ws_waiting_;
  std::unordered_map<std::string, PauseKind> ws_next_pause_;
  std::unordered_map<ConversationId, ConversationId> program_of_;
  std::optional<TimeNs> ws_tick_at_;

  std::unordered_map<RequestId, PinCandidate> pin_keys_;
  std::optional<engine::ContinuumPolicy> continuum_;
  // Looked up only.
  std::unordered_map<SessionId, Pause> pauses_;
  int64_t pins_declined_by_cost_ = 0;
  std::unordered_map<RequestId, EngineRequestRecord> refused_;
  std::vector<KvUsageSample> kv_usage_;
  // Close requests numbered for the flow, and the tokens freed by the close performed while
  // EndSession runs (null otherwise).
  uint64_t next_close_request_ = 1;
  std::vector<int64_t>* freed_now_ = nullptr;
  int64_t engine_session_closes_ = 0;
  int64_t tokens_freed_by_close_ = 0;
  int64_t aborts_requested_ = 0;
  int64_t aborts_performed_ = 0;
  int64_t demotion_deliveries_ = 0;
  int64_t children_demoted_by_delivery_ = 0;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_GATEWAY_MODEL_H_
