#include "agentkv/sim/gateway_model.h"

#include <string>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/control/admission_metrics.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/control/reservation.h"

// Invariants (CheckDrained at the end of a run):
// - in_flight_ counts requests received and not completed; each is either in waiting_ (by
//   rid) or dispatched to an engine (records_[id].dispatched set, completion pending).
// - lease_of_ holds the lease of each dispatched request admitted with one, until completion.
// - Every request's attempt is finished in the planner when it completes.

namespace agentkv::sim {
namespace {

std::string SessionName(SessionId session) { return std::to_string(session.value()); }

}  // namespace

Status GatewayModelOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(agentic.Validate());
  if (!(agentic.poll_interval_s > 0.0)) {
    return InvalidArgumentError("poll_interval_s must be > 0, got " +
                                std::to_string(agentic.poll_interval_s));
  }
  if (continuum_ttl.has_value() && *continuum_ttl <= TimeNs(0)) {
    return InvalidArgumentError("continuum_ttl must be > 0 s, got " +
                                std::to_string(continuum_ttl->seconds()) + " s");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<GatewayModel>> GatewayModel::Create(EventLoop* loop, FleetModel* fleet,
                                                             const GatewayModelOptions& options) {
  AGENTKV_CHECK(loop != nullptr && fleet != nullptr);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<GatewayModel> gateway(new GatewayModel(loop, fleet, options));
  fleet->set_completion_callback([g = gateway.get()](EngineId engine,
                                                     const EngineRequestRecord& record) {
    g->OnEngineComplete(engine, record);
  });
  return gateway;
}

GatewayModel::GatewayModel(EventLoop* loop, FleetModel* fleet, const GatewayModelOptions& options)
    : loop_(loop),
      fleet_(fleet),
      options_(options),
      poll_interval_(options.agentic.poll_interval()),
      planner_(control::SessionLifecycleOptions{options.agentic.agentic_session_lifecycle}),
      origin_(loop->now()) {
  if (options.agentic.agentic_program_admission) {
    coordinator_ = std::make_unique<control::AdmissionCoordinator>(
        control::CoordinatorParamsFrom(options.agentic));
  }
}

Status GatewayModel::Submit(GatewayRequest request) {
  const RequestId id = request.request.id;
  if (records_.contains(id)) {
    return AlreadyExistsError("request " + std::to_string(id.value()) + " was already received");
  }
  const std::string session = SessionName(request.session);
  if (!planner_.phase(session).ok()) AGENTKV_RETURN_IF_ERROR(planner_.OpenSession(session));
  AGENTKV_ASSIGN_OR_RETURN(std::string rid,
                           planner_.BeginAttempt(session, std::to_string(id.value()), 0));
  PollIfStale();
  GatewayRecord record;
  record.id = id;
  record.session = request.session;
  record.received = loop_->now();
  record.prompt_tokens = request.request.prompt_tokens;
  record.prompt_blocks = static_cast<int64_t>(request.request.prompt_keys.size());
  Pending pending{std::move(request), rid};
  if (coordinator_ == nullptr) {
    records_.emplace(id, record);
    ++in_flight_;
    EnsurePolling();
    Status dispatched = Dispatch(std::move(pending), nullptr);
    if (!dispatched.ok()) {
      records_.erase(id);
      --in_flight_;
    }
    return dispatched;
  }
  control::AcquireRequest acquire;
  acquire.ticket = rid;
  acquire.reservation_tokens = control::ReservationTokens(control::AttemptShape{
      .prefix_tokens = pending.request.request.prompt_tokens,
      .pending_tokens = 0,
      .max_new_tokens = pending.request.request.max_new_tokens,
      .expected_decode_cap = options_.agentic.agentic_admission_expected_decode_cap});
  StatusOr<control::AdmissionDecision> decision = coordinator_->Acquire(acquire, loop_->now());
  AGENTKV_CHECK(decision.ok()) << decision.status();
  records_.emplace(id, record);
  ++in_flight_;
  EnsurePolling();
  DispatchResolved();  // The Acquire's drain may have resolved older waiters (e.g. aged ones).
  if (decision->action == control::AdmissionAction::kWait) {
    waiting_.emplace(rid, std::move(pending));
    return Status::Ok();
  }
  if (decision->action == control::AdmissionAction::kRefuse) {
    Refuse(pending, *decision);
    return Status::Ok();
  }
  Status dispatched = Dispatch(std::move(pending), &*decision);
  if (!dispatched.ok()) {
    records_.erase(id);
    --in_flight_;
  }
  return dispatched;
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
    if (decision != nullptr && decision->lease_id.has_value()) {
      coordinator_->Release(*decision->lease_id, loop_->now());
    }
    AGENTKV_CHECK(planner_.MarkFinished(pending.rid).ok());
    return error;
  };
  StatusOr<control::GenerateIdentity> identity = planner_.MarkDispatched(pending.rid);
  if (!identity.ok()) return abandon(identity.status());
  if (identity->session_id.has_value()) request.request.kv_options.session = request.session;
  if (options_.continuum_ttl.has_value() && request.ends_in_tool_call) {
    pin_keys_[id] = request.request.prompt_keys;
  }
  StatusOr<EngineId> engine = fleet_->Submit(std::move(request.request), request.routing_key);
  if (!engine.ok()) {
    pin_keys_.erase(id);
    return abandon(engine.status());
  }
  record.dispatched = loop_->now();
  record.engine = *engine;
  rid_of_.emplace(id, pending.rid);
  if (decision != nullptr && decision->lease_id.has_value()) {
    lease_of_.emplace(id, *decision->lease_id);
  }
  return Status::Ok();
}

void GatewayModel::DispatchResolved() {
  if (coordinator_ == nullptr) return;
  // A dispatch failure ends its request here, which may resolve more waiters: loop until none.
  for (std::vector<control::AdmissionDecision> resolved = coordinator_->TakeResolved();
       !resolved.empty(); resolved = coordinator_->TakeResolved()) {
    for (const control::AdmissionDecision& decision : resolved) {
      auto it = waiting_.find(decision.ticket);
      AGENTKV_CHECK(it != waiting_.end()) << "resolved ticket " << decision.ticket << " not waiting";
      Pending pending = std::move(it->second);
      waiting_.erase(it);
      const RequestId id = pending.request.request.id;
      if (decision.action == control::AdmissionAction::kRefuse) {
        Refuse(pending, decision);
        continue;
      }
      Status dispatched = Dispatch(std::move(pending), &decision);
      if (!dispatched.ok()) {
        GatewayRecord& record = records_.at(id);
        record.dispatch_error = dispatched;
        --in_flight_;
        if (on_complete_) on_complete_(record, nullptr);
      }
    }
  }
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
  account.report.uncached_tokens = pending.request.request.prompt_tokens;
  account.cold_tokens = pending.request.request.prompt_tokens;
  const EngineRequestRecord& stored = refused_.insert_or_assign(id, account).first->second;
  AGENTKV_CHECK(planner_.MarkFinished(pending.rid).ok());
  --in_flight_;
  if (on_complete_) on_complete_(record, &stored);
}

const EngineRequestRecord* GatewayModel::RefusedRecord(RequestId id) const {
  auto it = refused_.find(id);
  return it == refused_.end() ? nullptr : &it->second;
}

void GatewayModel::OnEngineComplete(EngineId engine, const EngineRequestRecord& record) {
  auto it = records_.find(record.id);
  AGENTKV_CHECK(it != records_.end()) << "engine completed unknown request " << record.id;
  --in_flight_;
  if (auto pin = pin_keys_.find(record.id); pin != pin_keys_.end()) {
    if (!record.report.rejected) {
      fleet_->mutable_engine(engine).PinPrefix(ConversationId(it->second.session.value()),
                                               pin->second, *options_.continuum_ttl);
    }
    pin_keys_.erase(pin);
  }
  if (auto lease = lease_of_.find(record.id); lease != lease_of_.end()) {
    coordinator_->Release(lease->second, loop_->now());
    lease_of_.erase(lease);
  }
  if (auto rid = rid_of_.find(record.id); rid != rid_of_.end()) {
    AGENTKV_CHECK(planner_.MarkFinished(rid->second).ok());
    rid_of_.erase(rid);
  }
  if (on_complete_) on_complete_(it->second, &record);
  DispatchResolved();
}

std::vector<int64_t> GatewayModel::EndSession(SessionId session) {
  const std::string name = SessionName(session);
  std::vector<int64_t> freed;
  if (!planner_.phase(name).ok()) return freed;
  AGENTKV_CHECK(planner_.Terminate(name, control::TerminalReason::kFinished).ok());
  for (const control::LifecycleAction& action : planner_.TakeActions()) {
    if (const auto* close = std::get_if<control::CloseSessionAction>(&action)) {
      freed = fleet_->CloseSessionOnEveryEngine(SessionId(std::stoll(close->session_id)));
      engine_session_closes_ += static_cast<int64_t>(freed.size());
      for (int64_t tokens : freed) tokens_freed_by_close_ += tokens;
      AGENTKV_CHECK(planner_.OnCloseOutcome(close->session_id, /*succeeded=*/true).ok());
    } else {
      // The driver ends a session only after its last request completed, so there is nothing
      // to cancel or abort.
      AGENTKV_CHECK(false) << "unexpected lifecycle action at the end of session " << name;
    }
  }
  if (planner_.phase(name).ok() && *planner_.phase(name) == control::SessionPhase::kTerminal) {
    AGENTKV_CHECK(planner_.ForgetSession(name).ok());
  }
  return freed;
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
    snapshot.engine_id = "engine-" + std::to_string(e);
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
  EnsurePolling();
}

std::vector<std::pair<std::string, double>> GatewayModel::AgenticKvMetrics() {
  const control::SessionLifecycleCounters& closes = planner_.counters();
  if (coordinator_ == nullptr) {
    control::AdmissionCounters counters;
    counters.session_close = closes.close;
    counters.session_close_failure = closes.close_failure;
    return control::AgenticKvMetrics(options_.agentic, counters, 0, std::nullopt);
  }
  const control::BudgetSnapshot s = coordinator_->ledger().Snapshot(loop_->now());
  const control::BudgetView view{s.epoch,       s.capacity,      s.reserved_tokens,
                                 s.available_tokens, s.lease_count, s.kv_usage_mean,
                                 s.kv_usage_max, s.degraded};
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
  if (!waiting_.empty() || !lease_of_.empty() || !rid_of_.empty() || !pin_keys_.empty()) {
    return InternalError("gateway bookkeeping not empty: " + std::to_string(waiting_.size()) +
                         " waiting, " + std::to_string(lease_of_.size()) + " leases, " +
                         std::to_string(rid_of_.size()) + " attempts");
  }
  if (planner_.session_count() != 0) {
    return InternalError(std::to_string(planner_.session_count()) + " sessions never ended");
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
  planner_.CheckInvariants();
  return Status::Ok();
}

}  // namespace agentkv::sim
