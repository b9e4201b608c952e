// AdmissionCoordinator against the upstream coordinator tests and seed 000's decision order,
// with a fake clock (times are passed in), plus a randomized property test.
#include "agentkv/control/admission_coordinator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "admission_coordinator_test_support.h"
#include "agentkv/base/bounds.h"
#include "agentkv/base/rng.h"
#include "agentkv/control/reservation.h"

namespace agentkv::control {
namespace {

using testing_support::AdmissionOptions;
using testing_support::At;

class AdmissionCoordinatorTest : public ::testing::Test,
                                 protected testing_support::CoordinatorHarness {
 protected:
  // A coordinator over one healthy engine of `capacity` tokens (headroom 1).
  void Build(int64_t capacity, double max_wait_s = 30, double usage = 0.1) {
    CoordinatorParams p;
    p.ledger.headroom = 1.0;
    p.ledger.pressure_threshold = 0.92;
    p.max_wait = At(max_wait_s);
    coordinator_.emplace(p);
    Poll(capacity, usage, 0);
  }
  void Poll(int64_t capacity, double usage, double now) {
    const std::vector<EngineSnapshot> fleet = {
        EngineSnapshot{"engine-0", capacity, usage, 0, true}};
    coordinator_->Reconcile(fleet, At(now));
    Check();
  }
  AdmissionDecision Acquire(const std::string& ticket, int64_t tokens, double now,
                            bool is_protected = false) {
    StatusOr<AdmissionDecision> d =
        coordinator_->Acquire(AcquireRequest{ticket, tokens, is_protected}, At(now));
    EXPECT_TRUE(d.ok()) << d.status();
    Check();
    return d.ok() ? *d : AdmissionDecision{};
  }
};

using Strings = std::vector<std::string>;

// test_admission_coordinator_bypasses_protected_and_degraded_requests.
TEST_F(AdmissionCoordinatorTest, BypassesProtectedAndDegradedRequests) {
  Build(1000);
  const AdmissionDecision p = Acquire("request-1:0", 10, 0, /*is_protected=*/true);
  EXPECT_EQ(p.action, AdmissionAction::kBypass);
  EXPECT_EQ(p.reason, AdmissionReason::kProtected);
  EXPECT_EQ(p.lease_id, std::nullopt);
  c().ledger().Invalidate();
  const AdmissionDecision d = Acquire("request-2:0", 10, 0);
  EXPECT_EQ(d.action, AdmissionAction::kBypass);
  EXPECT_EQ(d.reason, AdmissionReason::kDegraded);
  EXPECT_EQ(c().counters().bypass, 2);
  EXPECT_EQ(c().counters().bypass_protected, 1);
  EXPECT_EQ(c().counters().bypass_degraded, 1);
}

TEST_F(AdmissionCoordinatorTest, AdmitsWithALeaseNamedByEpochAndTicket) {
  Build(1000);
  const AdmissionDecision a = Acquire("request-1:0", 128, 0);
  EXPECT_EQ(a, (AdmissionDecision{AdmissionAction::kAdmit, AdmissionReason::kCapacityAvailable,
                                  "request-1:0", 128, "1:request-1:0", 1, TimeNs(), std::nullopt}));
  // An idempotent retry returns the same lease.
  EXPECT_EQ(Acquire("request-1:0", 128, 1).lease_id, "1:request-1:0");
  EXPECT_EQ(c().ledger().reserved(), 128);
  EXPECT_EQ(c().counters().admit, 1);
}

// test_admission_coordinator_grants_waiters_in_global_fifo_order.
TEST_F(AdmissionCoordinatorTest, GrantsWaitersInGlobalFifoOrder) {
  Build(100);
  const AdmissionDecision first = Acquire("a", 100, 0);
  ASSERT_EQ(first.action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("b", 70, 1).action, AdmissionAction::kWait);
  EXPECT_EQ(Acquire("c", 40, 2).action, AdmissionAction::kWait);
  EXPECT_EQ(c().waiting(), 2);
  c().Release(*first.lease_id, At(3));
  EXPECT_EQ(Resolved(), (Strings{"b:admit:capacity_available"}));  // c: 70 + 40 > 100.
  c().Release("1:b", At(4));
  const std::vector<AdmissionDecision> last = c().TakeResolved();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].ticket, "c");
  EXPECT_EQ(last[0].wait, At(2));  // Enqueued at 2, admitted at 4.
  EXPECT_EQ(c().counters().wait, 2);
  EXPECT_EQ(c().counters().wait_granted, 2);
  EXPECT_DOUBLE_EQ(c().counters().wait_seconds_sum, 2.0 + 2.0);
}

