// BudgetLedger: the fleet's KV token budget (seed 000's BudgetState).
//
// Polls of the engines' gauges (Reconcile) set an admission ceiling of
// floor(sum of healthy capacity x headroom); Reserve grants a lease of tokens against it, in a
// fixed decision order (existing lease, stale, pressure, capacity), idempotently per ticket;
// Release and TTL expiry return the tokens. A ledger without a fresh poll is degraded, and
// admission then fails open. Every time-dependent call takes `now`: the ledger reads no clock.
// Admission v2 (ReserveOn) keeps the same leases with two more facts: the engine a lease is
// charged to, so that budget and pressure are checked per engine (each engine's ceiling is
// floor(its capacity x headroom)), and a shared-prefix entry, reserved once per (engine, prefix
// key) while any lease uses it. Seed leases have neither, and Reserve never looks at them.
// Thread-compatible (the coordinator is its single writer); deterministic.
#ifndef AGENTKV_CONTROL_BUDGET_LEDGER_H_
#define AGENTKV_CONTROL_BUDGET_LEDGER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/engine_gauges.h"

namespace agentkv::control {

// Why admission decided what it did (the seed's AdmissionReason, same names).
enum class AdmissionReason : uint8_t {
  kCapacityAvailable,
  kCapacityExhausted,
  kPressureGuard,
  kProtected,
  kAged,
  kDegraded,
  kCancelled,
  // agentkv's addition: the reservation exceeds the whole admission ceiling, so no release
  // can ever make room for it (kRefuse).
  kOversized,
  // agentkv's addition: the request's session or client held more than its share of the ceiling
  // for the whole maximum wait (kRefuse).
  kOverShare,
};

// "capacity_available", "capacity_exhausted", "pressure_guard", "protected", "aged",
// "degraded", "cancelled", "oversized", "over_share".
std::string_view AdmissionReasonName(AdmissionReason reason);

struct Lease {
  // "{epoch}:{ticket}", e.g. "1:request-1:0".
  std::string lease_id;
  std::string ticket;
  int64_t tokens = 0;
  // The epoch the lease was granted in; leases outlive epoch changes.
  int64_t owner_epoch = 0;
  TimeNs created_at;
  // Admission v2: the engine the tokens are charged to (unset: the fleet), and the key of the
  // shared-prefix entry the lease holds a reference on (unset: none).
  std::optional<std::string> engine = std::nullopt;
  std::optional<std::string> prefix_entry = std::nullopt;

  friend bool operator==(const Lease&, const Lease&) = default;
};

// Where an admission v2 reservation is checked and charged.
struct ReserveTarget {
  // The engine (EngineSnapshot::engine_id) the request will land on; unset, or an engine the
  // last poll did not report, checks the fleet: its mean usage and its whole ceiling.
  std::optional<std::string> engine = std::nullopt;
  // A shared prefix reserved once per (engine, key) while any lease uses it; its tokens are
  // charged by the first lease that needs it. prefix_tokens in [0, kMaxTokens].
  std::optional<std::string> prefix_key = std::nullopt;
  int64_t prefix_tokens = 0;
};

// The limits an admission v2 reservation is held to: the target engine's ceiling and whole KV
// capacity, or, for the fleet, those of its largest engine (a request runs on one engine).
struct TargetLimits {
  int64_t ceiling = 0;
  int64_t capacity = 0;
};

struct GrantResult {
  bool granted = false;
  AdmissionReason reason = AdmissionReason::kCapacityAvailable;
  // Set when granted.
  std::optional<std::string> lease_id;
  int64_t owner_epoch = 0;
  // The tokens the lease holds (for an existing lease, its original count).
  int64_t reservation_tokens = 0;

