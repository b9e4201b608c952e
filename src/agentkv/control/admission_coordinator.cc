// Invariants: every waiter's ticket is in order_ exactly once among live entries; no ticket
// both waits and holds a lease; order_ never holds more than waiters_ plus skipped entries,
// which are dropped as they reach the head. Admission v2: order_ is unused and v2_order_ holds
// every waiter exactly once, under the key its Waiter records.
#include "agentkv/control/admission_coordinator.h"

#include <unordered_set>

#include "agentkv/base/bounds.h"

namespace agentkv::control {

std::string_view AdmissionActionName(AdmissionAction action) {
  switch (action) {
    case AdmissionAction::kAdmit:
      return "admit";
    case AdmissionAction::kBypass:
      return "bypass";
    case AdmissionAction::kWait:
      return "wait";
    case AdmissionAction::kRefuse:
      return "refuse";
  }
  return "unknown";
}

namespace {

// kRefuse for `reason` (kOversized or kOverShare), with the limit that refused it.
AdmissionDecision Refusal(std::string_view ticket, int64_t tokens, AdmissionReason reason,
                          TimeNs waited, int64_t limit) {
  return AdmissionDecision{AdmissionAction::kRefuse,
                           reason,
                           std::string(ticket),
                           tokens,
                           std::nullopt,
                           -1,
                           waited,
                           limit};
}

}  // namespace

CoordinatorParams CoordinatorParamsFrom(const AgenticOptions& options) {
  CoordinatorParams p;
  p.ledger.headroom = options.agentic_admission_headroom;
  p.ledger.pressure_threshold = options.agentic_admission_pressure_threshold;
  p.ledger.lease_ttl = options.lease_ttl();
  p.ledger.staleness = options.staleness();
  p.max_wait = options.max_wait();
  p.policy = options.agentic_admission_policy;
  p.program_window = options.program_window();
  p.shares.session_share = options.agentic_admission_session_share;
  p.shares.client_share = options.agentic_admission_client_share;
  return p;
}

std::vector<std::pair<std::string, double>> AdmissionCoordinator::StepMetrics(
    const AgenticOptions& options, TimeNs now, bool reset_step) {
  const BudgetSnapshot s = ledger_.Snapshot(now, reset_step);
  const BudgetView view{s.epoch,       s.capacity,      s.reserved_tokens, s.available_tokens,
                        s.lease_count, s.kv_usage_mean, s.kv_usage_max,    s.degraded};
  std::vector<std::pair<std::string, double>> metrics =
      AgenticKvMetrics(options, counters_, waiting(), view);
  if (reset_step) counters_ = AdmissionCounters{};
  return metrics;
}

AdmissionCoordinator::AdmissionCoordinator(const CoordinatorParams& params)
    : params_(params), ledger_(params.ledger), shares_(params.shares) {}

AdmissionDecision AdmissionCoordinator::WaitOrResolved(const std::string& ticket,
                                                       AdmissionReason refusal, int64_t tokens) {
  if (!waiters_.contains(ticket)) {  // Resolved by the drain (e.g. aged at max_wait 0).
    for (auto it = resolved_.begin(); it != resolved_.end(); ++it) {
      if (it->ticket == ticket) {
        AdmissionDecision decision = std::move(*it);
        resolved_.erase(it);
        return decision;
      }
    }
  }
  return AdmissionDecision{AdmissionAction::kWait,
                           refusal,
                           std::string(ticket),
                           tokens,
                           std::nullopt,
                           -1,
                           TimeNs(),
                           std::nullopt};
}

AdmissionDecision AdmissionCoordinator::Bypass(std::string_view ticket, int64_t tokens,
                                               AdmissionReason reason, TimeNs waited) const {
  return AdmissionDecision{AdmissionAction::kBypass,
                           reason,
                           std::string(ticket),
                           tokens,
                           std::nullopt,
                           -1,
                           waited,
                           std::nullopt};
}

std::optional<AdmissionDecision> AdmissionCoordinator::CapOrRefuseSeed(std::string_view ticket,
                                                                       int64_t& tokens,
                                                                       TimeNs waited, TimeNs now) {
  if (ledger_.IsStale(now)) return std::nullopt;
  if (const int64_t largest = ledger_.LargestKnownCapacity(now); tokens > largest) {
    // No engine of the fleet holds that much KV, even with every engine healthy: it can never
    // run, so it never waits.
    ++counters_.refused_oversized;
    return Refusal(ticket, tokens, AdmissionReason::kOversized, waited, largest);
  }
  // It fits an engine but not the ceiling (one engine's headroom, or engines that stopped
  // reporting): it reserves the whole ceiling, so it runs once the budget is empty.
  tokens = std::min(tokens, ledger_.ceiling());
  return std::nullopt;
}

ShareExcess AdmissionCoordinator::OverShare(const ShareHolder& holder, int64_t tokens,
                                            TimeNs now) const {
  if (ledger_.IsStale(now)) return ShareExcess::kNone;
  return shares_.Check(holder, tokens, ledger_.ceiling());
}

AdmissionDecision AdmissionCoordinator::RefuseOverShare(std::string_view ticket, int64_t tokens,
                                                        ShareExcess excess, TimeNs waited) {
  ++counters_.refused_over_share;
  return Refusal(ticket, tokens, AdmissionReason::kOverShare, waited,
                 shares_.Bound(excess, ledger_.ceiling()));
}

AdmissionDecision AdmissionCoordinator::Granted(std::string_view ticket, const GrantResult& grant,
                                                const ShareHolder& holder, TimeNs waited) {
  AGENTKV_CHECK(grant.granted && grant.lease_id.has_value()) << "not a grant";
  shares_.Charge(*grant.lease_id, holder, grant.reservation_tokens);
  return AdmissionDecision{AdmissionAction::kAdmit,
                           grant.reason,
                           std::string(ticket),
                           grant.reservation_tokens,
                           grant.lease_id,
                           grant.owner_epoch,
                           waited,
                           std::nullopt};
}

namespace {

// InvalidArgument naming the first field of `request` out of range: the ticket and the
// optional names (1 to kMaxTicketBytes bytes), the token counts.
Status CheckAcquireRequest(const AcquireRequest& request) {
  if (request.ticket.empty() || request.ticket.size() > kMaxTicketBytes) {
    return InvalidArgumentError("ticket: expected 1 to " + std::to_string(kMaxTicketBytes) +
                                " bytes, got " + std::to_string(request.ticket.size()));
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens("reservation_tokens", request.reservation_tokens));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("prefix_tokens", request.prefix_tokens));
  for (const auto& [field, value] :
       {std::pair{"engine", &request.engine}, std::pair{"prefix_key", &request.prefix_key},
        std::pair{"client", &request.holder.client},
        std::pair{"session", &request.holder.session}}) {
    if (value->has_value() && (value->value().empty() || value->value().size() > kMaxTicketBytes)) {
      return InvalidArgumentError(std::string(field) + ": expected 1 to " +
                                  std::to_string(kMaxTicketBytes) + " bytes, got " +
                                  std::to_string(value->value().size()));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<AdmissionDecision> AdmissionCoordinator::Acquire(const AcquireRequest& request,
                                                          TimeNs now) {
  AGENTKV_RETURN_IF_ERROR(CheckAcquireRequest(request));
  const std::string& ticket = request.ticket;
  const int64_t tokens = request.reservation_tokens;
  if (auto c = cancelled_.find(ticket); c != cancelled_.end()) {
    cancelled_.erase(c);  // Its entry in cancel_order_ is skipped when pruned.
    return Bypass(ticket, tokens, AdmissionReason::kCancelled, TimeNs());
  }
  if (request.is_protected) {
    ++counters_.bypass;
    ++counters_.bypass_protected;
    return Bypass(ticket, tokens, AdmissionReason::kProtected, TimeNs());
  }
  if (const Lease* lease = ledger_.LeaseForTicket(ticket)) {
    return AdmissionDecision{AdmissionAction::kAdmit,
                             AdmissionReason::kCapacityAvailable,
                             ticket,
                             lease->tokens,
                             lease->lease_id,
                             lease->owner_epoch,
                             TimeNs(),
                             std::nullopt};
  }
  if (auto w = waiters_.find(ticket); w != waiters_.end()) {
    if (w->second.requested != tokens) {
      return InvalidArgumentError("ticket " + ticket + " is waiting with a reservation of " +
                                  std::to_string(w->second.requested) + " tokens, retried with " +
                                  std::to_string(tokens));
    }
    return AdmissionDecision{AdmissionAction::kWait,
                             AdmissionReason::kCapacityExhausted,
                             ticket,
                             tokens,
                             std::nullopt,
                             -1,
                             now - w->second.enqueued_at,
                             std::nullopt};
  }
  if (v2()) return AcquireV2(request, now);
  int64_t capped = tokens;
  if (std::optional<AdmissionDecision> refused = CapOrRefuseSeed(ticket, capped, TimeNs(), now)) {
    return *std::move(refused);
  }
  AdmissionReason refusal = AdmissionReason::kCapacityExhausted;
  // Only an empty FIFO lets a newcomer reserve at once, and only within its shares.
  if (waiters_.empty() && OverShare(request.holder, capped, now) == ShareExcess::kNone) {
    const GrantResult grant = ledger_.Reserve(ticket, capped, now);
    if (grant.granted) {
      ++counters_.admit;
      return Granted(ticket, grant, request.holder, TimeNs());
    }
    if (grant.reason == AdmissionReason::kDegraded) {
      ++counters_.bypass;
      ++counters_.bypass_degraded;
      return Bypass(ticket, tokens, AdmissionReason::kDegraded, TimeNs());
    }
    refusal = grant.reason;
  }
  const uint64_t seq = next_seq_++;
  waiters_.emplace(ticket, Waiter{capped, tokens, now, seq, ReserveTarget{}, now, request.holder});
  order_.emplace_back(ticket, seq);
  ++counters_.wait;
  Drain(now);
  return WaitOrResolved(ticket, refusal, capped);
}

std::string AdmissionCoordinator::QueueOf(const ReserveTarget& target) const {
  if (target.engine.has_value() && ledger_.KnowsEngine(*target.engine)) {
    return "engine:" + *target.engine;
  }
  return std::string();
}

std::optional<AdmissionDecision> AdmissionCoordinator::CapOrRefuseV2(std::string_view ticket,
                                                                     int64_t& tokens,
                                                                     ReserveTarget& target,
                                                                     TimeNs waited, TimeNs now) {
  std::optional<TargetLimits> limits = ledger_.LimitsFor(target.engine);
  if (!limits.has_value()) return std::nullopt;
  if (!target.engine.has_value() || !ledger_.KnowsEngine(*target.engine)) {
    // The fleet: its largest engine within the lease TTL, whether or not it reports now.
    limits->capacity = std::max(limits->capacity, ledger_.LargestKnownCapacity(now));
  }
  const int64_t prefix = target.prefix_key.has_value() ? target.prefix_tokens : 0;
  const int64_t total = SaturatingAdd(tokens, prefix);
  if (total > limits->capacity) {
    // No engine it can land on holds that much KV: it can never run, so it never waits.
    ++counters_.refused_oversized;
    return Refusal(ticket, total, AdmissionReason::kOversized, waited, limits->capacity);
  }
  if (total > limits->ceiling) {
    // It fits the engine but not the ceiling: it reserves the whole ceiling (it waits for an
    // empty budget, never forever), its shared prefix included.
    tokens = limits->ceiling;
    target.prefix_key.reset();
    target.prefix_tokens = 0;
  }
  return std::nullopt;
}

StatusOr<AdmissionDecision> AdmissionCoordinator::AcquireV2(const AcquireRequest& request,
                                                            TimeNs now) {
  const std::string& ticket = request.ticket;
  int64_t tokens = request.reservation_tokens;
  ReserveTarget target{request.engine, request.prefix_key,
                       request.prefix_key.has_value() ? request.prefix_tokens : 0};
  if (ledger_.IsStale(now)) {
    ++counters_.bypass;
    ++counters_.bypass_degraded;
    return Bypass(ticket, tokens, AdmissionReason::kDegraded, TimeNs());
  }
  if (std::optional<AdmissionDecision> refused =
          CapOrRefuseV2(ticket, tokens, target, TimeNs(), now)) {
    return *std::move(refused);
  }
  // The window is at most a year (validated), so the difference cannot overflow.
  const TimeNs order_at = request.continuing ? now - params_.program_window : now;
  // A newcomer reserves at once unless a waiter of its own queue comes before it.
  const std::string queue = QueueOf(target);
  bool waiter_ahead = false;
  for (const auto& [at, seq, waiting] : v2_order_) {
    if (at > order_at) break;  // Its sequence is the newest: equal times come before it.
    if (QueueOf(waiters_.at(waiting).target) == queue) {
      waiter_ahead = true;
      break;
    }
  }
  AdmissionReason refusal = AdmissionReason::kCapacityExhausted;
  if (!waiter_ahead && OverShare(request.holder, tokens, now) == ShareExcess::kNone) {
    const GrantResult grant = ledger_.ReserveOn(ticket, tokens, target, now);
    if (grant.granted) {
      ++counters_.admit;
      return Granted(ticket, grant, request.holder, TimeNs());
    }
    refusal = grant.reason;
  }
  const uint64_t seq = next_seq_++;
  auto [w, inserted] = waiters_.emplace(ticket, Waiter{tokens, request.reservation_tokens, now, seq,
                                                       target, order_at, request.holder});
  AGENTKV_CHECK(inserted) << "ticket waits twice: " << ticket;
  AddV2Waiter(ticket, w->second);
  ++counters_.wait;
  DrainV2(now);
  return WaitOrResolved(ticket, refusal, tokens);
}

void AdmissionCoordinator::AddV2Waiter(const std::string& ticket, const Waiter& waiter) {
  v2_order_.emplace(waiter.order_at, waiter.seq, ticket);
  ++v2_targets_[waiter.target.engine];
}

std::set<AdmissionCoordinator::V2Key>::iterator AdmissionCoordinator::EraseV2Waiter(
    std::unordered_map<std::string, Waiter>::iterator w) {
  auto target = v2_targets_.find(w->second.target.engine);
  AGENTKV_CHECK(target != v2_targets_.end() && target->second > 0) << "v2 target count";
  if (--target->second == 0) v2_targets_.erase(target);
  auto next = v2_order_.erase(v2_order_.find(V2Key{w->second.order_at, w->second.seq, w->first}));
  waiters_.erase(w);
  return next;
}

void AdmissionCoordinator::DrainV2(TimeNs now) {
  // Queues whose first waiter was refused in this pass: nothing behind it in that queue goes
  // first (no starvation of large requests), while other queues go on.
  std::set<std::string> blocked;
  // The queues there are (an engine the last poll did not report waits in the fleet's queue).
  std::set<std::string> queues;
  for (const auto& [engine, count] : v2_targets_) queues.insert(QueueOf(ReserveTarget{engine}));
  for (auto it = v2_order_.begin(); it != v2_order_.end();) {
    // Once every queue is blocked, only an aged waiter could still be resolved, and none is
    // left: a later entry's enqueue time is at least its order time, which only grows.
    if (blocked.size() == queues.size() && std::get<0>(*it) > now - params_.max_wait) break;
    auto w = waiters_.find(std::get<2>(*it));
    AGENTKV_CHECK(w != waiters_.end()) << "v2 order names no waiter";
    const std::string& ticket = w->first;
    Waiter& waiter = w->second;
    const TimeNs waited = now - waiter.enqueued_at;
    std::optional<AdmissionDecision> decision;
    const ShareExcess excess = OverShare(waiter.holder, waiter.tokens, now);
    if (waited >= params_.max_wait) {
      if (excess != ShareExcess::kNone) {
        decision = RefuseOverShare(ticket, waiter.tokens, excess, waited);
      } else {
        ++counters_.bypass;
        ++counters_.bypass_aged;
        decision = Bypass(ticket, waiter.tokens, AdmissionReason::kAged, waited);
      }
    } else {
      const std::string queue = QueueOf(waiter.target);
      if (blocked.contains(queue) || excess != ShareExcess::kNone) {
        ++it;  // An over-share waiter waits without blocking its queue.
        continue;
      }
      decision = CapOrRefuseV2(ticket, waiter.tokens, waiter.target, waited, now);
      if (!decision.has_value()) {
        const GrantResult grant = ledger_.ReserveOn(ticket, waiter.tokens, waiter.target, now);
        if (grant.granted) {
          ++counters_.wait_granted;
          counters_.wait_seconds_sum += waited.seconds();
          decision = Granted(ticket, grant, waiter.holder, waited);
        } else if (grant.reason == AdmissionReason::kDegraded) {
          ++counters_.bypass;
          ++counters_.bypass_degraded;
          decision = Bypass(ticket, waiter.tokens, AdmissionReason::kDegraded, waited);
        } else {
          blocked.insert(queue);
          ++it;
          continue;
        }
      }
    }
    Resolve(*std::move(decision));
    it = EraseV2Waiter(w);
  }
}

void AdmissionCoordinator::Drain(TimeNs now) {
  if (v2()) {
    DrainV2(now);
    return;
  }
  // Strict head-of-line among the waiters within their shares: an over-share waiter is passed
  // over (it stays in place), the first one the ledger refuses stops the pass.
  size_t i = 0;
  while (i < order_.size()) {
    auto w = waiters_.find(order_[i].first);
    if (w == waiters_.end() || w->second.seq != order_[i].second) {  // Stale entry.
      order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    const std::string& ticket = w->first;
    Waiter& waiter = w->second;
    const TimeNs waited = now - waiter.enqueued_at;
    const ShareExcess excess = OverShare(waiter.holder, waiter.tokens, now);
    std::optional<AdmissionDecision> decision;
    if (waited >= params_.max_wait) {
      if (excess != ShareExcess::kNone) {
        decision = RefuseOverShare(ticket, waiter.tokens, excess, waited);
      } else {
        ++counters_.bypass;
        ++counters_.bypass_aged;
        decision = Bypass(ticket, waiter.tokens, AdmissionReason::kAged, waited);
      }
    } else if (std::optional<AdmissionDecision> refused =
                   CapOrRefuseSeed(ticket, waiter.tokens, waited, now)) {
      decision = *std::move(refused);
    } else if (excess != ShareExcess::kNone) {
      ++i;
      continue;
    } else {
      const GrantResult grant = ledger_.Reserve(ticket, waiter.tokens, now);
      if (grant.granted) {
        ++counters_.wait_granted;
        counters_.wait_seconds_sum += waited.seconds();
        decision = Granted(ticket, grant, waiter.holder, waited);
      } else if (grant.reason == AdmissionReason::kDegraded) {
        ++counters_.bypass;
        ++counters_.bypass_degraded;
        decision = Bypass(ticket, waiter.tokens, AdmissionReason::kDegraded, waited);
      } else {
        return;  // Strict head-of-line: nothing behind it goes first.
      }
    }
    Resolve(*std::move(decision));
    waiters_.erase(w);
    order_.erase(order_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void AdmissionCoordinator::Resolve(AdmissionDecision decision) {
  resolved_.push_back(std::move(decision));
}

void AdmissionCoordinator::Release(std::string_view lease_id, TimeNs now) {
  ledger_.Release(lease_id);
  shares_.Release(lease_id);
  Drain(now);
}

void AdmissionCoordinator::Cancel(std::string_view ticket, TimeNs now) {
  if (auto w = waiters_.find(std::string(ticket)); w != waiters_.end()) {
    ++counters_.cancelled;
    Resolve(
        Bypass(ticket, w->second.tokens, AdmissionReason::kCancelled, now - w->second.enqueued_at));
    if (v2()) {
      EraseV2Waiter(w);
    } else {
      waiters_.erase(w);  // Its FIFO entry is skipped when it reaches the head.
    }
  } else if (ledger_.LeaseForTicket(ticket) == nullptr) {
    // Not seen yet: remember it, so that the acquire that follows bypasses.
    cancelled_.insert_or_assign(std::string(ticket), now);
    cancel_order_.emplace_back(std::string(ticket), now);
    PruneCancels(now);
  }
  // A lease granted concurrently with the cancel.
  if (const Lease* lease = ledger_.LeaseForTicket(ticket)) shares_.Release(lease->lease_id);
  ledger_.ReleaseTicket(ticket);
  Drain(now);
}

void AdmissionCoordinator::PruneCancels(TimeNs now) {
  while (!cancel_order_.empty()) {
    const auto& [ticket, at] = cancel_order_.front();
    auto c = cancelled_.find(ticket);
    const bool live = c != cancelled_.end() && c->second == at;
    const bool over_bound = static_cast<int64_t>(cancelled_.size()) > params_.max_cancel_tombstones;
    if (live && now - at <= params_.cancel_tombstone_retention && !over_bound) break;
    if (live) cancelled_.erase(c);
    cancel_order_.pop_front();
  }
}

void AdmissionCoordinator::Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now) {
  ledger_.Reconcile(snapshots, now);
  const std::vector<std::string> expired = ledger_.ExpireTtl(now);
  for (const std::string& lease_id : expired) shares_.Release(lease_id);
  counters_.lease_expired += static_cast<int64_t>(expired.size());
  PruneCancels(now);
  Drain(now);
}

void AdmissionCoordinator::Tick(TimeNs now) { Drain(now); }

void AdmissionCoordinator::Shutdown() {
  for (const auto& [ticket, seq] : order_) {
    auto w = waiters_.find(ticket);
    if (w == waiters_.end() || w->second.seq != seq) continue;
    Resolve(Bypass(ticket, w->second.tokens, AdmissionReason::kDegraded, TimeNs()));
    waiters_.erase(w);
  }
  order_.clear();
  for (const auto& [at, seq, ticket] : v2_order_) {
    auto w = waiters_.find(ticket);
    if (w == waiters_.end()) continue;
    Resolve(Bypass(ticket, w->second.tokens, AdmissionReason::kDegraded, TimeNs()));
    waiters_.erase(w);
  }
  v2_order_.clear();
  v2_targets_.clear();
  ledger_ = BudgetLedger(params_.ledger);
  shares_ = AdmissionShares(params_.shares);
  cancelled_.clear();
  cancel_order_.clear();
}

TicketsReleased AdmissionCoordinator::ReleaseTickets(std::span<const std::string> tickets,
                                                     TimeNs now) {
  TicketsReleased released;
  for (const std::string& ticket : tickets) {
    if (auto w = waiters_.find(ticket); w != waiters_.end()) {
      ++counters_.cancelled;
      ++released.waiters;
      Resolve(Bypass(ticket, w->second.tokens, AdmissionReason::kCancelled,
                     now - w->second.enqueued_at));
      if (v2()) {
        EraseV2Waiter(w);
      } else {
        waiters_.erase(w);  // Its FIFO entry is skipped when it reaches the head.
      }
    } else if (const Lease* lease = ledger_.LeaseForTicket(ticket)) {
      ++released.leases;
      released.tokens += lease->tokens;
      shares_.Release(lease->lease_id);
      ledger_.ReleaseTicket(ticket);
    }
  }
  Drain(now);
  return released;
}

bool AdmissionCoordinator::Holds(std::string_view ticket) const {
  return waiters_.contains(std::string(ticket)) || ledger_.LeaseForTicket(ticket) != nullptr;
}

std::vector<AdmissionDecision> AdmissionCoordinator::TakeResolved() {
  std::vector<AdmissionDecision> out;
  out.swap(resolved_);
  return out;
}

Status AdmissionCoordinator::CheckInvariants() const {
  AGENTKV_RETURN_IF_ERROR(ledger_.CheckInvariants());
  AGENTKV_RETURN_IF_ERROR(shares_.CheckInvariants());
  Status shares_held = Status::Ok();
  shares_.ForEachLease([&](const std::string& lease_id) {
    if (shares_held.ok() && !ledger_.HoldsLease(lease_id)) {
      shares_held = InternalError("lease " + lease_id + " is charged to a share but not held");
    }
  });
  AGENTKV_RETURN_IF_ERROR(shares_held);
  if (v2()) {
    if (!order_.empty()) return InternalError("the seed FIFO is used under admission v2");
    std::map<std::optional<std::string>, int64_t> targets;
    for (const auto& [ticket, waiter] : waiters_) ++targets[waiter.target.engine];
    if (targets != v2_targets_) return InternalError("v2 waiter counts per target disagree");
    if (v2_order_.size() != waiters_.size()) {
      return InternalError("v2 order holds " + std::to_string(v2_order_.size()) + " entries for " +
                           std::to_string(waiters_.size()) + " waiters");
    }
    for (const auto& [at, seq, ticket] : v2_order_) {
      auto w = waiters_.find(ticket);
      if (w == waiters_.end() || w->second.order_at != at || w->second.seq != seq) {
        return InternalError("v2 order entry of ticket " + ticket + " is not its waiter's");
      }
      if (ledger_.LeaseForTicket(ticket) != nullptr) {
        return InternalError("ticket " + ticket + " both waits and holds a lease");
      }
    }
    return Status::Ok();
  }
  std::unordered_set<std::string> seen;
  for (const auto& [ticket, seq] : order_) {
    auto w = waiters_.find(ticket);
    if (w != waiters_.end() && w->second.seq == seq && !seen.insert(ticket).second) {
      return InternalError("ticket " + ticket + " waits twice in the FIFO");
    }
  }
  if (seen.size() != waiters_.size()) return InternalError("a waiter is missing from the FIFO");
  for (const auto& [ticket, waiter] : waiters_) {
    if (ledger_.LeaseForTicket(ticket) != nullptr) {
      return InternalError("ticket " + ticket + " both waits and holds a lease");
    }
  }
  return Status::Ok();
}

}  // namespace agentkv::control