TEST_F(AdmissionCoordinatorTest, HeadOfLineBlocksASmallerRequestBehindIt) {
  Build(100);
  ASSERT_EQ(Acquire("a", 60, 0).action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("big", 50, 1).action, AdmissionAction::kWait);
  // 10 tokens are free, but an older waiter exists: the newcomer waits behind it.
  EXPECT_EQ(Acquire("small", 10, 2).action, AdmissionAction::kWait);
  c().Tick(At(3));
  EXPECT_EQ(Resolved(), Strings{});
  c().Release("1:a", At(4));
  EXPECT_EQ(Resolved(),
            (Strings{"big:admit:capacity_available", "small:admit:capacity_available"}));
}

TEST_F(AdmissionCoordinatorTest, PressureMakesNewcomersWait) {
  Build(1000, 30, /*usage=*/0.95);
  const AdmissionDecision d = Acquire("a", 10, 0);
  EXPECT_EQ(d.action, AdmissionAction::kWait);
  EXPECT_EQ(d.reason, AdmissionReason::kPressureGuard);
  Poll(1000, 0.5, 1);  // Pressure gone: the reconcile drains the FIFO.
  EXPECT_EQ(Resolved(), (Strings{"a:admit:capacity_available"}));
}

// test_admission_coordinator_cancellation_removes_waiter_or_granted_lease.
TEST_F(AdmissionCoordinatorTest, CancellationRemovesWaiterOrGrantedLease) {
  Build(100);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 50, 1).action, AdmissionAction::kWait);
  c().Cancel("b", At(2));
  EXPECT_EQ(Resolved(), (Strings{"b:bypass:cancelled"}));
  EXPECT_EQ(c().waiting(), 0);
  EXPECT_EQ(c().counters().cancelled, 1);
  c().Cancel("a", At(3));  // A granted ticket: its lease goes.
  EXPECT_EQ(c().ledger().reserved(), 0);
  EXPECT_EQ(c().ledger().LeaseForTicket("a"), nullptr);
  c().Cancel("early", At(4));  // Before its acquire.
  EXPECT_EQ(Acquire("early", 10, 5).reason, AdmissionReason::kCancelled);
  EXPECT_EQ(Acquire("early", 10, 6).action, AdmissionAction::kAdmit);  // Tombstone used up.
}

TEST_F(AdmissionCoordinatorTest, CancelTombstonesArePrunedAfterRetention) {
  Build(100);
  c().Cancel("late", At(0));
  Poll(100, 0.1, 601);  // 601 s later the tombstone is gone.
  EXPECT_EQ(Acquire("late", 10, 601).action, AdmissionAction::kAdmit);
}

// test_admission_coordinator_ages_waiters_without_leasing_capacity.
TEST_F(AdmissionCoordinatorTest, AgesWaitersWithoutLeasingCapacity) {
  Build(100, /*max_wait_s=*/0);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  const AdmissionDecision aged = Acquire("b", 50, 0);
  EXPECT_EQ(aged.action, AdmissionAction::kBypass);
  EXPECT_EQ(aged.reason, AdmissionReason::kAged);
  EXPECT_EQ(c().ledger().LeaseForTicket("b"), nullptr);
  EXPECT_EQ(c().ledger().reserved(), 100);
  EXPECT_EQ(c().counters().bypass_aged, 1);
}

TEST_F(AdmissionCoordinatorTest, WaitersAgeOnTickAtMaxWait) {
  Build(100, /*max_wait_s=*/30);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  Poll(100, 0.1, 10);  // Polls keep the ledger fresh (staleness 6 s).
  ASSERT_EQ(Acquire("b", 50, 10).action, AdmissionAction::kWait);
  Poll(100, 0.1, 35);
  c().Tick(At(39.9));
  EXPECT_EQ(Resolved(), Strings{});
  c().Tick(At(40));
  EXPECT_EQ(Resolved(), (Strings{"b:bypass:aged"}));
}

