// BudgetLedger against the upstream BudgetState tests and the contracts of seed 000.
#include "agentkv/control/budget_ledger.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/base/rng.h"

namespace agentkv::control {
namespace {

TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

EngineSnapshot Engine(std::string id, int64_t capacity, double usage, bool healthy = true) {
  return EngineSnapshot{std::move(id), capacity, usage, 0, healthy};
}

LedgerParams Params(double headroom, double threshold, double ttl_s, double staleness_s) {
  return LedgerParams{headroom, threshold, At(ttl_s), At(staleness_s)};
}

// test_budget_state_reserve_release_and_exhaust.
TEST(BudgetLedgerTest, LargestKnownCapacityIsTheLargestEngineSeenWithinTheLeaseTtl) {
  BudgetLedger ledger(Params(0.9, 0.92, /*ttl_s=*/100, /*staleness_s=*/1000));
  EXPECT_EQ(ledger.LargestKnownCapacity(At(0)), 0);
  ledger.Reconcile(std::vector<EngineSnapshot>{Engine("big", 3000, 0.1), Engine("mid", 2000, 0.1),
                                               Engine("small", 1000, 0.1)},
                   At(0));
  EXPECT_EQ(ledger.LargestKnownCapacity(At(10)), 3000);
  // The big engine stops reporting; the others go on. Within the TTL it still counts.
  ledger.Reconcile(
      std::vector<EngineSnapshot>{Engine("mid", 2000, 0.1), Engine("small", 1000, 0.1)}, At(50));
  EXPECT_EQ(ledger.LargestKnownCapacity(At(100)), 3000);
  EXPECT_EQ(ledger.LargestKnownCapacity(At(101)), 2000) << "past its TTL, the next largest";
  // An engine that shrinks is known by its new capacity only.
  ledger.Reconcile(std::vector<EngineSnapshot>{Engine("mid", 500, 0.1), Engine("small", 1000, 0.1)},
                   At(120));
  EXPECT_EQ(ledger.LargestKnownCapacity(At(121)), 1000);
  EXPECT_EQ(ledger.LargestKnownCapacity(At(500)), 0);
}

TEST(BudgetLedgerTest, ReserveReleaseAndExhaust) {
  BudgetLedger ledger(Params(1.0, 0.92, 600, 6));
  const std::vector<EngineSnapshot> fleet = {Engine("engine-0", 1000, 0.1)};
  ledger.Reconcile(fleet, At(0));
  EXPECT_EQ(ledger.epoch(), 1);

  const GrantResult first = ledger.Reserve("request-1:0", 600, At(0));
  EXPECT_TRUE(first.granted);
  EXPECT_EQ(first.reason, AdmissionReason::kCapacityAvailable);
  EXPECT_EQ(first.lease_id, "1:request-1:0");
  EXPECT_EQ(first.owner_epoch, 1);
  EXPECT_EQ(ledger.reserved(), 600);

  const GrantResult retry = ledger.Reserve("request-1:0", 700, At(0));
  EXPECT_EQ(retry, first);  // The same lease, its original tokens; nothing charged twice.
  EXPECT_EQ(ledger.reserved(), 600);

  const GrantResult second = ledger.Reserve("request-2:0", 600, At(0));
  EXPECT_FALSE(second.granted);
  EXPECT_EQ(second.reason, AdmissionReason::kCapacityExhausted);
  EXPECT_EQ(second.lease_id, std::nullopt);

  ledger.Release("1:request-1:0");
  ledger.Release("1:request-1:0");
  EXPECT_EQ(ledger.reserved(), 0);
  EXPECT_EQ(ledger.lease_count(), 0);
  EXPECT_EQ(ledger.LeaseForTicket("request-1:0"), nullptr);
}

// test_budget_state_pressure_ttl_and_degraded_contracts.
TEST(BudgetLedgerTest, PressureTtlAndDegradedContracts) {
  BudgetLedger ledger(Params(1.0, 0.9, 5, 10));
  std::vector<EngineSnapshot> fleet = {Engine("engine-0", 1000, 0.95)};
  ledger.Reconcile(fleet, At(0));
  EXPECT_EQ(ledger.Reserve("t", 10, At(0)).reason, AdmissionReason::kPressureGuard);

  fleet[0].token_usage = 0.1;
  ledger.Reconcile(fleet, At(1));
  const GrantResult granted = ledger.Reserve("t", 10, At(1));
  ASSERT_TRUE(granted.granted);

  EXPECT_EQ(ledger.ExpireTtl(At(6)), std::vector<std::string>{});  // Age 5 is not > 5.
  EXPECT_EQ(ledger.ExpireTtl(At(7)), std::vector<std::string>{*granted.lease_id});
  EXPECT_EQ(ledger.reserved(), 0);

  const GrantResult stale = ledger.Reserve("u", 10, At(20));  // Last poll at 1, staleness 10.
  EXPECT_FALSE(stale.granted);
  EXPECT_EQ(stale.reason, AdmissionReason::kDegraded);
}

TEST(BudgetLedgerTest, CeilingIsFlooredHealthyCapacityTimesHeadroom) {
  BudgetLedger ledger(Params(0.9, 0.92, 600, 6));
  const std::vector<EngineSnapshot> fleet = {Engine("a", 1001, 0.1), Engine("b", 1000, 0.2),
                                             Engine("c", 5000, 0.1, /*healthy=*/false),
                                             Engine("d", 0, 0.1)};
  ledger.Reconcile(fleet, At(0));
  EXPECT_EQ(ledger.ceiling(), 1800);  // floor(2001 * 0.9) = floor(1800.9)
  EXPECT_DOUBLE_EQ(ledger.max_usage(), 0.2);
}

TEST(BudgetLedgerTest, NoHealthyEngineOrNoPollIsDegraded) {
  BudgetLedger ledger(Params(0.9, 0.92, 600, 6));
  EXPECT_TRUE(ledger.IsStale(At(0)));
  EXPECT_EQ(ledger.Reserve("t", 1, At(0)).reason, AdmissionReason::kDegraded);
  const std::vector<EngineSnapshot> sick = {Engine("a", 1000, 0.1, /*healthy=*/false)};
  ledger.Reconcile(sick, At(0));
  EXPECT_TRUE(ledger.IsStale(At(0)));
  EXPECT_EQ(ledger.ceiling(), 0);
  const std::vector<EngineSnapshot> fine = {Engine("a", 1000, 0.1)};
  ledger.Reconcile(fine, At(1));
  EXPECT_FALSE(ledger.IsStale(At(7)));  // Exactly staleness old is still fresh.
  EXPECT_TRUE(ledger.IsStale(At(7.5)));
  ledger.Invalidate();
  EXPECT_TRUE(ledger.IsStale(At(1)));
}

TEST(BudgetLedgerTest, EpochAdvancesExactlyWhenTheHealthySetChangesAndLeasesSurvive) {
  BudgetLedger ledger(Params(1.0, 0.92, 600, 6));
  const std::vector<EngineSnapshot> ab = {Engine("a", 100, 0.1), Engine("b", 100, 0.1)};
  const std::vector<EngineSnapshot> ba_busier = {Engine("b", 100, 0.5), Engine("a", 100, 0.3)};
  const std::vector<EngineSnapshot> a_only = {Engine("a", 100, 0.1),
                                              Engine("b", 100, 0.1, /*healthy=*/false)};
  ledger.Reconcile(ab, At(0));
  EXPECT_EQ(ledger.epoch(), 1);
  const GrantResult lease = ledger.Reserve("t", 50, At(0));
  ledger.Reconcile(ba_busier, At(1));  // Same set, other order and usage.
  EXPECT_EQ(ledger.epoch(), 1);
  ledger.Reconcile(a_only, At(2));
  EXPECT_EQ(ledger.epoch(), 2);
  ASSERT_NE(ledger.LeaseForTicket("t"), nullptr);
  EXPECT_EQ(ledger.LeaseForTicket("t")->owner_epoch, 1);
  EXPECT_EQ(ledger.reserved(), 50);
  EXPECT_EQ(ledger.Reserve("u", 60, At(2)).reason, AdmissionReason::kCapacityExhausted);
  EXPECT_EQ(ledger.Reserve("u", 50, At(2)).lease_id, "2:u");
  EXPECT_TRUE(lease.granted);
}

// test_budget_state_usage_window_tracks_peak_and_resets.
TEST(BudgetLedgerTest, UsageWindowTracksPeakAndResetsToTheCurrentValue) {
  BudgetLedger ledger(Params(1.0, 0.99, 600, 6));
  for (const double usage : {0.3, 0.9, 0.05}) {
    const std::vector<EngineSnapshot> fleet = {Engine("a", 100, usage)};
    ledger.Reconcile(fleet, At(0));
  }
  const BudgetSnapshot drained = ledger.Snapshot(At(0), /*reset_usage_window=*/true);
  EXPECT_DOUBLE_EQ(drained.kv_usage_max, 0.9);
  EXPECT_DOUBLE_EQ(drained.kv_usage_mean, (0.3 + 0.9 + 0.05) / 3);
  // After the drain the peak restarts at the current worst usage, not 0.
  EXPECT_DOUBLE_EQ(ledger.Snapshot(At(0)).kv_usage_max, 0.05);
  const std::vector<EngineSnapshot> fleet = {Engine("a", 100, 0.1)};
  ledger.Reconcile(fleet, At(1));
  const BudgetSnapshot after = ledger.Snapshot(At(1));
  EXPECT_DOUBLE_EQ(after.kv_usage_max, 0.1);
  EXPECT_DOUBLE_EQ(after.kv_usage_mean, 0.1);
}

TEST(BudgetLedgerTest, SnapshotReportsAvailableTokensAndUsageMeanOfPerPollMeans) {
  BudgetLedger ledger(Params(1.0, 0.99, 600, 6));
  const std::vector<EngineSnapshot> fleet = {Engine("a", 100, 0.2), Engine("b", 100, 1.7)};
  ledger.Reconcile(fleet, At(0));
  // Usage clamps to [0, 1]: the worst engine reads 1.0 (not 1.7) and the mean 0.6.
  EXPECT_EQ(ledger.Reserve("t", 30, At(0)).reason, AdmissionReason::kPressureGuard);
  EXPECT_EQ(ledger.Snapshot(At(0)), (BudgetSnapshot{1, 200, 0, 200, 0, 0.6, 1.0, false}));
  const std::vector<EngineSnapshot> calmer = {Engine("a", 100, 0.2), Engine("b", 100, 0.4)};
  ledger.Reconcile(calmer, At(1));
  ASSERT_TRUE(ledger.Reserve("t", 30, At(1)).granted);
  const BudgetSnapshot s = ledger.Snapshot(At(1));
  EXPECT_EQ(s.reserved_tokens, 30);
  EXPECT_EQ(s.available_tokens, 170);
  EXPECT_EQ(s.lease_count, 1);
  EXPECT_DOUBLE_EQ(s.kv_usage_mean, (0.6 + 0.3) / 2);
  EXPECT_DOUBLE_EQ(s.kv_usage_max, 1.0);  // The window's peak, not the current worst.
}

// Random reserve / release / expire / reconcile: reserved always equals the sum of live
// leases, and no lease outlives its TTL past an ExpireTtl.
TEST(BudgetLedgerTest, RandomOperationsKeepReservedEqualToLiveLeases) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    BudgetLedger ledger(Params(0.9, 0.95, 50, 6));
    std::map<std::string, std::pair<int64_t, double>> live;  // ticket -> (tokens, created)
    double now = 0;
    for (int op = 0; op < 20'000; ++op) {
      now += static_cast<double>(rng.Uniform(0, 3));
      const int64_t kind = rng.Uniform(0, 9);
      // Appended, not concatenated: GCC 12 at -O3 reports a false -Wrestrict on "t" + str.
      std::string ticket = "t";
      ticket += std::to_string(rng.Uniform(0, 40));
      if (kind < 4) {
        const int64_t tokens = rng.Uniform(1, 300);
        const GrantResult g = ledger.Reserve(ticket, tokens, At(now));
        if (g.granted && !live.contains(ticket)) live[ticket] = {tokens, now};
      } else if (kind < 6) {
        ledger.ReleaseTicket(ticket);
        live.erase(ticket);
      } else if (kind < 8) {
        std::vector<EngineSnapshot> fleet;
        for (int e = 0; e < 3; ++e) {
          if (rng.Bernoulli(0.8)) {
            std::string id = "e";
            id += std::to_string(e);
            fleet.push_back(Engine(std::move(id), rng.Uniform(0, 1000), rng.UniformDouble()));
          }
        }
        ledger.Reconcile(fleet, At(now));
      } else {
        ledger.ExpireTtl(At(now));
        std::erase_if(live, [&](const auto& kv) { return now - kv.second.second > 50; });
      }
      int64_t sum = 0;
      for (const auto& [t, v] : live) sum += v.first;
      ASSERT_EQ(ledger.reserved(), sum) << "op " << op;
      ASSERT_EQ(ledger.lease_count(), static_cast<int64_t>(live.size())) << "op " << op;
    }
  }
}

