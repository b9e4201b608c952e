// InstanceRegistry with a fake clock: which instances go silent, with which tickets, and the
// stalled-sweep guard; then the registry and AdmissionCoordinator::ReleaseTickets together, as
// the coordinator service drives them, against a dead gateway's leases and waiters.
#include "agentkv/control/instance_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agentkv/control/admission_coordinator.h"

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TimeNs At(double seconds) { return TimeNs::Seconds(seconds); }

class InstanceRegistryTest : public ::testing::Test {
 protected:
  void Check() {
    const Status s = registry_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }
  // Sweeps every `step` seconds from `from` to `to` (so no sweep looks stalled); returns the
  // instances given up on, as "instance:ticket,ticket".
  std::vector<std::string> SweepUntil(double from, double to, double step = 1.0) {
    std::vector<std::string> out;
    for (double t = from; t <= to + 1e-9; t += step) {
      for (const SilentInstance& s : registry_.TakeSilent(At(t))) {
        std::string line = s.instance + ":";
        for (size_t i = 0; i < s.tickets.size(); ++i) line += (i ? "," : "") + s.tickets[i];
        out.push_back(line);
      }
      Check();
    }
    return out;
  }

  InstanceRegistry registry_{At(10)};
};

TEST_F(InstanceRegistryTest, AnInstanceSilentPastTheTimeoutIsGivenUpWithItsTickets) {
  registry_.Own("gw-b", "gw-b/1", At(0));
  registry_.Own("gw-a", "gw-a/2", At(0));
  registry_.Own("gw-a", "gw-a/1", At(0));
  Check();
  EXPECT_EQ(registry_.instances(), 2);
  EXPECT_EQ(registry_.tickets(), 3);
  // gw-b heartbeats; gw-a is silent from t=0.
  for (double t = 1; t <= 10; ++t) registry_.Touch("gw-b", At(t));
  EXPECT_THAT(SweepUntil(0, 10), IsEmpty()) << "exactly the timeout is not yet silent";
  EXPECT_THAT(SweepUntil(10.5, 10.5), ElementsAre("gw-a:gw-a/1,gw-a/2"));
  EXPECT_EQ(registry_.instances(), 1);
  EXPECT_EQ(registry_.tickets(), 1);
  EXPECT_EQ(registry_.OwnerOf("gw-a/1"), std::nullopt);
  EXPECT_EQ(registry_.OwnerOf("gw-b/1"), "gw-b");
  // gw-b stops too: it goes one timeout after its last heartbeat, not before.
  EXPECT_THAT(SweepUntil(11, 20), IsEmpty());
  EXPECT_THAT(SweepUntil(20.5, 20.5), ElementsAre("gw-b:gw-b/1"));
  EXPECT_EQ(registry_.instances(), 0);
}

TEST_F(InstanceRegistryTest, AnAcquireIsASignOfLifeAndAHeartbeatAloneMakesAnInstanceKnown) {
  registry_.Touch("idle", At(0));
  registry_.Own("busy", "busy/1", At(0));
  EXPECT_THAT(SweepUntil(0, 9), IsEmpty());
  registry_.Own("busy", "busy/2", At(9));
  EXPECT_THAT(SweepUntil(10, 15), ElementsAre("idle:"));
  EXPECT_THAT(SweepUntil(16, 20), ElementsAre("busy:busy/1,busy/2"));
}

TEST_F(InstanceRegistryTest, ForgottenAndPrunedTicketsAreNotHandedBack) {
  registry_.Own("gw", "gw/1", At(0));
  registry_.Own("gw", "gw/2", At(0));
  registry_.Own("gw", "gw/3", At(0));
  registry_.Forget("gw/1");
  registry_.Forget("gw/1");  // Idempotent.
  registry_.Forget("unknown");
  registry_.PruneTickets([](const std::string& ticket) { return ticket != "gw/2"; });
  Check();
  EXPECT_EQ(registry_.tickets(), 1);
  EXPECT_EQ(registry_.instances(), 1) << "pruning tickets keeps the instance";
  EXPECT_THAT(SweepUntil(0, 11), ElementsAre("gw:gw/3"));
}