TEST_F(AdmissionCoordinatorTest, RetryOfAWaitingTicketWithAnotherReservationIsAnError) {
  Build(100);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 50, 1).action, AdmissionAction::kWait);
  EXPECT_EQ(Acquire("b", 50, 2).action, AdmissionAction::kWait);  // Same reservation: waits on.
  const StatusOr<AdmissionDecision> bad = c().Acquire(AcquireRequest{"b", 60, false}, At(3));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c().waiting(), 1);
}

// A reservation no release can ever make room for is refused at once with the ceiling that
// refused it: it reserves nothing and nothing behind it waits.
TEST_F(AdmissionCoordinatorTest, OversizedIsRefusedAtOnceAndNothingWaitsBehindIt) {
  Build(100);
  const AdmissionDecision huge = Acquire("huge", 101, 0);
  EXPECT_EQ(huge.action, AdmissionAction::kRefuse);
  EXPECT_EQ(huge.reason, AdmissionReason::kOversized);
  EXPECT_EQ(huge.ceiling, 100);
  EXPECT_EQ(huge.lease_id, std::nullopt);
  EXPECT_EQ(c().waiting(), 0);
  EXPECT_EQ(c().ledger().reserved(), 0);
  EXPECT_EQ(Acquire("small", 2, 0).action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("exact", 98, 0).action, AdmissionAction::kAdmit);  // At the ceiling: fits.
  EXPECT_EQ(c().counters().refused_oversized, 1);
  // Protected work still bypasses and a degraded ledger still fails open, as the seed says.
  EXPECT_EQ(Acquire("p", 5000, 1, /*is_protected=*/true).reason, AdmissionReason::kProtected);
  c().ledger().Invalidate();
  EXPECT_EQ(Acquire("d", 5000, 1).reason, AdmissionReason::kDegraded);
  const std::vector<std::pair<std::string, double>> metrics =
      c().StepMetrics(AdmissionOptions(), At(1), false);
  EXPECT_THAT(metrics, testing::Contains(std::pair<std::string, double>(
                           std::string(kRefusedOversizedMetric), 1.0)));
}