// The largest values the ledger can be given: capacities of kMaxTokens on many engines sum
// without overflow, an engine past the bound does not count, and a grant at the very edge of
// the ceiling leaves the arithmetic exact.
TEST(BudgetLedgerTest, ArithmeticAtTheTokenBoundStaysExact) {
  BudgetLedger ledger(Params(1.0, 1.0, 600, 6));
  std::vector<EngineSnapshot> fleet;
  for (int i = 0; i < 4096; ++i) fleet.push_back(Engine("e" + std::to_string(i), kMaxTokens, 0));
  fleet.push_back(Engine("liar", std::numeric_limits<int64_t>::max(), 0));
  ledger.Reconcile(fleet, At(0));
  EXPECT_EQ(ledger.ceiling(), 4096 * kMaxTokens);
  EXPECT_TRUE(ledger.Reserve("a", kMaxTokens, At(0)).granted);
  EXPECT_EQ(ledger.reserved(), kMaxTokens);

  BudgetLedger small(Params(1.0, 1.0, 600, 6));
  small.Reconcile(std::vector<EngineSnapshot>{Engine("e", 1000, 0)}, At(0));
  EXPECT_TRUE(small.Reserve("a", 999, At(0)).granted);
  EXPECT_EQ(small.Reserve("b", kMaxTokens, At(0)).reason, AdmissionReason::kCapacityExhausted);
  EXPECT_TRUE(small.Reserve("c", 1, At(0)).granted);
  EXPECT_EQ(small.Reserve("d", 1, At(0)).reason, AdmissionReason::kCapacityExhausted);
  EXPECT_EQ(small.reserved(), 1000);
}

