// AdmissionCoordinator's v2 policy (per-engine queues, program order, aging, shared
// prefixes), its oversized refusals and its session and client shares, with a fake clock
// (times are passed in), plus randomized property tests. The v1 contract is in
// admission_coordinator_test.cc.
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
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/reservation.h"

namespace agentkv::control {
namespace {

using testing_support::AdmissionOptions;
using testing_support::At;

using Strings = std::vector<std::string>;

// --- Admission v2 ---

// Two engines, "a" and "b", each of `capacity` tokens; v2 policy.
class AdmissionV2Test : public ::testing::Test, protected testing_support::CoordinatorHarness {
 protected:
  void Build(int64_t capacity, double headroom = 1.0, double window_s = 5, double max_wait_s = 30) {
    CoordinatorParams p;
    p.ledger.headroom = headroom;
    p.ledger.pressure_threshold = 0.92;
    p.max_wait = At(max_wait_s);
    p.policy = AdmissionPolicy::kV2;
    p.program_window = At(window_s);
    p.ledger.staleness = At(1e6);  // Polls only where a test says.
    capacity_ = capacity;
    coordinator_.emplace(p);
    Poll(0, 0.1, 0.1);
  }
  void Poll(double now, double usage_a, double usage_b) {
    const std::vector<EngineSnapshot> fleet = {EngineSnapshot{"a", capacity_, usage_a, 0, true},
                                               EngineSnapshot{"b", capacity_, usage_b, 0, true}};
    coordinator_->Reconcile(fleet, At(now));
    Check();
  }
  AdmissionDecision Acquire(const std::string& ticket, int64_t tokens, double now,
                            std::optional<std::string> engine, bool continuing = false,
                            std::optional<std::string> prefix_key = std::nullopt,
                            int64_t prefix_tokens = 0) {
    AcquireRequest request{ticket, tokens, false};
    request.engine = std::move(engine);
    request.continuing = continuing;
    request.prefix_key = std::move(prefix_key);
    request.prefix_tokens = prefix_tokens;
    StatusOr<AdmissionDecision> d = coordinator_->Acquire(request, At(now));
    EXPECT_TRUE(d.ok()) << d.status();
    Check();
    return d.ok() ? *d : AdmissionDecision{};
  }
  // Resolved waiters as "ticket:action".
  std::vector<std::string> Resolved() { return ResolvedAs(/*with_reason=*/false); }