// The ceiling shrinks (an engine left) below the head waiter: it is refused when the next
// drain reaches it, and the waiter behind it is admitted at once instead of aging behind it.
TEST_F(AdmissionCoordinatorTest, AWaiterTheCeilingShrankBelowIsRefusedAtTheHead) {
  Build(100);
  ASSERT_EQ(Acquire("a", 60, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("big", 90, 1).action, AdmissionAction::kWait);
  ASSERT_EQ(Acquire("small", 5, 2).action, AdmissionAction::kWait);
  Poll(80, 0.1, 3);
  EXPECT_EQ(Resolved(), (Strings{"big:refuse:oversized", "small:admit:capacity_available"}));
  EXPECT_EQ(c().ledger().reserved(), 65);
}

// Client-controlled numbers are refused before they touch the ledger, with the field named.
TEST_F(AdmissionCoordinatorTest, OutOfRangeTicketsAndReservationsAreInvalidArguments) {
  Build(1000);
  for (const int64_t tokens : {int64_t{-1}, kMaxTokens + 1, std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()}) {
    const StatusOr<AdmissionDecision> d = c().Acquire(AcquireRequest{"t", tokens, false}, At(0));
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << tokens;
    EXPECT_THAT(d.status().message(), testing::StartsWith("reservation_tokens: "));
  }
  EXPECT_EQ(c().Acquire(AcquireRequest{"", 1, false}, At(0)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c().Acquire(AcquireRequest{std::string(kMaxTicketBytes + 1, 't'), 1, false}, At(0))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(c().Acquire(AcquireRequest{std::string(kMaxTicketBytes, 't'), 1, false}, At(0)).ok());
  EXPECT_EQ(c().ledger().reserved(), 1);
  EXPECT_EQ(c().waiting(), 0);
}

TEST_F(AdmissionCoordinatorTest, DegradedWhileWaitingDrainsTheWholeQueueAsBypass) {
  Build(100);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 50, 1).action, AdmissionAction::kWait);
  ASSERT_EQ(Acquire("c", 50, 2).action, AdmissionAction::kWait);
  c().Reconcile({}, At(3));  // No engine: invalidated.
  EXPECT_EQ(Resolved(), (Strings{"b:bypass:degraded", "c:bypass:degraded"}));
}

TEST_F(AdmissionCoordinatorTest, ShutdownResolvesEveryWaiterAsBypass) {
  Build(100);
  ASSERT_EQ(Acquire("a", 100, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 50, 1).action, AdmissionAction::kWait);
  ASSERT_EQ(Acquire("c", 50, 2).action, AdmissionAction::kWait);
  c().Shutdown();
  EXPECT_EQ(Resolved(), (Strings{"b:bypass:degraded", "c:bypass:degraded"}));
  EXPECT_EQ(c().waiting(), 0);
  EXPECT_EQ(c().ledger().lease_count(), 0);
}

TEST_F(AdmissionCoordinatorTest, LeaseReleasedWhenTheAttemptFailsAndTtlReclaimsStrandedOnes) {
  Build(100);
  const AdmissionDecision a = Acquire("a", 60, 0);
  c().Release(*a.lease_id, At(1));  // The attempt's error path releases.
  EXPECT_EQ(c().ledger().reserved(), 0);
  ASSERT_EQ(Acquire("b", 60, 2).action, AdmissionAction::kAdmit);  // Never released.
  Poll(100, 0.1, 603);
  EXPECT_EQ(c().ledger().reserved(), 0);
  EXPECT_EQ(c().counters().lease_expired, 1);
}

// test_admission_lease_uses_train_prefix_and_releases_after_backend_attempt.
TEST_F(AdmissionCoordinatorTest, AttemptLeaseUsesTheReplayedPrefixAndIsReleasedOnEveryExit) {
  Build(1000);
  const AcquireRequest request{"request-1:2",
                               ReservationTokens({.prefix_tokens = 100,
                                                  .pending_tokens = 8,
                                                  .max_new_tokens = 64,
                                                  .expected_decode_cap = 20}),
                               false};
  EXPECT_EQ(request.reservation_tokens, 128);
  const auto backend_attempt_that_fails = [&] {
    const AdmissionDecision d = c().Acquire(request, At(1)).value();
    AttemptLease lease(c(), d, At(1));
    EXPECT_TRUE(lease.holds_lease());
    EXPECT_EQ(c().ledger().reserved(), 128);
    throw std::runtime_error("backend attempt failed");
  };
  EXPECT_THROW(backend_attempt_that_fails(), std::runtime_error);
  EXPECT_EQ(c().ledger().reserved(), 0);
  EXPECT_EQ(c().ledger().lease_count(), 0);

  const AdmissionDecision d = c().Acquire(request, At(2)).value();
  AttemptLease lease(c(), d, At(2));
  lease.Release(At(3));
  lease.Release(At(4));  // Idempotent.
  EXPECT_FALSE(lease.holds_lease());
  EXPECT_EQ(c().ledger().reserved(), 0);
}

TEST_F(AdmissionCoordinatorTest, StepMetricsReportTheSeedSeriesAndResetPerStep) {
  Build(100);
  AgenticOptions options;
  options.agentic_program_admission = true;
  ASSERT_EQ(Acquire("a", 60, 0).action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 60, 0).action, AdmissionAction::kWait);
  const auto metrics = c().StepMetrics(options, At(1), /*reset_step=*/true);
  std::map<std::string, double> m(metrics.begin(), metrics.end());
  EXPECT_EQ(m.at("agentic_kv/admission/admit"), 1);
  EXPECT_EQ(m.at("agentic_kv/admission/wait"), 1);
  EXPECT_EQ(m.at("agentic_kv/admission/waiting"), 1);
  EXPECT_DOUBLE_EQ(m.at("agentic_kv/admission/defer_rate"), 0.5);
  EXPECT_EQ(m.at("agentic_kv/budget/ceiling"), 100);
  EXPECT_EQ(m.at("agentic_kv/budget/reserved"), 60);
  EXPECT_DOUBLE_EQ(m.at("agentic_kv/budget/reserved_utilization"), 0.6);
  EXPECT_FALSE(m.contains("agentic_kv/admission/bypass"));  // Absent when zero.
  const auto next = c().StepMetrics(options, At(2), /*reset_step=*/false);
  std::map<std::string, double> n(next.begin(), next.end());
  EXPECT_FALSE(n.contains("agentic_kv/admission/admit"));  // Counters restarted.
  EXPECT_EQ(n.at("agentic_kv/admission/waiting"), 1);
}