  friend bool operator==(const GrantResult&, const GrantResult&) = default;
};

// The ledger's state as the metrics report it.
struct BudgetSnapshot {
  int64_t epoch = 0;
  int64_t capacity = 0;  // The ceiling.
  int64_t reserved_tokens = 0;
  int64_t available_tokens = 0;  // max(0, capacity - reserved)
  int64_t lease_count = 0;
  // Usage window: the mean of each poll's mean engine usage, and the peak of each poll's
  // worst engine usage, since the window was last drained.
  double kv_usage_mean = 0;
  double kv_usage_max = 0;
  bool degraded = true;

  friend bool operator==(const BudgetSnapshot&, const BudgetSnapshot&) = default;
};

struct LedgerParams {
  // agentic_admission_headroom: share of the healthy capacity admission may commit.
  // Default: 0.90. Range: (0, 1].
  double headroom = 0.90;
  // agentic_admission_pressure_threshold: the worst engine's token_usage at or above which
  // grants are refused. Default: 0.92. Range: (0, 1].
  double pressure_threshold = 0.92;
  // Age after which a lease is reclaimed (stranded by a caller that vanished). Default: 600 s.
  TimeNs lease_ttl = TimeNs::Seconds(600);
  // Maximum age of the last successful poll before the ledger is degraded. Default: 6 s.
  TimeNs staleness = TimeNs::Seconds(6);
};

// Whether the ledger counts `snapshot`: healthy, a capacity in (0, kMaxTokens] and a finite
// usage. Anything else an engine reports is treated as a failed scrape of that engine.
bool IsUsable(const EngineSnapshot& snapshot);

class BudgetLedger {
 public:
  // Precondition: params are in range (the options are validated before).
  explicit BudgetLedger(const LedgerParams& params);

  // Takes a poll of the engines at `now`. Keeps the usable engines (IsUsable); none left
  // invalidates the ledger. A change of that set's engine ids advances the epoch
  // (existing leases are kept). Updates the mean and worst usage (each clamped to [0, 1]),
  // the usage window and the ceiling.
  void Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now);
  // Forgets the capacity signal: ceiling 0, degraded until the next successful Reconcile.
  void Invalidate();
  // True without a ceiling, without a poll, or when the last poll is older than staleness.
  bool IsStale(TimeNs now) const;

  // Grants `tokens` to `ticket`, or refuses, checking in order: the ticket's existing lease
  // (returned unchanged, whatever `tokens` is: a retry never double-charges), a stale ledger
  // (kDegraded), pressure (kPressureGuard), capacity (kCapacityExhausted); else a new lease
  // "{epoch}:{ticket}". Precondition: `tokens` in [0, kMaxTokens] (the coordinator checks it).
  GrantResult Reserve(std::string_view ticket, int64_t tokens, TimeNs now);
  // Admission v2: grants `tokens` to `ticket` against `target`, or refuses, checking in order:
  // the ticket's existing lease (returned unchanged), a stale ledger (kDegraded), pressure on
  // the target (the engine's usage, or the fleet's mean usage, at or above the threshold:
  // kPressureGuard), room on the target (the tokens plus the prefix entry's when it does not
  // exist yet must fit both the engine's ceiling minus what its leases and entries reserve, and
  // the fleet's: kCapacityExhausted); else a new lease charged to the engine, holding a
  // reference on the prefix entry. Precondition: `tokens` and target.prefix_tokens in
  // [0, kMaxTokens].
  GrantResult ReserveOn(std::string_view ticket, int64_t tokens, const ReserveTarget& target,
                        TimeNs now);
  // The limits of `engine` (nullopt or unknown: the fleet's largest engine); nullopt without a
  // usable poll.
  std::optional<TargetLimits> LimitsFor(const std::optional<std::string>& engine) const;
  // Whether the last poll reported `engine`.
  bool KnowsEngine(std::string_view engine) const { return engines_.contains(engine); }
  // The largest KV capacity (max_total_num_tokens) of any engine a poll reported usable within
  // the lease TTL before `now`, whether or not the last poll did: what the fleet can hold when
  // its engines are healthy. An engine that stops reporting (or a degraded poll) shrinks the
  // ceiling but not this, so a request that only the missing engine could hold waits instead of
  // being refused as if it could never run. 0 when no engine was ever reported.
  int64_t LargestKnownCapacity(TimeNs now) const;
  // Whether a lease with this id is held.
  bool HoldsLease(std::string_view lease_id) const { return leases_.contains(lease_id); }
  // Tokens charged to `engine` (its leases and prefix entries).
  int64_t engine_reserved(std::string_view engine) const;
  // Shared-prefix entries held, and the tokens they reserve.
  int64_t prefix_entries() const { return static_cast<int64_t>(prefixes_.size()); }
  int64_t prefix_reserved() const;
  // Internal when reserved_ is not the sum of lease and prefix-entry tokens, a per-engine sum
  // disagrees, or a prefix entry's reference count is not its leases'. For tests.
  Status CheckInvariants() const;

