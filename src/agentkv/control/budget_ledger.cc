// Invariants: reserved_ equals the sum of live lease tokens; leases_ and lease_by_ticket_
// describe the same leases; a ledger without a poll has ceiling_ 0. No arithmetic can
// overflow: engine capacities are in [0, kMaxTokens] (others are not healthy), their sum
// saturates, and a grant never takes reserved_ past ceiling_ (itself below int64's limit).
// Admission v2: reserved_ also counts every shared-prefix entry's tokens once; engine_reserved_
// is, per engine, the tokens of the leases and entries charged to it; an entry's refs is the
// number of leases naming it, and an entry with no reference does not exist.
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
    case AdmissionReason::kOverShare:
      return "over_share";
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
  engines_.clear();
  for (const EngineSnapshot* s : healthy) {
    const double usage = std::clamp(s->token_usage, 0.0, 1.0);
    engines_[s->engine_id] =
        EngineState{s->max_total_num_tokens,
                    static_cast<int64_t>(std::floor(static_cast<double>(s->max_total_num_tokens) *
                                                    params_.headroom)),
                    usage};
    sum += usage;
    worst = std::max(worst, usage);
    capacity = SaturatingAdd(capacity, s->max_total_num_tokens);
    if (auto known = known_engines_.find(s->engine_id); known != known_engines_.end()) {
      known_by_capacity_.erase({known->second.capacity, s->engine_id});
    }
    known_engines_[s->engine_id] = KnownEngine{s->max_total_num_tokens, now};
    known_by_capacity_.emplace(s->max_total_num_tokens, s->engine_id);
  }
  std::erase_if(known_engines_, [&](const auto& entry) {
    if (now - entry.second.seen_at <= params_.lease_ttl) return false;
    known_by_capacity_.erase({entry.second.capacity, entry.first});
    return true;
  });
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
  Lease lease{std::to_string(epoch_) + ":" + std::string(ticket),
              std::string(ticket),
              tokens,
              epoch_,
              now,
              std::nullopt,
              std::nullopt};
  lease_by_ticket_.emplace(lease.ticket, lease.lease_id);
  const std::string id = lease.lease_id;
  leases_.emplace(id, std::move(lease));
  reserved_ += tokens;
  return GrantResult{true, AdmissionReason::kCapacityAvailable, id, epoch_, tokens};
}

void BudgetLedger::Charge(const std::optional<std::string>& engine, int64_t tokens) {
  reserved_ += tokens;
  if (!engine.has_value()) return;
  auto [it, inserted] = engine_reserved_.try_emplace(*engine, 0);
  it->second += tokens;
  if (it->second == 0) engine_reserved_.erase(it);
}

int64_t BudgetLedger::LargestKnownCapacity(TimeNs now) const {
  // Largest first: the first engine still within the TTL is the answer (on every acquire; it
  // is almost always the first one looked at).
  for (const auto& [capacity, id] : known_by_capacity_) {
    if (now - known_engines_.find(id)->second.seen_at <= params_.lease_ttl) return capacity;
  }
  return 0;
}

std::optional<TargetLimits> BudgetLedger::LimitsFor(
    const std::optional<std::string>& engine) const {
  if (engines_.empty() || ceiling_ <= 0) return std::nullopt;
  if (engine.has_value()) {
    if (auto it = engines_.find(*engine); it != engines_.end()) {
      return TargetLimits{it->second.ceiling, it->second.capacity};
    }
  }
  TargetLimits largest;
  for (const auto& [id, state] : engines_) {
    largest.ceiling = std::max(largest.ceiling, state.ceiling);
    largest.capacity = std::max(largest.capacity, state.capacity);
  }
  return largest;
}