TEST(CoordinatorParamsTest, FollowTheOptions) {
  AgenticOptions options;
  options.agentic_admission_headroom = 0.5;
  options.agentic_admission_pressure_threshold = 0.8;
  options.agentic_admission_max_wait_s = 12;
  const CoordinatorParams p = CoordinatorParamsFrom(options);
  EXPECT_DOUBLE_EQ(p.ledger.headroom, 0.5);
  EXPECT_DOUBLE_EQ(p.ledger.pressure_threshold, 0.8);
  EXPECT_EQ(p.max_wait, At(12));
  EXPECT_EQ(p.ledger.lease_ttl, At(600));
  EXPECT_EQ(p.ledger.staleness, At(6));
}

// The upstream scenarios as one step table per scenario: each row is one call at a time, with
// the action it must return (for Acquire) and the waiters it must resolve, in order.
enum class Op { kAcquire, kAcquireProtected, kRelease, kCancel, kTick, kPoll, kInvalidate };
struct Row {
  double t;
  Op op;
  std::string ticket;  // Acquire/Cancel: the ticket; Release: the lease id.
  int64_t tokens = 0;  // Acquire: the reservation; Poll: the engine's capacity.
  std::string expect;  // Acquire: "action:reason"; others: "".
  Strings resolved;    // Waiters resolved by this call, as "ticket:action:reason".
};
struct StepTable {
  std::string name;
  int64_t capacity;
  double max_wait_s;
  std::vector<Row> rows;
};

class AdmissionStepTableTest : public AdmissionCoordinatorTest,
                               public ::testing::WithParamInterface<StepTable> {};

TEST_P(AdmissionStepTableTest, EveryStepDecidesAsTheSeedSays) {
  const StepTable& table = GetParam();
  Build(table.capacity, table.max_wait_s);
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const Row& r = table.rows[i];
    SCOPED_TRACE("row " + std::to_string(i) + " at t=" + std::to_string(r.t));
    switch (r.op) {
      case Op::kAcquire:
      case Op::kAcquireProtected: {
        const AdmissionDecision d = Acquire(r.ticket, r.tokens, r.t, r.op == Op::kAcquireProtected);
        EXPECT_EQ(std::string(AdmissionActionName(d.action)) + ":" +
                      std::string(AdmissionReasonName(d.reason)),
                  r.expect);
        break;
      }
      case Op::kRelease:
        c().Release(r.ticket, At(r.t));
        break;
      case Op::kCancel:
        c().Cancel(r.ticket, At(r.t));
        break;
      case Op::kTick:
        c().Tick(At(r.t));
        break;
      case Op::kPoll:
        Poll(r.tokens, 0.1, r.t);
        break;
      case Op::kInvalidate:
        c().Reconcile({}, At(r.t));
        break;
    }
    Check();
    EXPECT_EQ(Resolved(), r.resolved);
  }
}

