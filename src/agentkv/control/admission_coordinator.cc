// Invariants: every waiter's ticket is in order_ exactly once among live entries; no ticket
// both waits and holds a lease; order_ never holds more than waiters_ plus skipped entries,
// which are dropped as they reach the head.
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

CoordinatorParams CoordinatorParamsFrom(const AgenticOptions& options) {
  CoordinatorParams p;
  p.ledger.headroom = options.agentic_admission_headroom;
  p.ledger.pressure_threshold = options.agentic_admission_pressure_threshold;
  p.ledger.lease_ttl = options.lease_ttl();
  p.ledger.staleness = options.staleness();
  p.max_wait = options.max_wait();
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
    : params_(params), ledger_(params.ledger) {}

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

std::optional<AdmissionDecision> AdmissionCoordinator::RefuseIfOversized(std::string_view ticket,
                                                                         int64_t tokens,
                                                                         TimeNs waited,
                                                                         TimeNs now) {
  if (ledger_.IsStale(now) || tokens <= ledger_.ceiling()) return std::nullopt;
  ++counters_.refused_oversized;
  return AdmissionDecision{AdmissionAction::kRefuse,
                           AdmissionReason::kOversized,
                           std::string(ticket),
                           tokens,
                           std::nullopt,
                           -1,
                           waited,
                           ledger_.ceiling()};
}

StatusOr<AdmissionDecision> AdmissionCoordinator::Acquire(const AcquireRequest& request,
                                                          TimeNs now) {
  const std::string& ticket = request.ticket;
  const int64_t tokens = request.reservation_tokens;
  if (ticket.empty() || ticket.size() > kMaxTicketBytes) {
    return InvalidArgumentError("ticket: expected 1 to " + std::to_string(kMaxTicketBytes) +
                                " bytes, got " + std::to_string(ticket.size()));
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens("reservation_tokens", tokens));
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
    if (w->second.tokens != tokens) {
      return InvalidArgumentError("ticket " + ticket + " is waiting with a reservation of " +
                                  std::to_string(w->second.tokens) + " tokens, retried with " +
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
  if (std::optional<AdmissionDecision> refused = RefuseIfOversized(ticket, tokens, TimeNs(), now)) {
    return *std::move(refused);
  }
  AdmissionReason refusal = AdmissionReason::kCapacityExhausted;
  if (waiters_.empty()) {  // Only an empty FIFO lets a newcomer reserve at once.
    const GrantResult grant = ledger_.Reserve(ticket, tokens, now);
    if (grant.granted) {
      ++counters_.admit;
      return AdmissionDecision{
          AdmissionAction::kAdmit, grant.reason,      ticket,   grant.reservation_tokens,
          grant.lease_id,          grant.owner_epoch, TimeNs(), std::nullopt};
    }
    if (grant.reason == AdmissionReason::kDegraded) {
      ++counters_.bypass;
      ++counters_.bypass_degraded;
      return Bypass(ticket, tokens, AdmissionReason::kDegraded, TimeNs());
    }
    refusal = grant.reason;
  }
  const uint64_t seq = next_seq_++;
  waiters_.emplace(ticket, Waiter{tokens, now, seq});
  order_.emplace_back(ticket, seq);
  ++counters_.wait;
  Drain(now);
  if (!waiters_.contains(ticket)) {  // Resolved by the drain (e.g. aged at max_wait 0).
    for (auto it = resolved_.begin(); it != resolved_.end(); ++it) {
      if (it->ticket == ticket) {
        AdmissionDecision decision = std::move(*it);
        resolved_.erase(it);
        return decision;
      }
    }
  }
  return AdmissionDecision{AdmissionAction::kWait, refusal, ticket,   tokens,
                           std::nullopt,           -1,      TimeNs(), std::nullopt};
}

void AdmissionCoordinator::Drain(TimeNs now) {
  while (!order_.empty()) {
    auto w = waiters_.find(order_.front().first);
    if (w == waiters_.end() || w->second.seq != order_.front().second) {  // Stale entry.
      order_.pop_front();
      continue;
    }
    const std::string& ticket = w->first;
    const Waiter waiter = w->second;
    const TimeNs waited = now - waiter.enqueued_at;
    if (waited >= params_.max_wait) {
      ++counters_.bypass;
      ++counters_.bypass_aged;
      Resolve(Bypass(ticket, waiter.tokens, AdmissionReason::kAged, waited));
    } else if (std::optional<AdmissionDecision> refused =
                   RefuseIfOversized(ticket, waiter.tokens, waited, now)) {
      Resolve(*std::move(refused));
    } else {
      const GrantResult grant = ledger_.Reserve(ticket, waiter.tokens, now);
      if (grant.granted) {
        ++counters_.wait_granted;
        counters_.wait_seconds_sum += waited.seconds();
        Resolve(AdmissionDecision{AdmissionAction::kAdmit, grant.reason, ticket,
                                  grant.reservation_tokens, grant.lease_id, grant.owner_epoch,
                                  waited, std::nullopt});
      } else if (grant.reason == AdmissionReason::kDegraded) {
        ++counters_.bypass;
        ++counters_.bypass_degraded;
        Resolve(Bypass(ticket, waiter.tokens, AdmissionReason::kDegraded, waited));
      } else {
        return;  // Strict head-of-line: nothing behind the head goes first.
      }
    }
    waiters_.erase(w);
    order_.pop_front();
  }
}

void AdmissionCoordinator::Resolve(AdmissionDecision decision) {
  resolved_.push_back(std::move(decision));
}

void AdmissionCoordinator::Release(std::string_view lease_id, TimeNs now) {
  ledger_.Release(lease_id);
  Drain(now);
}

void AdmissionCoordinator::Cancel(std::string_view ticket, TimeNs now) {
  if (auto w = waiters_.find(std::string(ticket)); w != waiters_.end()) {
    ++counters_.cancelled;
    Resolve(
        Bypass(ticket, w->second.tokens, AdmissionReason::kCancelled, now - w->second.enqueued_at));
    waiters_.erase(w);  // Its FIFO entry is skipped when it reaches the head.
  } else if (ledger_.LeaseForTicket(ticket) == nullptr) {
    // Not seen yet: remember it, so that the acquire that follows bypasses.
    cancelled_.insert_or_assign(std::string(ticket), now);
    cancel_order_.emplace_back(std::string(ticket), now);
    PruneCancels(now);
  }
  ledger_.ReleaseTicket(ticket);  // A lease granted concurrently with the cancel.
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
  counters_.lease_expired += static_cast<int64_t>(ledger_.ExpireTtl(now).size());
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
  ledger_ = BudgetLedger(params_.ledger);
  cancelled_.clear();
  cancel_order_.clear();
}

std::vector<AdmissionDecision> AdmissionCoordinator::TakeResolved() {
  std::vector<AdmissionDecision> out;
  out.swap(resolved_);
  return out;
}

Status AdmissionCoordinator::CheckInvariants() const {
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