  int64_t capacity_ = 0;
};

TEST_F(AdmissionV2Test, AFullEngineDoesNotDelayRequestsBoundForAnother) {
  Build(1000);
  EXPECT_EQ(Acquire("a1", 800, 0, "a").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("a2", 400, 0, "a").action, AdmissionAction::kWait);
  // The seed's strict global FIFO would hold b1 behind a2.
  EXPECT_EQ(Acquire("b1", 400, 0, "b").action, AdmissionAction::kAdmit);
  // Pressure on a: a's newcomers wait `pressure_guard`, b's do not.
  Poll(1, 0.95, 0.5);
  EXPECT_EQ(Acquire("a3", 1, 1, "a").action, AdmissionAction::kWait);
  EXPECT_EQ(Acquire("b2", 1, 1, "b").action, AdmissionAction::kAdmit);
  Poll(1, 0.5, 0.95);
  const AdmissionDecision b3 = Acquire("b3", 1, 1, "b");
  EXPECT_EQ(b3.action, AdmissionAction::kWait);
  EXPECT_EQ(b3.reason, AdmissionReason::kPressureGuard);
  Poll(1, 0.95, 0.5);
  EXPECT_EQ(Resolved(), Strings{"b3:admit"});
  // Within a's queue the order is strict: a2 first once a has room and no pressure.
  c().Release("1:a1", At(2));
  EXPECT_EQ(Resolved(), Strings{});  // Still under pressure until the next poll.
  Poll(3, 0.2, 0.5);
  EXPECT_EQ(Resolved(), (Strings{"a2:admit", "a3:admit"}));
  EXPECT_EQ(c().ledger().engine_reserved("a"), 401);
}

TEST_F(AdmissionV2Test, AContinuingSessionGoesBeforeANewSessionsFirst) {
  Build(1000);
  ASSERT_EQ(Acquire("hold", 950, 0, "a").action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("small", 50, 0, "a").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("new", 50, 1, "a").action, AdmissionAction::kWait);
  EXPECT_EQ(Acquire("cont", 50, 2, "a", /*continuing=*/true).action, AdmissionAction::kWait);
  // Room for one: the continuing program goes first, the new session waits on.
  c().Release("1:small", At(3));
  EXPECT_EQ(Resolved(), Strings{"cont:admit"});
  EXPECT_EQ(c().waiting(), 1);
  c().Release("1:hold", At(4));
  EXPECT_EQ(Resolved(), Strings{"new:admit"});
}

TEST_F(AdmissionV2Test, AgingBoundsTheProgramOrder) {
  Build(1000, 1.0, /*window_s=*/5);
  ASSERT_EQ(Acquire("hold", 950, 0, "a").action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("small", 50, 0, "a").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("new", 50, 0, "a").action, AdmissionAction::kWait);
  // Arrived more than the window after `new`: it does not overtake it.
  EXPECT_EQ(Acquire("cont", 50, 6, "a", /*continuing=*/true).action, AdmissionAction::kWait);
  c().Release("1:small", At(7));
  EXPECT_EQ(Resolved(), Strings{"new:admit"});
  c().Release("1:hold", At(8));
  EXPECT_EQ(Resolved(), Strings{"cont:admit"});
}

TEST_F(AdmissionV2Test, ANewcomerWaitsBehindAnEarlierWaiterOfItsOwnQueueOnly) {
  Build(1000);
  ASSERT_EQ(Acquire("hold", 900, 0, "a").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("big", 500, 0, "a").action, AdmissionAction::kWait);
  // It would fit a, but `big` is ahead of it: no backfill that could starve `big`.
  EXPECT_EQ(Acquire("tiny", 10, 1, "a").action, AdmissionAction::kWait);
  // Continuing, within the window: it goes ahead of `big`, and fits.
  EXPECT_EQ(Acquire("cont", 10, 1, "a", /*continuing=*/true).action, AdmissionAction::kAdmit);
}

TEST_F(AdmissionV2Test, CapsAtTheCeilingAndRefusesWhatNoEngineCanHoldAtOnce) {
  Build(1000, /*headroom=*/0.5);
  // Over a's ceiling (500) but within its KV: capped, never waiting forever.
  const AdmissionDecision capped = Acquire("capped", 800, 0, "a");
  EXPECT_EQ(capped.action, AdmissionAction::kAdmit);
  EXPECT_EQ(capped.reservation_tokens, 500);
  EXPECT_EQ(c().ledger().engine_reserved("a"), 500);
  // Over the engine's whole KV: refused at once, naming the limit.
  const AdmissionDecision refused = Acquire("huge", 1001, 0, "a");
  EXPECT_EQ(refused.action, AdmissionAction::kRefuse);
  EXPECT_EQ(refused.reason, AdmissionReason::kOversized);
  EXPECT_EQ(refused.ceiling, 1000);
  EXPECT_EQ(refused.reservation_tokens, 1001);
  // The prefix counts toward the limit; the fleet's limit is its largest engine's.
  EXPECT_EQ(Acquire("fleet", 600, 0, std::nullopt, false, "p", 401).action,
            AdmissionAction::kRefuse);
  EXPECT_EQ(c().waiting(), 0);
  EXPECT_EQ(c().counters().refused_oversized, 2);
}

TEST_F(AdmissionV2Test, ASharedPrefixIsReservedOnceAcrossItsGroup) {
  Build(1000);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Acquire("s" + std::to_string(i), 100, 0, "a", false, "group", 500).action,
              AdmissionAction::kAdmit)
        << i;
  }
  EXPECT_EQ(c().ledger().engine_reserved("a"), 900);  // The seed would need 2400.
  for (int i = 0; i < 4; ++i) c().Release("1:s" + std::to_string(i), At(1));
  EXPECT_EQ(c().ledger().reserved(), 0);
  EXPECT_EQ(c().ledger().prefix_entries(), 0);
}