// The upstream coordinator's scenarios, one step table each.
const StepTable kUpstreamTables[] = {
    StepTable{"GlobalFifoOrder",
              100,
              30,
              {{0, Op::kAcquire, "a", 100, "admit:capacity_available", {}},
               {1, Op::kAcquire, "b", 70, "wait:capacity_exhausted", {}},
               {2, Op::kAcquire, "c", 40, "wait:capacity_exhausted", {}},
               {3, Op::kRelease, "1:a", 0, "", {"b:admit:capacity_available"}},
               {4, Op::kRelease, "1:b", 0, "", {"c:admit:capacity_available"}}}},
    StepTable{"ProtectedAndDegradedBypass",
              100,
              30,
              {{0, Op::kAcquireProtected, "p", 10, "bypass:protected", {}},
               {1, Op::kInvalidate, "", 0, "", {}},
               {2, Op::kAcquire, "d", 10, "bypass:degraded", {}}}},
    StepTable{"CancellationOfWaiterLeaseAndEarlyTicket",
              100,
              30,
              {{0, Op::kAcquire, "a", 100, "admit:capacity_available", {}},
               {1, Op::kAcquire, "b", 50, "wait:capacity_exhausted", {}},
               {2, Op::kCancel, "b", 0, "", {"b:bypass:cancelled"}},
               {3, Op::kCancel, "a", 0, "", {}},
               {4, Op::kAcquire, "c", 100, "admit:capacity_available", {}},
               {5, Op::kCancel, "early", 0, "", {}},
               {5, Op::kAcquire, "early", 1, "bypass:cancelled", {}}}},
    StepTable{"AgingWithoutLeasing",
              100,
              0,
              {{0, Op::kAcquire, "a", 100, "admit:capacity_available", {}},
               {0, Op::kAcquire, "b", 50, "bypass:aged", {}},
               {0, Op::kAcquire, "c", 1, "bypass:aged", {}}}},
    StepTable{"HeadOfLineBlocksSmallerAndStaleLedgerDrainsAsBypass",
              100,
              30,
              {{0, Op::kAcquire, "a", 90, "admit:capacity_available", {}},
               {1, Op::kAcquire, "big", 20, "wait:capacity_exhausted", {}},
               {2, Op::kAcquire, "small", 5, "wait:capacity_exhausted", {}},
               {3, Op::kTick, "", 0, "", {}},
               {9, Op::kTick, "", 0, "", {"big:bypass:degraded", "small:bypass:degraded"}}}},
    StepTable{"CapacityFollowsThePoll",
              100,
              30,
              {{0, Op::kAcquire, "a", 60, "admit:capacity_available", {}},
               {1, Op::kPoll, "", 200, "", {}},
               {1, Op::kAcquire, "b", 140, "admit:capacity_available", {}},
               {2, Op::kAcquire, "c", 1, "wait:capacity_exhausted", {}},
               {3, Op::kRelease, "1:a", 0, "", {"c:admit:capacity_available"}}}}};

std::string StepTableName(const ::testing::TestParamInfo<StepTable>& param_info) {
  return param_info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Upstream, AdmissionStepTableTest, ::testing::ValuesIn(kUpstreamTables),
                         StepTableName);