TEST(BudgetLedgerTest, EnginesWithUnusableGaugesDoNotCount) {
  EXPECT_TRUE(IsUsable(Engine("e", kMaxTokens, 0.5)));
  EXPECT_FALSE(IsUsable(Engine("e", kMaxTokens + 1, 0.5)));
  EXPECT_FALSE(IsUsable(Engine("e", 0, 0.5)));
  EXPECT_FALSE(IsUsable(Engine("e", 100, std::numeric_limits<double>::quiet_NaN())));
  EXPECT_FALSE(IsUsable(Engine("e", 100, 0.5, /*healthy=*/false)));
  BudgetLedger ledger(Params(1.0, 0.9, 600, 6));
  ledger.Reconcile(std::vector<EngineSnapshot>{Engine("e", kMaxTokens + 1, 0.1)}, At(0));
  EXPECT_TRUE(ledger.IsStale(At(0)));
}

// Admission v2: budget and pressure are the target engine's; an unknown engine is the fleet's.
TEST(BudgetLedgerTest, ReserveOnChecksTheTargetEngineOnly) {
  BudgetLedger ledger(Params(0.5, 0.92, 600, 6));
  const std::vector<EngineSnapshot> fleet = {Engine("a", 1000, 0.95), Engine("b", 1000, 0.10)};
  ledger.Reconcile(fleet, At(0));
  // Engine a is under pressure; b is not, and its ceiling is floor(1000 x 0.5).
  EXPECT_EQ(ledger.ReserveOn("t1", 10, ReserveTarget{"a"}, At(0)).reason,
            AdmissionReason::kPressureGuard);
  const GrantResult b = ledger.ReserveOn("t2", 500, ReserveTarget{"b"}, At(0));
  EXPECT_TRUE(b.granted);
  EXPECT_EQ(ledger.engine_reserved("b"), 500);
  EXPECT_EQ(ledger.ReserveOn("t3", 1, ReserveTarget{"b"}, At(0)).reason,
            AdmissionReason::kCapacityExhausted);
  // The fleet (mean usage 0.525) still has 500 tokens of its 1000-token ceiling.
  EXPECT_TRUE(ledger.ReserveOn("t4", 500, ReserveTarget{}, At(0)).granted);
  EXPECT_TRUE(ledger.ReserveOn("t5", 0, ReserveTarget{"unknown"}, At(0)).granted);
  EXPECT_EQ(ledger.ReserveOn("t6", 1, ReserveTarget{}, At(0)).reason,
            AdmissionReason::kCapacityExhausted);
  EXPECT_EQ(ledger.reserved(), 1000);
  ASSERT_TRUE(ledger.CheckInvariants().ok()) << ledger.CheckInvariants();
  EXPECT_EQ(ledger.LimitsFor(std::string("a"))->ceiling, 500);
  EXPECT_EQ(ledger.LimitsFor(std::nullopt)->capacity, 1000);
  ledger.ReleaseTicket("t2");
  EXPECT_EQ(ledger.engine_reserved("b"), 0);
  EXPECT_EQ(ledger.reserved(), 500);
  // A stale ledger refuses every target `degraded`.
  EXPECT_EQ(ledger.ReserveOn("t7", 1, ReserveTarget{"b"}, At(100)).reason,
            AdmissionReason::kDegraded);
  ASSERT_TRUE(ledger.CheckInvariants().ok()) << ledger.CheckInvariants();
}