TEST_F(AdmissionV2Test, ADegradedLedgerBypassesAndShutdownResolvesEveryWaiter) {
  Build(1000);
  ASSERT_EQ(Acquire("hold", 1000, 0, "a").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("w", 10, 0, "a").action, AdmissionAction::kWait);
  c().ledger().Invalidate();
  EXPECT_EQ(Acquire("late", 10, 1, "b").reason, AdmissionReason::kDegraded);
  c().Shutdown();
  EXPECT_EQ(Resolved(), Strings{"w:bypass"});
  EXPECT_EQ(c().waiting(), 0);
  Check();
}

// Randomized, model-based: with engine a under permanent pressure and b roomy, every request
// bound for b is admitted at once whatever waits for a (per-engine independence).
TEST(AdmissionV2PropertyTest, AFullEngineNeverDelaysAnother) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    CoordinatorParams p;
    p.policy = AdmissionPolicy::kV2;
    p.max_wait = At(1e6);
    AdmissionCoordinator c(p);
    const std::vector<EngineSnapshot> fleet = {EngineSnapshot{"a", 1000, 0.95, 0, true},
                                               EngineSnapshot{"b", 1'000'000, 0.1, 0, true}};
    c.Reconcile(fleet, At(0));
    int64_t waiting_for_a = 0;
    for (int i = 0; i < 500; ++i) {
      const bool to_a = rng.Bernoulli(0.5);
      AcquireRequest request{"t" + std::to_string(i), rng.Uniform(1, 900), false};
      request.engine = to_a ? "a" : "b";
      request.continuing = rng.Bernoulli(0.5);
      const StatusOr<AdmissionDecision> d = c.Acquire(request, At(0.01 * i));
      ASSERT_TRUE(d.ok());
      if (to_a) {
        ASSERT_EQ(d->action, AdmissionAction::kWait) << "seed " << seed;
        ++waiting_for_a;
      } else {
        ASSERT_EQ(d->action, AdmissionAction::kAdmit) << "seed " << seed << " request " << i;
        ASSERT_EQ(d->wait, TimeNs());
      }
      ASSERT_EQ(c.waiting(), waiting_for_a);
    }
    ASSERT_TRUE(c.CheckInvariants().ok());
  }
}