GrantResult BudgetLedger::ReserveOn(std::string_view ticket, int64_t tokens,
                                    const ReserveTarget& target, TimeNs now) {
  AGENTKV_CHECK(tokens >= 0 && tokens <= kMaxTokens) << "reservation of " << tokens << " tokens";
  AGENTKV_CHECK(target.prefix_tokens >= 0 && target.prefix_tokens <= kMaxTokens)
      << "prefix of " << target.prefix_tokens << " tokens";
  if (const Lease* existing = LeaseForTicket(ticket)) {
    return GrantResult{true, AdmissionReason::kCapacityAvailable, existing->lease_id, epoch_,
                       existing->tokens};
  }
  GrantResult refused{false, AdmissionReason::kDegraded, std::nullopt, epoch_, tokens};
  if (IsStale(now)) return refused;
  // An engine the last poll did not report is checked as the fleet.
  const EngineState* engine = nullptr;
  if (target.engine.has_value()) {
    if (auto it = engines_.find(*target.engine); it != engines_.end()) engine = &it->second;
  }
  const std::optional<std::string> charged =
      engine != nullptr ? target.engine : std::optional<std::string>();
  if ((engine != nullptr ? engine->usage : avg_usage_) >= params_.pressure_threshold) {
    refused.reason = AdmissionReason::kPressureGuard;
    return refused;
  }
  std::optional<std::string> entry;
  int64_t need = tokens;
  if (target.prefix_key.has_value() && target.prefix_tokens > 0) {
    entry = charged.value_or(std::string()) + "\n" + *target.prefix_key;
    if (!prefixes_.contains(*entry)) need = SaturatingAdd(need, target.prefix_tokens);
  }
  const bool fits_fleet = need <= ceiling_ - reserved_;
  const bool fits_engine = engine == nullptr || need <= engine->ceiling - engine_reserved(*charged);
  if (!fits_fleet || !fits_engine) {
    refused.reason = AdmissionReason::kCapacityExhausted;
    return refused;
  }
  Lease lease{std::to_string(epoch_) + ":" + std::string(ticket),
              std::string(ticket),
              tokens,
              epoch_,
              now,
              charged,
              entry};
  if (entry.has_value()) {
    auto [it, inserted] = prefixes_.try_emplace(*entry);
    if (inserted) {
      it->second.tokens = target.prefix_tokens;
      it->second.engine = charged;
      Charge(charged, target.prefix_tokens);
    }
    ++it->second.refs;
  }
  Charge(charged, tokens);
  lease_by_ticket_.emplace(lease.ticket, lease.lease_id);
  const std::string id = lease.lease_id;
  leases_.emplace(id, std::move(lease));
  return GrantResult{true, AdmissionReason::kCapacityAvailable, id, epoch_, tokens};
}

int64_t BudgetLedger::engine_reserved(std::string_view engine) const {
  auto it = engine_reserved_.find(engine);
  return it == engine_reserved_.end() ? 0 : it->second;
}

int64_t BudgetLedger::prefix_reserved() const {
  int64_t sum = 0;
  for (const auto& [key, entry] : prefixes_) sum += entry.tokens;
  return sum;
}

Status BudgetLedger::CheckInvariants() const {
  int64_t sum = 0;
  std::map<std::string, int64_t, std::less<>> per_engine;
  std::map<std::string, int64_t, std::less<>> refs;
  for (const auto& [id, lease] : leases_) {
    sum += lease.tokens;
    if (lease.engine.has_value()) per_engine[*lease.engine] += lease.tokens;
    if (lease.prefix_entry.has_value()) ++refs[*lease.prefix_entry];
    auto t = lease_by_ticket_.find(lease.ticket);
    if (t == lease_by_ticket_.end() || t->second != id) {
      return InternalError("lease " + id + " is not indexed by its ticket");
    }
  }
  if (lease_by_ticket_.size() != leases_.size()) {
    return InternalError("the ticket index holds a lease that does not exist");
  }
  for (const auto& [key, entry] : prefixes_) {
    sum += entry.tokens;
    if (entry.engine.has_value()) per_engine[*entry.engine] += entry.tokens;
    auto r = refs.find(key);
    if (r == refs.end() || r->second != entry.refs || entry.refs <= 0) {
      return InternalError("prefix entry " + key + " has " + std::to_string(entry.refs) +
                           " references, its leases say otherwise");
    }
    refs.erase(r);
  }
  if (!refs.empty()) return InternalError("a lease names a prefix entry that does not exist");
  if (sum != reserved_) {
    return InternalError("reserved " + std::to_string(reserved_) + " tokens, leases and prefix " +
                         "entries hold " + std::to_string(sum));
  }
  std::erase_if(per_engine, [](const auto& kv) { return kv.second == 0; });
  if (per_engine.size() != engine_reserved_.size() ||
      !std::equal(per_engine.begin(), per_engine.end(), engine_reserved_.begin())) {
    return InternalError("per-engine reserved tokens disagree with the leases");
  }
  return Status::Ok();
}

void BudgetLedger::Release(std::string_view lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  if (it->second.engine.has_value() || it->second.prefix_entry.has_value()) {
    // Admission v2: uncharge the engine, and drop the prefix entry with its last reference.
    const Lease& lease = it->second;
    Charge(lease.engine, -lease.tokens);
    if (lease.prefix_entry.has_value()) {
      auto p = prefixes_.find(*lease.prefix_entry);
      AGENTKV_CHECK(p != prefixes_.end()) << "lease " << lease.lease_id << " names no entry";
      if (--p->second.refs == 0) {
        Charge(p->second.engine, -p->second.tokens);
        prefixes_.erase(p);
      }
    }
    lease_by_ticket_.erase(lease.ticket);
    leases_.erase(it);
    return;
  }
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