  // Returns a lease's tokens. Idempotent: an unknown id is a no-op.
  void Release(std::string_view lease_id);
  // Releases the ticket's lease, if any.
  void ReleaseTicket(std::string_view ticket);
  // The ticket's lease, or nullptr.
  const Lease* LeaseForTicket(std::string_view ticket) const;
  // Releases every lease older than the TTL at `now` (age > lease_ttl); returns their ids in
  // lease id order.
  std::vector<std::string> ExpireTtl(TimeNs now);

  // The state at `now`. With `reset_usage_window`, the window is drained after reading: its
  // mean restarts empty and its peak restarts at the current worst usage (not 0).
  BudgetSnapshot Snapshot(TimeNs now, bool reset_usage_window = false);

  int64_t epoch() const { return epoch_; }
  int64_t ceiling() const { return ceiling_; }
  int64_t reserved() const { return reserved_; }
  int64_t lease_count() const { return static_cast<int64_t>(leases_.size()); }
  double max_usage() const { return max_usage_; }

 private:
  LedgerParams params_;
  int64_t epoch_ = 0;
  int64_t ceiling_ = 0;
  int64_t reserved_ = 0;
  double avg_usage_ = 0;
  double max_usage_ = 0;
  double peak_usage_ = 0;
  double usage_sum_ = 0;
  int64_t usage_count_ = 0;
  // Ordered maps: iteration order (TTL expiry) must not depend on hashing.
  std::map<std::string, Lease, std::less<>> leases_;                 // lease id -> lease
  std::map<std::string, std::string, std::less<>> lease_by_ticket_;  // ticket -> lease id
  std::vector<std::string> worker_signature_;  // Sorted ids of the last healthy set.
  // Admission v2. The last poll's usable engines: capacity, ceiling and usage (clamped).
  struct EngineState {
    int64_t capacity = 0;
    int64_t ceiling = 0;
    double usage = 0;
  };
  std::map<std::string, EngineState, std::less<>> engines_;
  // Tokens charged per engine (leases and prefix entries); entries at 0 are erased.
  std::map<std::string, int64_t, std::less<>> engine_reserved_;
  // Shared-prefix entries by "{engine}\n{prefix key}" ("" engine: the fleet).
  struct PrefixEntry {
    int64_t tokens = 0;
    int64_t refs = 0;
    std::optional<std::string> engine;
  };
  std::map<std::string, PrefixEntry, std::less<>> prefixes_;
  void Charge(const std::optional<std::string>& engine, int64_t tokens);
  std::optional<TimeNs> last_snapshot_at_;
  // Every engine a poll reported usable: its last capacity and when (LargestKnownCapacity).
  // Entries older than the lease TTL are forgotten at the next Reconcile, so the map holds only
  // the engines of the last TTL's polls.
  struct KnownEngine {
    int64_t capacity = 0;
    TimeNs seen_at;
  };
  std::map<std::string, KnownEngine, std::less<>> known_engines_;
  // The same engines by capacity, largest first: (capacity, engine id).
  std::set<std::pair<int64_t, std::string>, std::greater<>> known_by_capacity_;
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_BUDGET_LEDGER_H_