// Randomized: acquire (engine a, b or the fleet; new or continuing; with or without a shared
// prefix) / release / cancel / reconcile / tick. After every step: the invariants hold, an
// admission never passes a waiter of its own queue that comes before it in program order
// (so no new session's request is overtaken by a continuing one that arrived more than the
// window after it), and every waiter is resolved within max_wait (no starvation). At the end,
// once every lease is returned and the waiters aged out: nothing reserved, no lease, no waiter.
// Long: one randomized model test: the operations, the model and the checks after each step
// read best as one loop.
TEST(AdmissionV2PropertyTest, RandomOperationsConserveAndNeverStarve) {
  constexpr double kWindow = 3;
  constexpr double kMaxWait = 10;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    CoordinatorParams p;
    p.policy = AdmissionPolicy::kV2;
    p.ledger.headroom = 0.9;
    p.ledger.lease_ttl = At(1e6);
    p.ledger.staleness = At(1e6);
    p.max_wait = At(kMaxWait);
    p.program_window = At(kWindow);
    AdmissionCoordinator c(p);
    struct Waiting {
      std::string queue;
      double order_at = 0;
      uint64_t seq = 0;
      double since = 0;
    };
    std::map<std::string, Waiting> waiting;
    std::map<std::string, std::string> leases;  // ticket -> lease id
    uint64_t seq = 0;
    double now = 0;
    int next = 0;
    int64_t overtakes_checked = 0;
    // `admitted` (queue, order key) may not pass any waiter of its queue that comes before it.
    const auto check_order = [&](const std::string& queue, double order_at, uint64_t key_seq) {
      for (const auto& [t, w] : waiting) {
        if (w.queue != queue) continue;
        ++overtakes_checked;
        ASSERT_TRUE(w.order_at > order_at || (w.order_at == order_at && w.seq > key_seq))
            << t << " (" << w.order_at << ", " << w.seq << ") was passed in queue '" << queue
            << "' by (" << order_at << ", " << key_seq << ") at " << now;
      }
    };
    const auto absorb = [&] {
      for (const AdmissionDecision& d : c.TakeResolved()) {
        auto w = waiting.find(d.ticket);
        ASSERT_NE(w, waiting.end()) << d.ticket;
        ASSERT_LE(now - w->second.since, kMaxWait + 1.0 + 1e-9) << "starved";
        const Waiting self = w->second;
        waiting.erase(w);
        if (d.action == AdmissionAction::kAdmit) {
          check_order(self.queue, self.order_at, self.seq);
          leases[d.ticket] = *d.lease_id;
        }
      }
    };
    const auto poll = [&] {
      const std::vector<EngineSnapshot> fleet = {
          EngineSnapshot{"a", 1000, rng.Bernoulli(0.2) ? 0.95 : 0.5 * rng.UniformDouble(), 0, true},
          EngineSnapshot{"b", 2000, 0.5 * rng.UniformDouble(), 0, true}};
      c.Reconcile(fleet, At(now));
    };
    poll();
    for (int op = 0; op < 5000; ++op) {
      now += 0.25 * static_cast<double>(rng.Uniform(0, 4));
      const int64_t kind = rng.Uniform(0, 9);
      if (kind < 4) {
        const std::string ticket = "r" + std::to_string(next++);
        AcquireRequest request{ticket, rng.Uniform(1, 400), false};
        const int64_t where = rng.Uniform(0, 2);
        if (where < 2) request.engine = where == 0 ? "a" : "b";
        request.continuing = rng.Bernoulli(0.5);
        if (rng.Bernoulli(0.3)) {
          request.prefix_key = "g" + std::to_string(rng.Uniform(0, 3));
          request.prefix_tokens = rng.Uniform(0, 300);
        }
        if (rng.Bernoulli(0.02)) request.reservation_tokens = rng.Uniform(900, 3000);
        const std::string queue = request.engine.value_or("");
        const double order_at = request.continuing ? now - kWindow : now;
        const StatusOr<AdmissionDecision> d = c.Acquire(request, At(now));
        ASSERT_TRUE(d.ok());
        absorb();  // Waiters the acquire's drain resolved first (aged ones).
        if (d->action == AdmissionAction::kAdmit) {
          check_order(queue, order_at, std::numeric_limits<uint64_t>::max());
          leases[ticket] = *d->lease_id;
        } else if (d->action == AdmissionAction::kWait) {
          waiting[ticket] = Waiting{queue, order_at, seq++, now};
        } else if (d->action == AdmissionAction::kRefuse) {
          ASSERT_GT(d->reservation_tokens, *d->ceiling);
        }
      } else if (kind < 7 && !leases.empty()) {
        auto it = leases.begin();
        std::advance(it, rng.Uniform(0, static_cast<int64_t>(leases.size()) - 1));
        c.Release(it->second, At(now));
        leases.erase(it);
      } else if (kind < 8 && !waiting.empty()) {
        auto it = waiting.begin();
        std::advance(it, rng.Uniform(0, static_cast<int64_t>(waiting.size()) - 1));
        c.Cancel(it->first, At(now));
      } else if (kind < 9) {
        poll();
      } else {
        c.Tick(At(now));
      }
      absorb();
      ASSERT_EQ(c.waiting(), static_cast<int64_t>(waiting.size())) << "op " << op;
      ASSERT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants();
      // The services drain at least once per poll; here after every step (time advances at
      // most 1 s a step, hence the bound of max_wait + 1 s).
      c.Tick(At(now));
      absorb();
    }
    EXPECT_GT(overtakes_checked, 0);
    for (const auto& [t, lease] : leases) c.Release(lease, At(now));
    leases.clear();
    absorb();
    for (int i = 0; i < static_cast<int>(kMaxWait) + 1; ++i) {
      now += 1;
      c.Tick(At(now));
      absorb();
    }
    // Waiters admitted by those releases return their leases in turn.
    for (const auto& [t, lease] : leases) c.Release(lease, At(now));
    absorb();
    EXPECT_EQ(c.waiting(), 0);
    EXPECT_EQ(c.ledger().reserved(), 0);
    EXPECT_EQ(c.ledger().lease_count(), 0);
    EXPECT_EQ(c.ledger().prefix_entries(), 0);
  }
}

