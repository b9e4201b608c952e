#include "agentkv/sim/fleet/gateway_model.h"

#include <algorithm>
#include <string>
#include <utility>
#include <variant>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/control/reservation.h"

// Invariants (CheckDrained at the end of a run):
// - in_flight_ counts requests received and not completed; each is either in waiting_ (by
//   rid) or dispatched to an engine (records_[id].dispatched set, completion pending).
// - Every attempt is live in flow_ exactly while its request is in flight; the flow holds the
//   lease of each admitted attempt and returns it (ReturnLease) when the attempt finishes.
// - Every flow action is performed before control returns to the event loop.

namespace agentkv::sim {
namespace {

control::GatewayFlowOptions FlowOptionsFrom(const GatewayModelOptions& options) {
  control::GatewayFlowOptions flow;
  flow.lifecycle = options.agentic.agentic_session_lifecycle;
  // Off by default: simulated agents close every session they use, and the idle timeout is the
  // served gateway's net for clients that never close.
  flow.idle_timeout = options.session_idle_timeout;
  flow.drain_timeout = options.session_drain_timeout;
  // Every request of a parent delivers, as an engine's own demotion runs at every admission of
  // the parent.
  flow.parent_return = options.deliver_subagent_demotion
                           ? control::ParentReturnDelivery::kEveryAttempt
                           : control::ParentReturnDelivery::kOff;
  return flow;
}

// The parent a request names, as the flow's session key: an authenticated hint only. A
// simulated session's conversation id is its session id (the agent driver's convention).
std::optional<SessionId> ParentSessionOf(const kv::RequestOptions& kv_options) {
  if (!kv_options.parent_conversation.has_value() || !kv_options.parent_hint_authenticated) {
    return std::nullopt;
  }
  return SessionId(kv_options.parent_conversation->value());
}

}  // namespace

std::string_view DemotionDeliveryName(DemotionDelivery delivery) {
  return delivery == DemotionDelivery::kEveryEngine ? "every-engine" : "parent-engine";
}

std::optional<DemotionDelivery> ParseDemotionDelivery(std::string_view name) {
  if (name == "parent-engine") return DemotionDelivery::kParentEngine;
  if (name == "every-engine") return DemotionDelivery::kEveryEngine;
  return std::nullopt;
}

std::string GatewayEngineName(EngineId engine) {
  return "engine-" + std::to_string(engine.value());
}

Status GatewayModelOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(agentic.Validate());
  if (!(agentic.poll_interval_s > 0.0)) {
    return InvalidArgumentError("poll_interval_s must be > 0, got " +
                                std::to_string(agentic.poll_interval_s));
  }
  if (session_drain_timeout < TimeNs(0)) {
    return InvalidArgumentError("session_drain_timeout must be >= 0 s, got " +
                                std::to_string(session_drain_timeout.seconds()) + " s");
  }
  if (session_idle_timeout < TimeNs(0)) {
    return InvalidArgumentError("session_idle_timeout must be >= 0 s, got " +
                                std::to_string(session_idle_timeout.seconds()) + " s");
  }
  if (fixed_ttl.has_value() && *fixed_ttl <= TimeNs(0)) {
    return InvalidArgumentError("fixed_ttl must be > 0 s, got " +
                                std::to_string(fixed_ttl->seconds()) + " s");
  }
  if (working_set.has_value()) AGENTKV_RETURN_IF_ERROR(working_set->Validate());
  if (continuum.has_value()) {
    if (fixed_ttl.has_value()) {
      return InvalidArgumentError("continuum and fixed_ttl are exclusive pin policies");
    }
    AGENTKV_RETURN_IF_ERROR(continuum->Validate());
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GatewayModel>> GatewayModel::Create(EventLoop* loop, FleetModel* fleet,
                                                             const GatewayModelOptions& options) {
  AGENTKV_CHECK(loop != nullptr && fleet != nullptr);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GatewayModel> gateway(new GatewayModel(loop, fleet, options));
  fleet->set_completion_callback(
      [g = gateway.get()](EngineId engine, const EngineRequestRecord& record) {
        g->OnEngineComplete(engine, record);
      });
  return gateway;
}

GatewayModel::GatewayModel(EventLoop* loop, FleetModel* fleet, const GatewayModelOptions& options)
    : loop_(loop),
      fleet_(fleet),
      options_(options),
      poll_interval_(options.agentic.poll_interval()),
      flow_(FlowOptionsFrom(options)),
      origin_(loop->now()) {
  if (options.agentic.agentic_program_admission) {
    coordinator_ = std::make_unique<control::AdmissionCoordinator>(
        control::CoordinatorParamsFrom(options.agentic));
  }
  if (options.working_set.has_value()) working_set_.emplace(*options.working_set);
  if (options.continuum.has_value()) {
    StatusOr<engine::ContinuumPolicy> policy = engine::ContinuumPolicy::Create(*options.continuum);
    AGENTKV_CHECK(policy.ok()) << policy.status();  // Validate() checked the options.
    continuum_.emplace(*std::move(policy));
  }
}

Status GatewayModel::Submit(GatewayRequest request) {
  const RequestId id = request.request.id;
  if (records_.contains(id)) {
    return AlreadyExistsError("request " + std::to_string(id.value()) + " was already received");
  }
  AGENTKV_ASSIGN_OR_RETURN(
      std::string rid,
      flow_.BeginAttempt(
          request.session, std::to_string(id.value()),
          control::AttemptSpec<SessionId>{
              .awaits_admission = coordinator_ != nullptr || working_set_.has_value(),
              .prompt_tokens = request.request.prompt_tokens,
              .retain = request.retain,
              .parent = ParentSessionOf(request.request.kv_options)},
          loop_->now()));
  // Opening a session at the cap may have ended an idle one, and a parent's return may be due.
  PerformActions();
  PollIfStale();
  if (auto pause = pauses_.find(request.session); pause != pauses_.end()) {
    continuum_->ObservePause(pause->second.pause_class, loop_->now() - pause->second.since);
    pauses_.erase(pause);
  }
  GatewayRecord record;
  record.id = id;
  record.session = request.session;
  record.received = loop_->now();
  record.prompt_tokens = request.request.prompt_tokens;
  record.prompt_blocks = static_cast<int64_t>(request.request.prompt_keys.size());
  Pending pending{std::move(request), rid};
  records_.emplace(id, record);
  ++in_flight_;
  EnsurePolling();
  if (working_set_.has_value()) {
    StatusOr<control::WorkingSetDecision> decision =
        working_set_->Acquire(ProgramRequestOf(pending), loop_->now());
    AGENTKV_CHECK(decision.ok()) << decision.status();
    ws_next_pause_[rid] = pending.request.next_pause;
    AdmitResolvedPrograms();  // The Acquire may have resolved older waiters.
    if (!decision->admitted) {
      ws_waiting_.emplace(rid, std::move(pending));
      EnsureWorkingSetTick();
      return Status::Ok();
    }
  }
  Status admitted = AdmitRequest(std::move(pending));
  if (!admitted.ok()) {
    records_.erase(id);
    --in_flight_;
  }
  EnsureWorkingSetTick();
  return admitted;
}

Status GatewayModel::AdmitRequest(Pending pending) {
  const std::string rid = pending.rid;
  if (coordinator_ == nullptr) {
    if (!working_set_.has_value()) return Dispatch(std::move(pending), nullptr);
    // Admitted by the working set alone: no lease.
    control::AdmissionDecision admitted;
    admitted.action = control::AdmissionAction::kAdmit;
    admitted.reason = control::AdmissionReason::kCapacityAvailable;
    admitted.ticket = rid;
    StatusOr<control::AdmissionVerdict> verdict = flow_.OnAdmission(rid, admitted);
    AGENTKV_CHECK(verdict.ok()) << verdict.status();
    if (*verdict == control::AdmissionVerdict::kCancelled) {
      CompleteCancelled(pending, admitted);
      return Status::Ok();
    }
    AGENTKV_CHECK(*verdict == control::AdmissionVerdict::kDispatch)
        << "a working-set admission's verdict was " << control::AdmissionVerdictName(*verdict);
    return Dispatch(std::move(pending), &admitted);
  }
  control::AcquireRequest acquire;
  acquire.ticket = rid;
  const control::AttemptShape shape{
      .prefix_tokens = pending.request.request.prompt_tokens,
      .pending_tokens = 0,
      .max_new_tokens = pending.request.request.max_new_tokens,
      .expected_decode_cap = options_.agentic.agentic_admission_expected_decode_cap};
  if (options_.agentic.agentic_admission_policy == control::AdmissionPolicy::kV2) {
    FillAdmissionV2(pending.request, shape, acquire);
  } else {
    acquire.reservation_tokens = control::ReservationTokens(shape);
  }
  StatusOr<control::AdmissionDecision> decision = coordinator_->Acquire(acquire, loop_->now());
  AGENTKV_CHECK(decision.ok()) << decision.status();
  DispatchResolved();  // The Acquire's drain may have resolved older waiters (e.g. aged ones).
  if (decision->action == control::AdmissionAction::kWait) {
    waiting_.emplace(rid, std::move(pending));
    return Status::Ok();
  }
  StatusOr<control::AdmissionVerdict> verdict = flow_.OnAdmission(rid, *decision);
  AGENTKV_CHECK(verdict.ok()) << verdict.status();
  if (*verdict == control::AdmissionVerdict::kRefused) {
    Refuse(pending, *decision);
    return Status::Ok();
  }
  AGENTKV_CHECK(*verdict == control::AdmissionVerdict::kDispatch)
      << "a new attempt's decision was " << control::AdmissionVerdictName(*verdict);
  return Dispatch(std::move(pending), &*decision);
}

std::string GatewayModel::ProgramOf(const kv::RequestOptions& kv_options, SessionId session) {
  const ConversationId own = kv_options.conversation.value_or(ConversationId(session.value()));
  ConversationId root = own;
  if (kv_options.parent_conversation.has_value()) {
    auto parent = program_of_.find(*kv_options.parent_conversation);
    root = parent != program_of_.end() ? parent->second : *kv_options.parent_conversation;
  }
  program_of_.insert_or_assign(own, root);
  return "program-" + std::to_string(root.value());
}

control::ProgramRequest GatewayModel::ProgramRequestOf(const Pending& pending) {
  const GatewayRequest& request = pending.request;
  control::ProgramRequest program;
  program.ticket = pending.rid;
  program.program = ProgramOf(request.request.kv_options, request.session);
  program.agent = "session-" + std::to_string(request.session.value());
  program.reservation_tokens = control::ReservationTokens(control::AttemptShape{
      .prefix_tokens = request.request.prompt_tokens,
      .pending_tokens = 0,
      .max_new_tokens = request.request.max_new_tokens,
      .expected_decode_cap = options_.agentic.agentic_admission_expected_decode_cap});
  if (const std::optional<EngineId> engine = fleet_->router().StickyEngine(request.routing_key)) {
    program.engine = GatewayEngineName(*engine);
  }
  return program;
}

void GatewayModel::AdmitResolvedPrograms() {
  if (!working_set_.has_value()) return;
  // An admission may dispatch and fail, finishing its attempt, which may resolve more.
  for (std::vector<control::WorkingSetDecision> resolved = working_set_->TakeResolved();
       !resolved.empty(); resolved = working_set_->TakeResolved()) {
    for (const control::WorkingSetDecision& decision : resolved) {
      auto it = ws_waiting_.find(decision.ticket);
      AGENTKV_CHECK(it != ws_waiting_.end())
          << "working set resolved ticket " << decision.ticket << " not waiting";
      Pending pending = std::move(it->second);
      ws_waiting_.erase(it);
      if (!decision.admitted) {
        control::AdmissionDecision cancelled;
        cancelled.action = control::AdmissionAction::kBypass;
        cancelled.reason = control::AdmissionReason::kCancelled;
        cancelled.ticket = decision.ticket;
        CompleteCancelled(pending, cancelled);
        continue;
      }
      const RequestId id = pending.request.request.id;
      Status admitted = AdmitRequest(std::move(pending));
      if (!admitted.ok()) {
        records_.at(id).dispatch_error = admitted;
        --in_flight_;
        Complete(id, nullptr);
      }
    }
  }
}

void GatewayModel::EnsureWorkingSetTick() {
  if (!working_set_.has_value()) return;
  const std::optional<TimeNs> deadline = working_set_->NextDeadline();
  if (!deadline.has_value() || (ws_tick_at_.has_value() && *ws_tick_at_ <= *deadline)) return;
  ws_tick_at_ = *deadline;
  loop_->Schedule(std::max(*deadline, loop_->now()), [this, at = *deadline] {
    if (ws_tick_at_ != at) return;  // Superseded by an earlier tick.
    ws_tick_at_.reset();
    working_set_->Tick(loop_->now());
    AdmitResolvedPrograms();
    EnsureWorkingSetTick();
  });
}

void GatewayModel::FillAdmissionV2(const GatewayRequest& request,
                                   const control::AttemptShape& shape,
                                   control::AcquireRequest& acquire) const {
  const control::SessionHistory history = flow_.History(request.session);
  const std::vector<kv::BlockKey>& keys = request.request.prompt_keys;
  const int64_t shared_blocks =
      std::clamp<int64_t>(request.shared_prefix_blocks, 0, static_cast<int64_t>(keys.size()));
  const int64_t shared_tokens =
      SaturatingMul(shared_blocks, fleet_->engine(EngineId(0)).engine().tokens_per_block());
  const control::UncachedReservation r =
      control::UncachedReservationTokens(shape, history.held_prompt_tokens, shared_tokens);
  acquire.reservation_tokens = r.own_tokens;
  acquire.continuing = history.continuing;
  if (r.prefix_tokens > 0) {
    // The chained key of the prefix's last block names the whole prefix.
    acquire.prefix_key =
        "blocks:" + std::to_string(keys[static_cast<size_t>(shared_blocks - 1)].value());
    acquire.prefix_tokens = r.prefix_tokens;
  }
  if (const std::optional<EngineId> engine = fleet_->router().StickyEngine(request.routing_key)) {
    acquire.engine = GatewayEngineName(*engine);
  }
}

Status GatewayModel::Dispatch(Pending pending, const control::AdmissionDecision* decision) {
  GatewayRequest& request = pending.request;
  const RequestId id = request.request.id;
  GatewayRecord& record = records_.at(id);
  if (decision != nullptr) {
    record.admission_action = decision->action;
    record.admission_reason = decision->reason;
  }
  auto abandon = [&](const Status& error) {
    FinishAttempt(pending.rid);  // Returns the lease, if any.
    return error;
  };
  StatusOr<control::DispatchIdentity<SessionId>> identity = flow_.Dispatch(pending.rid);
  if (!identity.ok()) return abandon(identity.status());
  if (identity->session.has_value()) request.request.kv_options.session = *identity->session;
  if ((options_.fixed_ttl.has_value() || options_.continuum.has_value()) &&
      request.ends_in_tool_call) {
    kv::PauseClass pause_class = request.request.kv_options.parent_conversation.has_value()
                                     ? kSubagentPause
                                     : kMainAgentPause;
    if (request.next_pause == PauseKind::kSubagentWait) pause_class = kSubagentWaitPause;
    pin_keys_[id] = PinCandidate{.keys = request.request.prompt_keys, .pause_class = pause_class};
  } else if (working_set_.has_value() && options_.working_set_pins &&
             IsReturningPause(request.next_pause)) {
    // The context the working set will hold through the pause that follows.
    pin_keys_[id] = PinCandidate{.keys = request.request.prompt_keys};
  }
  // The pause that follows, passed on as the client's hint to the engine (its cache's gap-aware
  // order and its stall offload read it), as the served gateway passes agentkv_pause on.
  request.request.kv_options.next_pause = request.next_pause;
  StatusOr<EngineId> engine = fleet_->Submit(std::move(request.request), request.routing_key);
  if (!engine.ok()) {
    pin_keys_.erase(id);
    return abandon(engine.status());
  }
  record.dispatched = loop_->now();
  record.engine = *engine;
  rid_of_.emplace(id, pending.rid);
  id_of_rid_.emplace(pending.rid, id);
  return Status::Ok();
}

void GatewayModel::DispatchResolved() {
  if (coordinator_ == nullptr) return;
  // A dispatch failure ends its request here, which may resolve more waiters: loop until none.
  for (std::vector<control::AdmissionDecision> resolved = coordinator_->TakeResolved();
       !resolved.empty(); resolved = coordinator_->TakeResolved()) {
    for (const control::AdmissionDecision& decision : resolved) {
      auto it = waiting_.find(decision.ticket);
      AGENTKV_CHECK(it != waiting_.end())
          << "resolved ticket " << decision.ticket << " not waiting";
      Pending pending = std::move(it->second);
      waiting_.erase(it);
      OnResolved(std::move(pending), decision);
    }
  }
}

void GatewayModel::OnResolved(Pending pending, const control::AdmissionDecision& decision) {
  StatusOr<control::AdmissionVerdict> verdict = flow_.OnAdmission(pending.rid, decision);
  AGENTKV_CHECK(verdict.ok()) << verdict.status();
  switch (*verdict) {
    case control::AdmissionVerdict::kRefused:
      Refuse(pending, decision);
      return;
    case control::AdmissionVerdict::kCancelled:
      CompleteCancelled(pending, decision);
      return;
    case control::AdmissionVerdict::kClientGone:
      AGENTKV_CHECK(false) << "simulated clients never leave";
      return;
    case control::AdmissionVerdict::kDispatch:
      break;
  }
  const RequestId id = pending.request.request.id;
  Status dispatched = Dispatch(std::move(pending), &decision);
  if (!dispatched.ok()) {
    records_.at(id).dispatch_error = dispatched;
    --in_flight_;
    Complete(id, nullptr);
  }
}

void GatewayModel::CompleteCancelled(const Pending& pending,
                                     const control::AdmissionDecision& decision) {
  const RequestId id = pending.request.request.id;
  GatewayRecord& record = records_.at(id);
  record.admission_action = decision.action;
  record.admission_reason = decision.reason;
  record.dispatch_error =
      FailedPreconditionError("the session was closed while the request waited for admission");
  FinishAttempt(pending.rid);
  --in_flight_;
  Complete(id, nullptr);
}

void GatewayModel::Refuse(const Pending& pending, const control::AdmissionDecision& decision) {
  const RequestId id = pending.request.request.id;
  GatewayRecord& record = records_.at(id);
  record.admission_action = decision.action;
  record.admission_reason = decision.reason;
  record.refused = true;
  EngineRequestRecord account;
  account.id = id;
  account.arrival = record.received;
  account.finished = loop_->now();
  account.report.rejected = true;
  const EngineRequestRecord& stored = refused_.insert_or_assign(id, account).first->second;
  FinishAttempt(pending.rid);
  --in_flight_;
  Complete(id, &stored);
}

void GatewayModel::Complete(RequestId id, const EngineRequestRecord* engine_record) {
  if (on_complete_) on_complete_(records_.at(id), engine_record);
  if (options_.keep_finished_records) return;
  records_.erase(id);
  refused_.erase(id);
}

const EngineRequestRecord* GatewayModel::RefusedRecord(RequestId id) const {
  auto it = refused_.find(id);
  return it == refused_.end() ? nullptr : &it->second;
}

void GatewayModel::DecideContinuumPin(EngineId engine, SessionId session,
                                      const PinCandidate& candidate) {
  // The pause starts now, pinned or not: its length is what the policy learns.
  pauses_[session] = Pause{.since = loop_->now(), .pause_class = candidate.pause_class};
  EngineModel& model = fleet_->mutable_engine(engine);
  engine::PinRequest request;
  request.pause_class = candidate.pause_class;
  request.tokens = static_cast<int64_t>(candidate.keys.size()) * model.engine().tokens_per_block();
  request.kv_pressure = model.kv_pressure();
  if (request.tokens > 0 && model.engine().num_waiting() > 0) {
    engine::StepShape shape;
    shape.prefill_tokens = request.tokens;
    shape.num_requests = 1;
    request.queueing_saved = model.cost_model().Estimate(shape);
  }
  const engine::PinDecision decision = continuum_->Decide(request, model.cost_model());
  if (decision.ttl.has_value()) {
    model.PinPrefix(ConversationId(session.value()), candidate.keys, *decision.ttl);
  } else if (decision.declined_by_cost) {
    ++pins_declined_by_cost_;
  }
}

void GatewayModel::OnEngineComplete(EngineId engine, const EngineRequestRecord& record) {
  auto it = records_.find(record.id);
  AGENTKV_CHECK(it != records_.end()) << "engine completed unknown request " << record.id;
  --in_flight_;
  auto rid = rid_of_.find(record.id);
  if (working_set_.has_value() && rid != rid_of_.end()) {
    // The agent now holds its context through the pause that follows (none after its last).
    auto next = ws_next_pause_.find(rid->second);
    const PauseKind pause = next == ws_next_pause_.end() ? PauseKind::kSessionEnd : next->second;
    working_set_->Finish(
        rid->second,
        control::RequestEnd{
            .context_tokens = SaturatingAdd(it->second.prompt_tokens, record.report.output_tokens),
            .next_pause = IsReturningPause(pause) ? pause : PauseKind::kSessionEnd},
        loop_->now());
  }
  if (auto pin = pin_keys_.find(record.id); pin != pin_keys_.end()) {
    // An aborted request's session is closing: its prompt is not worth keeping.
    const ConversationId conversation(it->second.session.value());
    if (!record.report.rejected && !record.report.aborted) {
      if (continuum_.has_value()) {
        DecideContinuumPin(engine, it->second.session, pin->second);
      } else if (options_.fixed_ttl.has_value()) {
        fleet_->mutable_engine(engine).PinPrefix(conversation, pin->second.keys,
                                                 *options_.fixed_ttl);
      } else if (const std::optional<TimeNs> until = working_set_->HoldUntil(
                     "session-" + std::to_string(it->second.session.value()));
                 until.has_value() && *until > loop_->now()) {
        // The working set holds the context: the engine keeps it as long.
        fleet_->mutable_engine(engine).PinPrefix(conversation, pin->second.keys,
                                                 *until - loop_->now());
      }
    }
    pin_keys_.erase(pin);
  }
  if (rid != rid_of_.end()) {
    FinishAttempt(rid->second);  // Returns the lease; may end a draining session.
    id_of_rid_.erase(rid->second);
    rid_of_.erase(rid);
  }
  Complete(record.id, &record);
  DispatchResolved();
  AdmitResolvedPrograms();
  EnsureWorkingSetTick();
}

const kv::BlockKeyHasher& GatewayModel::hasher() const {
  return fleet_->engine(EngineId(0)).engine().hasher();
}

int32_t GatewayModel::tokens_per_block() const {
  return fleet_->engine(EngineId(0)).engine().tokens_per_block();
}

std::vector<int64_t> GatewayModel::EndSession(SessionId session) {
  std::vector<int64_t> freed;
  if (!flow_.Knows(session)) return freed;
  if (auto pause = pauses_.find(session); pause != pauses_.end()) {
    continuum_->ObserveNoReturn(pause->second.pause_class);
    pauses_.erase(pause);
  }
  if (options_.program_fcfs) {
    // Program-level FCFS: the session's program (its conversation) has ended.
    for (size_t e = 0; e < static_cast<size_t>(fleet_->num_engines()); ++e) {
      fleet_->mutable_engine(EngineId(static_cast<int32_t>(e)))
          .ForgetProgram(ConversationId(session.value()));
    }
  }
  flow_.Close(session, control::TerminalReason::kFinished, next_close_request_++, loop_->now());
  freed_now_ = &freed;
  PerformActions();
  freed_now_ = nullptr;
  if (working_set_.has_value()) {
    working_set_->EndAgent("session-" + std::to_string(session.value()), loop_->now());
    program_of_.erase(ConversationId(session.value()));
  }
  // Cancelled admission waits resolve in the coordinator; their requests complete now.
  DispatchResolved();
  AdmitResolvedPrograms();
  EnsureWorkingSetTick();
  EnsureSweep();
  return freed;
}

void GatewayModel::FinishAttempt(const std::string& rid) {
  if (working_set_.has_value()) {
    // An attempt that ended without completing on an engine (refused, cancelled, failed to
    // dispatch) leaves no context to hold; a completed one was finished already (a no-op).
    working_set_->Finish(rid, control::RequestEnd{}, loop_->now());
    ws_next_pause_.erase(rid);
  }
  flow_.Finish(rid, loop_->now());
  PerformActions();
  // The session may have become idle: its idle deadline may be the next one.
  EnsureSweep();
}

void GatewayModel::PerformActions() {
  for (std::vector<control::FlowAction<SessionId>> actions = flow_.TakeActions(); !actions.empty();
       actions = flow_.TakeActions()) {
    for (const control::FlowAction<SessionId>& action : actions) {
      if (const auto* cancel = std::get_if<control::CancelAttempt>(&action)) {
        // A ready attempt is dispatched in the same event that readied it, so only an
        // admission wait can be cancelled; its decision arrives through DispatchResolved.
        AGENTKV_CHECK(cancel->awaiting_admission &&
                      (coordinator_ != nullptr || working_set_.has_value()))
            << "cancel of attempt " << cancel->rid << " outside an admission wait";
        if (ws_waiting_.contains(cancel->rid)) {
          working_set_->Cancel(cancel->rid, loop_->now());
        } else {
          coordinator_->Cancel(cancel->rid, loop_->now());
        }
      } else if (const auto* abort = std::get_if<control::AbortOnEveryEngine>(&action)) {
        // The flow aborts only dispatched attempts that have not finished. The engine ends the
        // request at its next step boundary and its completion finishes the attempt; a request
        // finishing in the engine's step in flight completes normally instead.
        auto id = id_of_rid_.find(abort->rid);
        AGENTKV_CHECK(id != id_of_rid_.end())
            << "abort of attempt " << abort->rid << " that is not on an engine";
        ++aborts_requested_;
        aborts_performed_ += fleet_->AbortOnEveryEngine(id->second);
      } else if (const auto* lease = std::get_if<control::ReturnLease>(&action)) {
        coordinator_->Release(lease->lease_id, loop_->now());
      } else if (const auto* close = std::get_if<control::CloseOnEveryEngine<SessionId>>(&action)) {
        std::vector<int64_t> freed = fleet_->CloseSessionOnEveryEngine(close->session);
        engine_session_closes_ += static_cast<int64_t>(freed.size());
        for (int64_t tokens : freed) tokens_freed_by_close_ += tokens;
        if (freed_now_ != nullptr) *freed_now_ = std::move(freed);
        // The simulated fleet always answers a close.
        AGENTKV_CHECK(flow_.OnCloseOutcome(close->session, /*succeeded=*/true).ok());
      } else if (const auto* delivery =
                     std::get_if<control::DeliverParentReturn<SessionId>>(&action)) {
        ++demotion_deliveries_;
        for (const int64_t demoted : fleet_->DemoteFinishedSubagentsOnEveryEngine(
                 ConversationId(delivery->parent.value()))) {
          children_demoted_by_delivery_ += demoted;
        }
      } else if (std::holds_alternative<control::CutUpstream>(action)) {
        AGENTKV_CHECK(false) << "simulated clients never leave";
      }
      // AnswerClose: the simulated agent does not wait for its close's answer.
    }
  }
}

void GatewayModel::EnsureSweep() {
  std::optional<TimeNs> deadline = flow_.NextDrainDeadline();
  if (const std::optional<TimeNs> idle = flow_.NextIdleDeadline()) {
    if (!deadline.has_value() || *idle < *deadline) deadline = idle;
  }
  if (!deadline.has_value() || (sweep_at_.has_value() && *sweep_at_ <= *deadline)) return;
  sweep_at_ = *deadline;
  loop_->Schedule(std::max(*deadline, loop_->now()), [this, at = *deadline] {
    if (sweep_at_ != at) return;  // Superseded by an earlier sweep.
    sweep_at_.reset();
    // A session that was busy again since its deadline was taken is not ended: the flow checks
    // idleness at the sweep's time.
    flow_.Sweep(loop_->now());
    PerformActions();
    DispatchResolved();
    AdmitResolvedPrograms();
    EnsureSweep();
  });
}

void GatewayModel::PollIfStale() {
  if (!last_poll_.has_value() || loop_->now() - *last_poll_ >= poll_interval_) Poll();
}

void GatewayModel::EnsurePolling() {
  if (poll_scheduled_ || in_flight_ == 0) return;
  AGENTKV_CHECK(last_poll_.has_value());
  poll_scheduled_ = true;
  loop_->Schedule(SaturatingAdd(*last_poll_, poll_interval_), [this] {
    poll_scheduled_ = false;
    if (in_flight_ == 0) return;  // Fell idle: polling pauses until the next Submit.
    // A request that arrived at this very time may have polled already.
    if (*last_poll_ == loop_->now()) {
      EnsurePolling();
      return;
    }
    Poll();
  });
}

void GatewayModel::Poll() {
  const TimeNs now = loop_->now();
  last_poll_ = now;
  KvUsageSample sample;
  sample.time = now - origin_;
  std::vector<control::EngineSnapshot> snapshots;
  for (int32_t e = 0; e < fleet_->num_engines(); ++e) {
    const engine::SchedulerGauges g = fleet_->gauges(EngineId(e));
    sample.used_tokens += g.num_used_tokens;
    sample.evictable_tokens += g.evictable_tokens;
    sample.capacity_tokens += g.max_total_num_tokens;
    sample.waiting_requests += g.num_queue_reqs;
    control::EngineSnapshot snapshot;
    snapshot.engine_id = GatewayEngineName(EngineId(e));
    snapshot.max_total_num_tokens = g.max_total_num_tokens;
    snapshot.token_usage = g.token_usage;
    snapshot.num_used_tokens = g.num_used_tokens;
    snapshots.push_back(std::move(snapshot));
  }
  sample.waiting_requests += admission_waiting();
  kv_usage_.push_back(sample);
  if (coordinator_ != nullptr) {
    coordinator_->Reconcile(snapshots, now);
    DispatchResolved();
  }
  if (working_set_.has_value()) {
    working_set_->Reconcile(snapshots, now);
    AdmitResolvedPrograms();
    EnsureWorkingSetTick();
  }
  EnsurePolling();
}

std::vector<std::pair<std::string, double>> GatewayModel::AgenticKvMetrics() {
  const control::SessionLifecycleCounters& closes = flow_.counters();
  if (coordinator_ == nullptr) {
    control::AdmissionCounters counters;
    counters.session_close = closes.close;
    counters.session_close_failure = closes.close_failure;
    return control::AgenticKvMetrics(options_.agentic, counters, 0, std::nullopt);
  }
  const control::BudgetSnapshot s = coordinator_->ledger().Snapshot(loop_->now());
  const control::BudgetView view{
      s.epoch,       s.capacity,      s.reserved_tokens, s.available_tokens,
      s.lease_count, s.kv_usage_mean, s.kv_usage_max,    s.degraded};
  control::AdmissionCounters counters = coordinator_->counters();
  counters.session_close = closes.close;
  counters.session_close_failure = closes.close_failure;
  return control::AgenticKvMetrics(options_.agentic, counters, coordinator_->waiting(), view);
}

const GatewayRecord* GatewayModel::FindRecord(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

Status GatewayModel::CheckDrained() const {
  if (in_flight_ != 0) {
    return InternalError(std::to_string(in_flight_) + " requests still in flight");
  }
  if (!waiting_.empty() || !rid_of_.empty() || !id_of_rid_.empty() || !pin_keys_.empty() ||
      flow_.live_attempts() != 0) {
    return InternalError("gateway bookkeeping not empty: " + std::to_string(waiting_.size()) +
                         " waiting, " + std::to_string(flow_.live_attempts()) + " live attempts, " +
                         std::to_string(rid_of_.size()) + " dispatched");
  }
  if (flow_.active_sessions() != 0 || flow_.terminating_sessions() != 0) {
    return InternalError(std::to_string(flow_.active_sessions() + flow_.terminating_sessions()) +
                         " sessions never ended");
  }
  if (coordinator_ != nullptr) {
    AGENTKV_RETURN_IF_ERROR(coordinator_->CheckInvariants());
    if (coordinator_->ledger().reserved() != 0 || coordinator_->ledger().lease_count() != 0) {
      return InternalError("the ledger still reserves " +
                           std::to_string(coordinator_->ledger().reserved()) + " tokens in " +
                           std::to_string(coordinator_->ledger().lease_count()) + " leases");
    }
    if (coordinator_->waiting() != 0) {
      return InternalError(std::to_string(coordinator_->waiting()) + " admission waiters left");
    }
  }
  if (working_set_.has_value()) {
    AGENTKV_RETURN_IF_ERROR(working_set_->CheckInvariants());
    const control::WorkingSetGauges g = working_set_->Gauges();
    if (!ws_waiting_.empty() || !ws_next_pause_.empty() || g.active_tokens != 0 ||
        g.held_tokens != 0 || g.waiting_programs != 0 || working_set_->agents() != 0) {
      return InternalError("the working set still holds " + std::to_string(g.held_tokens) +
                           " tokens, reserves " + std::to_string(g.active_tokens) + " for " +
                           std::to_string(working_set_->agents()) + " agents, and has " +
                           std::to_string(ws_waiting_.size()) + " waiters");
    }
  }
  flow_.CheckInvariants();
  return Status::Ok();
}

}  // namespace agentkv::sim