// A shared prefix is reserved once per (engine, key) while any lease uses it.
TEST(BudgetLedgerTest, SharedPrefixIsReservedOnceAndGoesWithItsLastLease) {
  BudgetLedger ledger(Params(1.0, 0.92, 600, 6));
  const std::vector<EngineSnapshot> fleet = {Engine("a", 1000, 0.1), Engine("b", 1000, 0.1)};
  ledger.Reconcile(fleet, At(0));
  const ReserveTarget group{"a", "group-1", 300};
  EXPECT_TRUE(ledger.ReserveOn("s1", 100, group, At(0)).granted);
  EXPECT_TRUE(ledger.ReserveOn("s2", 100, group, At(0)).granted);
  EXPECT_EQ(ledger.reserved(), 500);  // 300 once, 100 twice.
  EXPECT_EQ(ledger.prefix_entries(), 1);
  // On another engine the prefix is another copy.
  EXPECT_TRUE(ledger.ReserveOn("s3", 100, ReserveTarget{"b", "group-1", 300}, At(0)).granted);
  EXPECT_EQ(ledger.engine_reserved("b"), 400);
  // Room counts the prefix only while it does not exist: 500 left on a.
  EXPECT_TRUE(ledger.ReserveOn("s4", 500, group, At(0)).granted);
  EXPECT_EQ(ledger.ReserveOn("s5", 1, group, At(0)).reason, AdmissionReason::kCapacityExhausted);
  ASSERT_TRUE(ledger.CheckInvariants().ok()) << ledger.CheckInvariants();
  for (const char* t : {"s1", "s2", "s4"}) ledger.ReleaseTicket(t);
  EXPECT_EQ(ledger.engine_reserved("a"), 0);
  EXPECT_EQ(ledger.prefix_entries(), 1);  // b's copy.
  ledger.ReleaseTicket("s3");
  EXPECT_EQ(ledger.prefix_entries(), 0);
  EXPECT_EQ(ledger.reserved(), 0);
  ASSERT_TRUE(ledger.CheckInvariants().ok()) << ledger.CheckInvariants();
}