// Issue 29, item 4: with one engine the ceiling is its headroom share, and while engines stop
// reporting it shrinks; a request that the fleet's largest engine holds is capped to the ceiling
// and runs once the budget is empty, never refused as if it could never run. Only what exceeds
// the largest engine seen within the lease TTL is refused.
TEST(AdmissionOversizedTest, AShrunkCeilingCapsAndWaitsOnlyTheLargestEngineRefuses) {
  CoordinatorParams p;
  p.ledger.headroom = 0.9;
  p.ledger.lease_ttl = At(600);
  AdmissionCoordinator c(p);
  const std::vector<EngineSnapshot> fleet = {EngineSnapshot{"a", 200'000, 0.1, 0, true},
                                             EngineSnapshot{"b", 200'000, 0.1, 0, true},
                                             EngineSnapshot{"c", 200'000, 0.1, 0, true}};
  c.Reconcile(fleet, At(0));
  // Two engines stop reporting: the ceiling is 180,000.
  c.Reconcile(std::span(fleet).first(1), At(1));
  ASSERT_EQ(c.ledger().ceiling(), 180'000);
  StatusOr<AdmissionDecision> small = c.Acquire(AcquireRequest{"small", 1000, false}, At(1));
  ASSERT_EQ(small->action, AdmissionAction::kAdmit);
  StatusOr<AdmissionDecision> big = c.Acquire(AcquireRequest{"big", 185'000, false}, At(1));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->action, AdmissionAction::kWait);
  c.Release(*small->lease_id, At(2));
  const std::vector<AdmissionDecision> resolved = c.TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].action, AdmissionAction::kAdmit);
  EXPECT_EQ(resolved[0].reservation_tokens, 180'000);  // Capped to the ceiling.
  c.Release(*resolved[0].lease_id, At(3));
  // Larger than any engine: refused at once, naming the largest engine's capacity.
  StatusOr<AdmissionDecision> never = c.Acquire(AcquireRequest{"never", 200'001, false}, At(3));
  EXPECT_EQ(never->action, AdmissionAction::kRefuse);
  EXPECT_EQ(never->reason, AdmissionReason::kOversized);
  EXPECT_EQ(never->ceiling, 200'000);
  // A retry under the same ticket is refused the same way, and so is v2's fleet target.
  EXPECT_EQ(c.counters().refused_oversized, 1);
  EXPECT_TRUE(c.CheckInvariants().ok());

  // One engine alone: its 185,000-token request runs (capped to 180,000), never a 400.
  AdmissionCoordinator one(p);
  one.Reconcile(std::span(fleet).first(1), At(0));
  StatusOr<AdmissionDecision> alone = one.Acquire(AcquireRequest{"alone", 185'000, false}, At(0));
  EXPECT_EQ(alone->action, AdmissionAction::kAdmit);
  EXPECT_EQ(alone->reservation_tokens, 180'000);
  // Engines not seen for the lease TTL are forgotten: the fleet is what reports.
  AdmissionCoordinator shrunk(p);
  shrunk.Reconcile(fleet, At(0));
  shrunk.Reconcile(std::vector<EngineSnapshot>{EngineSnapshot{"small", 1000, 0.1, 0, true}},
                   At(601));
  EXPECT_EQ(shrunk.ledger().LargestKnownCapacity(At(601)), 1000);
}

// Admission v2: the fleet target's capacity is the largest engine seen within the TTL.
TEST(AdmissionOversizedTest, V2JudgesTheFleetTargetByTheLargestKnownEngine) {
  CoordinatorParams p;
  p.ledger.headroom = 0.9;
  p.policy = AdmissionPolicy::kV2;
  AdmissionCoordinator c(p);
  c.Reconcile(std::vector<EngineSnapshot>{EngineSnapshot{"a", 100'000, 0.1, 0, true},
                                          EngineSnapshot{"b", 200'000, 0.1, 0, true}},
              At(0));
  c.Reconcile(std::vector<EngineSnapshot>{EngineSnapshot{"a", 100'000, 0.1, 0, true}}, At(1));
  StatusOr<AdmissionDecision> d = c.Acquire(AcquireRequest{"t", 150'000, false}, At(1));
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->action, AdmissionAction::kRefuse);
  EXPECT_EQ(d->reservation_tokens, 90'000);  // Capped to the shrunk ceiling.
}

class AdmissionShareTest : public ::testing::TestWithParam<AdmissionPolicy>,
                           protected testing_support::CoordinatorHarness {
 protected:
  // One engine of 1000 tokens (headroom 1), session and client shares of one half.
  AdmissionShareTest() {
    CoordinatorParams p;
    p.ledger.headroom = 1.0;
    p.ledger.staleness = At(1e6);
    p.max_wait = At(30);
    p.policy = GetParam();
    p.shares = ShareLimits{.session_share = 0.5, .client_share = 0.5};
    coordinator_.emplace(p);
    coordinator_->Reconcile(std::vector<EngineSnapshot>{EngineSnapshot{"e", 1000, 0.1, 0, true}},
                            At(0));
  }
  AdmissionDecision Acquire(const std::string& ticket, int64_t tokens, double now,
                            std::optional<std::string> session,
                            std::optional<std::string> client = std::nullopt) {
    AcquireRequest request{ticket, tokens, false};
    request.holder = ShareHolder{std::move(client), std::move(session)};
    StatusOr<AdmissionDecision> d = coordinator_->Acquire(request, At(now));
    EXPECT_TRUE(d.ok()) << d.status();
    Check();
    return d.ok() ? *d : AdmissionDecision{};
  }
};

// Issue 29, item 1: a session past its share waits without blocking anyone: another session's
// request behind it is admitted at once; the over-share one goes when its own lease returns.
TEST_P(AdmissionShareTest, ASessionOverItsShareWaitsWithoutBlockingOthers) {
  // A session's first lease is never held back, whatever its size.
  const AdmissionDecision first = Acquire("s1", 400, 0, "greedy");
  ASSERT_EQ(first.action, AdmissionAction::kAdmit);
  EXPECT_EQ(c().shares().session_held("greedy"), 400);
  EXPECT_EQ(Acquire("s2", 400, 0, "greedy").action, AdmissionAction::kWait);
  // Room for 600 remains; another session's request goes past the over-share waiter.
  const AdmissionDecision other = Acquire("o1", 300, 1, "polite");
  EXPECT_EQ(other.action, AdmissionAction::kAdmit);
  EXPECT_EQ(c().waiting(), 1);
  c().Release(*first.lease_id, At(2));
  EXPECT_EQ(Resolved(), (Strings{"s2:admit:capacity_available"}));
  EXPECT_EQ(c().shares().session_held("greedy"), 400);
  Check();
}

// Still over at the maximum wait: refused (the gateway's 429), never the aged bypass, which
// would let it run without any lease.
TEST_P(AdmissionShareTest, OverShareAtTheMaximumWaitIsRefusedNotBypassed) {
  ASSERT_EQ(Acquire("s1", 300, 0, "greedy").action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("s2", 300, 0, "greedy").action, AdmissionAction::kWait);
  c().Tick(At(30));
  const std::vector<AdmissionDecision> resolved = c().TakeResolved();
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(resolved[0].action, AdmissionAction::kRefuse);
  EXPECT_EQ(resolved[0].reason, AdmissionReason::kOverShare);
  EXPECT_EQ(resolved[0].ceiling, 500);  // The share's bound.
  EXPECT_EQ(c().counters().refused_over_share, 1);
  EXPECT_EQ(c().ledger().reserved(), 300);
  const std::vector<std::pair<std::string, double>> metrics =
      c().StepMetrics(AdmissionOptions(), At(30), false);
  EXPECT_THAT(metrics, testing::Contains(std::pair<std::string, double>(
                           std::string(kRefusedOverShareMetric), 1.0)));
}

// The client share bounds every session of one client together; requests that name no holder
// are bounded only by the ledger.
TEST_P(AdmissionShareTest, TheClientShareBoundsAllItsSessionsTogether) {
  ASSERT_EQ(Acquire("a", 300, 0, "s-a", "tenant").action, AdmissionAction::kAdmit);
  ASSERT_EQ(Acquire("b", 150, 0, "s-b", "tenant").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Acquire("c", 100, 0, "s-c", "tenant").action, AdmissionAction::kWait);  // 550 > 500
  EXPECT_EQ(Acquire("anon", 500, 0, std::nullopt).action, AdmissionAction::kAdmit);
  EXPECT_EQ(c().shares().client_held("tenant"), 450);
  c().Cancel("c", At(1));
  EXPECT_EQ(Resolved(), (Strings{"c:bypass:cancelled"}));
  Check();
}

// Cancel, TTL expiry and shutdown return the shares with the leases.
TEST_P(AdmissionShareTest, EveryWayALeaseEndsReturnsItsShare) {
  const AdmissionDecision a = Acquire("a", 100, 0, "s", "t");
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  c().Cancel("a", At(1));  // A lease granted concurrently with its cancel.
  EXPECT_EQ(c().shares().session_held("s"), 0);
  ASSERT_EQ(Acquire("b", 100, 1, "s", "t").action, AdmissionAction::kAdmit);
  c().Reconcile(std::vector<EngineSnapshot>{EngineSnapshot{"e", 1000, 0.1, 0, true}}, At(700));
  EXPECT_EQ(c().ledger().lease_count(), 0);
  EXPECT_EQ(c().shares().leases(), 0);
  EXPECT_EQ(c().shares().client_held("t"), 0);
  ASSERT_EQ(Acquire("c", 100, 700, "s", "t").action, AdmissionAction::kAdmit);
  c().Shutdown();
  EXPECT_EQ(c().shares().leases(), 0);
  Check();
}

INSTANTIATE_TEST_SUITE_P(BothPolicies, AdmissionShareTest,
                         ::testing::Values(AdmissionPolicy::kSeed, AdmissionPolicy::kV2),
                         [](const auto& param_info) {
                           return std::string(AdmissionPolicyName(param_info.param));
                         });

// Randomized: with shares on, the share book always equals the leases' holders (the invariant
// check), no holder goes over its share except by its first lease, and a request of a holder
// within its share is never kept waiting by an over-share one.
TEST(AdmissionSharePropertyTest, RandomOperationsKeepSharesExact) {
  for (const AdmissionPolicy policy : {AdmissionPolicy::kSeed, AdmissionPolicy::kV2}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      Rng rng(seed);
      CoordinatorParams p;
      p.ledger.headroom = 1.0;
      p.ledger.staleness = At(1e6);
      p.policy = policy;
      p.shares = ShareLimits{.session_share = 0.3, .client_share = 0.6};
      AdmissionCoordinator c(p);
      const std::vector<EngineSnapshot> fleet = {EngineSnapshot{"e", 1000, 0.1, 0, true}};
      c.Reconcile(fleet, At(0));
      std::vector<std::string> leases;
      double now = 0;
      for (int op = 0; op < 300; ++op) {
        now += 0.25;
        const int64_t kind = rng.Uniform(0, 9);
        if (kind < 6) {
          AcquireRequest r{"t" + std::to_string(op), rng.Uniform(1, 400), false};
          r.holder.session = "s" + std::to_string(rng.Uniform(0, 4));
          if (rng.Bernoulli(0.5)) r.holder.client = "c" + std::to_string(rng.Uniform(0, 1));
          StatusOr<AdmissionDecision> d = c.Acquire(r, At(now));
          ASSERT_TRUE(d.ok()) << d.status();
          if (d->lease_id.has_value()) leases.push_back(*d->lease_id);
        } else if (kind < 9 && !leases.empty()) {
          const int64_t i = rng.Uniform(0, static_cast<int64_t>(leases.size()) - 1);
          c.Release(leases[static_cast<size_t>(i)], At(now));
          leases.erase(leases.begin() + i);
        } else {
          c.Reconcile(fleet, At(now));
        }
        for (const AdmissionDecision& d : c.TakeResolved()) {
          if (d.lease_id.has_value()) leases.push_back(*d.lease_id);
        }
        ASSERT_TRUE(c.CheckInvariants().ok()) << c.CheckInvariants();
        for (int s = 0; s < 5; ++s) {
          const int64_t held = c.shares().session_held("s" + std::to_string(s));
          // Over 300 only with a single lease, which is at most 400.
          ASSERT_LE(held, 400 + 300) << "seed " << seed << " op " << op;
        }
        ASSERT_EQ(c.shares().leases(), c.ledger().lease_count());
      }
    }
  }
}

}  // namespace
}  // namespace agentkv::control
