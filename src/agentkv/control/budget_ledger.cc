// Invariants: reserved_ equals the sum of live lease tokens; leases_ and lease_by_ticket_
// describe the same leases; a ledger without a poll has ceiling_ 0. No arithmetic can
// overflow: engine capacities are in [0, kMaxTokens] (others are not healthy), their sum
// saturates, and a grant never takes reserved_ past ceiling_ (itself below int64's limit).
#include "agentkv/control/budget_ledger.h"

#include <algorithm>
#include <cmath>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::control {

std::string_view AdmissionReasonName(AdmissionReason reason) {
  switch (reason) {
    case AdmissionReason::kCapacityAvailable:
      return "capacity_available";
    case AdmissionReason::kCapacityExhausted:
      return "capacity_exhausted";
    case AdmissionReason::kPressureGuard:
      return "pressure_guard";
    case AdmissionReason::kProtected:
      return "protected";
    case AdmissionReason::kAged:
      return "aged";
    case AdmissionReason::kDegraded:
      return "degraded";
    case AdmissionReason::kCancelled:
      return "cancelled";
    case AdmissionReason::kOversized:
      return "oversized";
  }
  return "unknown";
}

bool IsUsable(const EngineSnapshot& snapshot) {
  return snapshot.healthy && snapshot.max_total_num_tokens > 0 &&
         snapshot.max_total_num_tokens <= kMaxTokens && std::isfinite(snapshot.token_usage);
}

BudgetLedger::BudgetLedger(const LedgerParams& params) : params_(params) {
  AGENTKV_CHECK(params.headroom > 0 && params.headroom <= 1);
  AGENTKV_CHECK(params.pressure_threshold > 0 && params.pressure_threshold <= 1);
}

void BudgetLedger::Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now) {
  std::vector<const EngineSnapshot*> healthy;
  for (const EngineSnapshot& s : snapshots) {
    if (IsUsable(s)) healthy.push_back(&s);
  }
  if (healthy.empty()) {
    Invalidate();
    return;
  }
  std::vector<std::string> signature;
  for (const EngineSnapshot* s : healthy) signature.push_back(s->engine_id);
  std::sort(signature.begin(), signature.end());
  if (signature != worker_signature_) {
    ++epoch_;
    worker_signature_ = std::move(signature);
  }
  double sum = 0;
  double worst = 0;
  int64_t capacity = 0;
  for (const EngineSnapshot* s : healthy) {
    const double usage = std::clamp(s->token_usage, 0.0, 1.0);
    sum += usage;
    worst = std::max(worst, usage);
    capacity = SaturatingAdd(capacity, s->max_total_num_tokens);
  }
  avg_usage_ = sum / static_cast<double>(healthy.size());
  max_usage_ = worst;
  peak_usage_ = std::max(peak_usage_, max_usage_);
  usage_sum_ += avg_usage_;
  ++usage_count_;
  // headroom <= 1, so the product is at most the saturated capacity; the clamp only absorbs
  // double rounding at that limit.
  ceiling_ = static_cast<int64_t>(
      std::min(std::floor(static_cast<double>(capacity) * params_.headroom), 9.2e18));
  last_snapshot_at_ = now;
}

void BudgetLedger::Invalidate() {
  ceiling_ = 0;
  last_snapshot_at_.reset();
}

bool BudgetLedger::IsStale(TimeNs now) const {
  return ceiling_ <= 0 || !last_snapshot_at_.has_value() ||
         now - *last_snapshot_at_ > params_.staleness;
}

GrantResult BudgetLedger::Reserve(std::string_view ticket, int64_t tokens, TimeNs now) {
  AGENTKV_CHECK(tokens >= 0 && tokens <= kMaxTokens) << "reservation of " << tokens << " tokens";
  if (const Lease* existing = LeaseForTicket(ticket)) {
    return GrantResult{true, AdmissionReason::kCapacityAvailable, existing->lease_id, epoch_,
                       existing->tokens};
  }
  GrantResult refused{false, AdmissionReason::kDegraded, std::nullopt, epoch_, tokens};
  if (IsStale(now)) return refused;
  if (max_usage_ >= params_.pressure_threshold) {
    refused.reason = AdmissionReason::kPressureGuard;
    return refused;
  }
  if (tokens > ceiling_ - reserved_) {
    refused.reason = AdmissionReason::kCapacityExhausted;
    return refused;
  }
  Lease lease{std::to_string(epoch_) + ":" + std::string(ticket), std::string(ticket), tokens,
              epoch_, now};
  lease_by_ticket_.emplace(lease.ticket, lease.lease_id);
  const std::string id = lease.lease_id;
  leases_.emplace(id, std::move(lease));
  reserved_ += tokens;
  return GrantResult{true, AdmissionReason::kCapacityAvailable, id, epoch_, tokens};
}

void BudgetLedger::Release(std::string_view lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  reserved_ = std::max<int64_t>(0, reserved_ - it->second.tokens);
  lease_by_ticket_.erase(it->second.ticket);
  leases_.erase(it);
}

void BudgetLedger::ReleaseTicket(std::string_view ticket) {
  auto it = lease_by_ticket_.find(ticket);
  if (it == lease_by_ticket_.end()) return;
  const std::string lease_id = it->second;
  Release(lease_id);
}

const Lease* BudgetLedger::LeaseForTicket(std::string_view ticket) const {
  auto it = lease_by_ticket_.find(ticket);
  if (it == lease_by_ticket_.end()) return nullptr;
  return &leases_.at(it->second);
}

std::vector<std::string> BudgetLedger::ExpireTtl(TimeNs now) {
  std::vector<std::string> expired;
  for (const auto& [id, lease] : leases_) {
    if (now - lease.created_at > params_.lease_ttl) expired.push_back(id);
  }
  for (const std::string& id : expired) Release(id);
  return expired;
}

BudgetSnapshot BudgetLedger::Snapshot(TimeNs now, bool reset_usage_window) {
  BudgetSnapshot s;
  s.epoch = epoch_;
  s.capacity = ceiling_;
  s.reserved_tokens = reserved_;
  s.available_tokens = std::max<int64_t>(0, ceiling_ - reserved_);
  s.lease_count = lease_count();
  s.kv_usage_mean = usage_count_ > 0 ? usage_sum_ / static_cast<double>(usage_count_) : 0.0;
  s.kv_usage_max = peak_usage_;
  s.degraded = IsStale(now);
  if (reset_usage_window) {
    usage_sum_ = 0;
    usage_count_ = 0;
    peak_usage_ = max_usage_;
  }
  return s;
}

}  // namespace agentkv::control