// Random acquire / release / cancel / reconcile / tick: reserved equals the sum of live
// leases; no waiter is admitted ahead of an older one; every waiter is resolved within
// max_wait (plus the tick interval) of simulated time; the epoch changes exactly when the
// healthy engine set changes.
// Long: one randomized model test: the operations, the model and the checks after each step
// read best as one loop.
TEST(AdmissionCoordinatorPropertyTest, RandomOperationsKeepTheContracts) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    CoordinatorParams p;
    p.ledger.headroom = 0.9;
    p.ledger.lease_ttl = At(20);
    p.max_wait = At(10);
    AdmissionCoordinator c(p);
    double now = 0;
    std::map<std::string, std::string> leases;                   // ticket -> lease id
    std::map<std::string, int64_t> lease_tokens;                 // ticket -> tokens
    std::map<std::string, double> lease_since;                   // ticket -> grant time
    std::map<std::string, std::pair<uint64_t, double>> waiting;  // ticket -> (order, since)
    uint64_t arrival = 0;
    uint64_t last_admitted_from_queue = 0;
    std::set<std::string> healthy_set;
    int64_t epoch = 0;
    int next_ticket = 0;
    int64_t refused = 0;
    const auto absorb = [&](const std::vector<AdmissionDecision>& resolved) {
      for (const AdmissionDecision& d : resolved) {
        auto w = waiting.find(d.ticket);
        ASSERT_NE(w, waiting.end()) << d.ticket;
        EXPECT_LE(now - w->second.second, 10.0 + 1.0 + 1e-9) << "resolved too late";
        if (d.action == AdmissionAction::kRefuse) {
          // Refused only while the ledger is fresh and the waiter exceeds its whole ceiling.
          ASSERT_EQ(d.reason, AdmissionReason::kOversized);
          ASSERT_EQ(d.ceiling, c.ledger().ceiling());
          ASSERT_GT(d.reservation_tokens, c.ledger().ceiling());
          ++refused;
        }
        if (d.action == AdmissionAction::kAdmit) {
          ASSERT_GE(w->second.first, last_admitted_from_queue) << "admitted out of order";
          last_admitted_from_queue = w->second.first;
          leases[d.ticket] = *d.lease_id;
          lease_tokens[d.ticket] = d.reservation_tokens;
          lease_since[d.ticket] = now;
        }
        waiting.erase(w);
      }
    };
    for (int op = 0; op < 20'000; ++op) {
      now += 0.25 * static_cast<double>(rng.Uniform(0, 4));
      const int64_t kind = rng.Uniform(0, 9);
      if (kind < 4) {
        const std::string ticket = "r" + std::to_string(next_ticket++) + ":0";
        // Now and then larger than one engine's ceiling (900), sometimes than the fleet's.
        const int64_t tokens = rng.Bernoulli(0.05) ? rng.Uniform(800, 3000) : rng.Uniform(1, 400);
        const StatusOr<AdmissionDecision> d =
            c.Acquire(AcquireRequest{ticket, tokens, false}, At(now));
        ASSERT_TRUE(d.ok());
        if (d->action == AdmissionAction::kRefuse) {
          ASSERT_FALSE(c.ledger().IsStale(At(now)));
          ASSERT_GT(tokens, c.ledger().LargestKnownCapacity(At(now)));
          ++refused;
        } else if (d->action != AdmissionAction::kBypass ||
                   d->reason != AdmissionReason::kDegraded) {
          ASSERT_LE(tokens, c.ledger().LargestKnownCapacity(At(now)))
              << "a request no engine holds was not refused";
          // One over the ceiling but within an engine reserves the ceiling, never more.
          ASSERT_LE(d->reservation_tokens, c.ledger().ceiling());
        }
        if (d->action == AdmissionAction::kAdmit) {
          leases[ticket] = *d->lease_id;
          lease_tokens[ticket] = d->reservation_tokens;
          lease_since[ticket] = now;
        } else if (d->action == AdmissionAction::kWait) {
          waiting[ticket] = {arrival++, now};
        }
      } else if (kind < 6 && !leases.empty()) {
        auto it = leases.begin();
        std::advance(it, rng.Uniform(0, static_cast<int64_t>(leases.size()) - 1));
        c.Release(it->second, At(now));
        lease_tokens.erase(it->first);
        lease_since.erase(it->first);
        leases.erase(it);
      } else if (kind < 7 && !waiting.empty()) {
        auto it = waiting.begin();
        std::advance(it, rng.Uniform(0, static_cast<int64_t>(waiting.size()) - 1));
        c.Cancel(it->first, At(now));
      } else if (kind < 8) {
        std::vector<EngineSnapshot> fleet;
        std::set<std::string> healthy;
        for (int e = 0; e < 3; ++e) {
          if (!rng.Bernoulli(0.85)) continue;
          std::string id = "e";
          id += std::to_string(e);
          const int64_t capacity = rng.Uniform(0, 1) == 0 ? 0 : 1000;
          if (capacity > 0) healthy.insert(id);
          fleet.push_back(EngineSnapshot{id, capacity, 0.5 * rng.UniformDouble(), 0, true});
        }
        c.Reconcile(fleet, At(now));
        // The reconcile reclaimed every lease older than the TTL, and only those.
        for (auto it = lease_since.begin(); it != lease_since.end();) {
          if (now - it->second > 20) {
            ASSERT_EQ(c.ledger().LeaseForTicket(it->first), nullptr) << "outlived its TTL";
            leases.erase(it->first);
            lease_tokens.erase(it->first);
            it = lease_since.erase(it);
          } else {
            ASSERT_NE(c.ledger().LeaseForTicket(it->first), nullptr) << "reclaimed too early";
            ++it;
          }
        }
        if (!healthy.empty() && healthy != healthy_set) {
          ++epoch;
          healthy_set = healthy;
        }
        ASSERT_EQ(c.ledger().epoch(), epoch);
        // TTL (600 s) never fires within this run's simulated time.
      } else {
        c.Tick(At(now));
      }
      absorb(c.TakeResolved());
      // Waiters cancelled resolve as bypass through TakeResolved too; admitted ones lease.
      int64_t sum = 0;
      for (const auto& [t, tokens] : lease_tokens) sum += tokens;
      ASSERT_EQ(c.ledger().reserved(), sum) << "op " << op;
      ASSERT_EQ(c.waiting(), static_cast<int64_t>(waiting.size())) << "op " << op;
      ASSERT_TRUE(c.CheckInvariants().ok());
      if (op % 4 == 0) c.Tick(At(now + 1.0));  // Ticks at least every simulated second.
      absorb(c.TakeResolved());
    }
    EXPECT_GT(refused, 0) << "the run never exercised the oversized refusal";
  }
}

}  // namespace
}  // namespace agentkv::control