TEST_F(InstanceRegistryTest, ATicketBelongsToTheInstanceThatAcquiredItLast) {
  registry_.Own("old", "t", At(0));
  registry_.Own("new", "t", At(5));
  Check();
  EXPECT_EQ(registry_.OwnerOf("t"), "new");
  EXPECT_THAT(SweepUntil(0, 12), ElementsAre("old:"));
  EXPECT_THAT(SweepUntil(13, 16), ElementsAre("new:t"));
}

TEST_F(InstanceRegistryTest, AStalledSweepGivesEveryInstanceAFreshTimeout) {
  registry_.Own("gw", "gw/1", At(0));
  EXPECT_THAT(registry_.TakeSilent(At(0)), IsEmpty());
  // The caller itself was paused for 30 s: the instance could not have been heard.
  EXPECT_THAT(registry_.TakeSilent(At(30)), IsEmpty());
  EXPECT_EQ(registry_.instances(), 1);
  EXPECT_THAT(SweepUntil(31, 40), IsEmpty()) << "a full timeout from the stalled sweep";
  EXPECT_THAT(SweepUntil(41, 41), ElementsAre("gw:gw/1"));
}

// The coordinator service's use: a dead gateway's leases return and its waiter is cancelled;
// the FIFO behind them drains at once; the other gateway's tickets are untouched.
TEST(ReleaseTicketsTest, EndsADeadInstancesLeasesAndWaitersAndDrains) {
  CoordinatorParams p;
  p.ledger.headroom = 1.0;
  p.ledger.staleness = At(100);  // One poll serves the whole test.
  AdmissionCoordinator coordinator(p);
  const std::vector<EngineSnapshot> fleet = {EngineSnapshot{"engine-0", 1000, 0.1, 0, true}};
  coordinator.Reconcile(fleet, At(0));
  InstanceRegistry registry(At(10));
  auto acquire = [&](const std::string& instance, const std::string& ticket, int64_t tokens,
                     double now) {
    registry.Own(instance, ticket, At(now));
    StatusOr<AdmissionDecision> d = coordinator.Acquire(AcquireRequest{ticket, tokens}, At(now));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? d->action : AdmissionAction::kBypass;
  };
  EXPECT_EQ(acquire("dead", "dead/1", 300, 0), AdmissionAction::kAdmit);
  EXPECT_EQ(acquire("dead", "dead/2", 300, 0), AdmissionAction::kAdmit);
  EXPECT_EQ(acquire("live", "live/1", 300, 0), AdmissionAction::kAdmit);
  EXPECT_EQ(acquire("live", "live/2", 500, 1), AdmissionAction::kWait);
  EXPECT_EQ(acquire("dead", "dead/3", 100, 1), AdmissionAction::kWait);
  EXPECT_TRUE(coordinator.Holds("dead/3"));
  EXPECT_TRUE(coordinator.Holds("dead/1"));
  EXPECT_FALSE(coordinator.Holds("nobody"));

  std::vector<SilentInstance> silent;
  for (double t = 2; t <= 12 && silent.empty(); t += 1) {
    registry.Touch("live", At(t));
    silent = registry.TakeSilent(At(t));
  }
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].instance, "dead");
  const TicketsReleased released = coordinator.ReleaseTickets(silent[0].tickets, At(12));
  EXPECT_EQ(released, (TicketsReleased{2, 600, 1}));
  EXPECT_TRUE(coordinator.CheckInvariants().ok()) << coordinator.CheckInvariants();
  std::vector<std::string> resolved;
  for (const AdmissionDecision& d : coordinator.TakeResolved()) {
    resolved.push_back(d.ticket + ":" + std::string(AdmissionActionName(d.action)) + ":" +
                       std::string(AdmissionReasonName(d.reason)));
  }
  EXPECT_THAT(resolved, ElementsAre("dead/3:bypass:cancelled", "live/2:admit:capacity_available"));
  EXPECT_EQ(coordinator.ledger().reserved(), 800);
  EXPECT_EQ(coordinator.waiting(), 0);
  // Ending them again changes nothing, and is not remembered as a cancel.
  EXPECT_EQ(coordinator.ReleaseTickets(silent[0].tickets, At(13)), TicketsReleased{});
  EXPECT_EQ(acquire("dead", "dead/3", 100, 14), AdmissionAction::kAdmit);
}

}  // namespace
}  // namespace agentkv::control