// Randomized: seed and v2 leases, prefixes and TTL expiry keep every sum exact, and releasing
// everything leaves nothing reserved.
TEST(BudgetLedgerTest, RandomV2OperationsConserveTokens) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    BudgetLedger ledger(Params(0.9, 0.92, 50, 1e6));
    std::vector<std::string> tickets;
    for (int step = 0; step < 400; ++step) {
      const double now = step;
      const int64_t op = rng.Uniform(0, 9);
      if (op == 0) {
        const std::vector<EngineSnapshot> fleet = {
            Engine("e0", rng.Uniform(100, 2000), rng.UniformDouble()),
            Engine("e1", rng.Uniform(100, 2000), rng.UniformDouble(), rng.Uniform(0, 3) > 0)};
        ledger.Reconcile(fleet, At(now));
      } else if (op <= 5) {
        const std::string ticket = "t" + std::to_string(step);
        ReserveTarget target;
        const int64_t where = rng.Uniform(0, 3);
        if (where < 3) target.engine = "e" + std::to_string(where);
        if (rng.Uniform(0, 1) == 1) {
          target.prefix_key = "p" + std::to_string(rng.Uniform(0, 2));
          target.prefix_tokens = rng.Uniform(0, 200);
        }
        const GrantResult g = rng.Uniform(0, 4) == 0
                                  ? ledger.Reserve(ticket, rng.Uniform(0, 300), At(now))
                                  : ledger.ReserveOn(ticket, rng.Uniform(0, 300), target, At(now));
        if (g.granted) tickets.push_back(ticket);
      } else if (op <= 8 && !tickets.empty()) {
        const size_t i =
            static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(tickets.size()) - 1));
        ledger.ReleaseTicket(tickets[i]);
        tickets.erase(tickets.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ledger.ExpireTtl(At(now));
      }
      ASSERT_TRUE(ledger.CheckInvariants().ok())
          << "seed " << seed << " step " << step << ": " << ledger.CheckInvariants();
    }
    for (const std::string& t : tickets) ledger.ReleaseTicket(t);
    EXPECT_EQ(ledger.reserved(), 0) << "seed " << seed;
    EXPECT_EQ(ledger.lease_count(), 0) << "seed " << seed;
    EXPECT_EQ(ledger.prefix_entries(), 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace agentkv::control
