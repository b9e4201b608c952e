// LocalAdmission: the coordinator behind a mutex, with callbacks. Fake time (no timer) for the
// decision paths; the real clock and timer for aging without calls, and for concurrency.
#include "agentkv/service/admission/admission_local.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/control/admission_metrics.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using control::AdmissionAction;
using control::AdmissionDecision;
using control::AdmissionReason;

double Metric(const std::vector<std::pair<std::string, double>>& metrics, std::string_view name,
              double absent = -1.0) {
  for (const auto& [n, v] : metrics) {
    if (n == name) return v;
  }
  return absent;
}

class LocalAdmissionTest : public ::testing::Test {
 protected:
  // One engine of `capacity` tokens (headroom 1), fake time starting at 1000 s.
  void Build(int64_t capacity = 100, double max_wait_s = 30.0) {
    LocalAdmissionOptions options;
    options.agentic.agentic_admission_headroom = 1.0;
    options.agentic.agentic_admission_max_wait_s = max_wait_s;
    options.tick_interval = 0ms;
    options.clock = [this] { return TimeNs(now_ns_.load()); };
    options.on_instance_expired = [this](const InstanceExpiry& expiry) {
      std::lock_guard<std::mutex> lock(mu_);
      expired_.push_back(expiry);
    };
    StatusOr<std::unique_ptr<LocalAdmission>> admission = LocalAdmission::Create(options);
    ASSERT_TRUE(admission.ok()) << admission.status();
    admission_ = *std::move(admission);
    if (capacity > 0) Poll(capacity);
  }
  void Poll(int64_t capacity, double usage = 0.1) {
    const std::vector<control::EngineSnapshot> fleet = {
        control::EngineSnapshot{"engine-0", capacity, usage, 0, true}};
    admission_->Reconcile(fleet);
    Check();
  }
  void Advance(double seconds) { now_ns_ += TimeNs::Seconds(seconds).ns(); }
  void Check() { EXPECT_TRUE(admission_->CheckInvariants().ok()) << admission_->CheckInvariants(); }

  // Acquires `ticket`; its decision lands in outcomes_ (and answered_ records the order).
  void Acquire(const std::string& ticket, int64_t tokens, bool is_protected = false) {
    admission_->Acquire(control::AcquireRequest{ticket, tokens, is_protected},
                        [this, ticket](const AdmissionDecision& d) { Record(ticket, d); });
    Check();
  }
  // Acquire on behalf of a remote caller `instance`.
  void AcquireAs(const std::string& instance, const std::string& ticket, int64_t tokens) {
    admission_->AcquireWithStatus(
        control::AcquireRequest{ticket, tokens},
        [this, ticket](StatusOr<AdmissionDecision> d) {
          ASSERT_TRUE(d.ok()) << d.status();
          Record(ticket, *d);
        },
        instance);
    Check();
  }
  void Record(const std::string& ticket, const AdmissionDecision& d) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_[ticket];
    outcomes_[ticket] = d;
    answered_.push_back(ticket);
  }
  int Calls(const std::string& ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[ticket];
  }
  AdmissionDecision Outcome(const std::string& ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(calls_[ticket], 1) << ticket;
    return outcomes_[ticket];
  }
  void ReleaseTicket(const std::string& ticket) {
    const AdmissionDecision d = Outcome(ticket);
    ASSERT_TRUE(d.lease_id.has_value()) << ticket;
    admission_->Release(*d.lease_id);
    Check();
  }

  std::atomic<int64_t> now_ns_{TimeNs::Seconds(1000).ns()};
  std::unique_ptr<LocalAdmission> admission_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::map<std::string, AdmissionDecision> outcomes_;
  std::vector<std::string> answered_;
  std::vector<InstanceExpiry> expired_;
};

TEST_F(LocalAdmissionTest, WaitersAreAdmittedInFifoOrderAsLeasesAreReleased) {
  Build(100);
  Acquire("a", 100);
  EXPECT_EQ(Outcome("a").action, AdmissionAction::kAdmit);
  Acquire("b", 70);
  Acquire("c", 40);
  Acquire("d", 10);  // Fits, but never overtakes the older waiters.
  EXPECT_EQ(Calls("b") + Calls("c") + Calls("d"), 0);
  EXPECT_EQ(admission_->waiting(), 3);

  Advance(1.0);
  ReleaseTicket("a");
  EXPECT_EQ(Outcome("b").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Outcome("b").wait, TimeNs::Seconds(1.0));
  EXPECT_EQ(Calls("c"), 0) << "70 + 40 > 100: head-of-line";
  EXPECT_EQ(Calls("d"), 0);

  ReleaseTicket("b");  // One release admits both remaining waiters, in order.
  EXPECT_EQ(Outcome("c").action, AdmissionAction::kAdmit);
  EXPECT_EQ(Outcome("d").action, AdmissionAction::kAdmit);
  EXPECT_EQ(answered_, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(admission_->reserved(), 50);
  ReleaseTicket("c");
  ReleaseTicket("d");
  EXPECT_EQ(admission_->reserved(), 0);
  EXPECT_EQ(admission_->lease_count(), 0);
}

TEST_F(LocalAdmissionTest, TickAgesTheWaiterToBypassAtMaxWait) {
  Build(100, /*max_wait_s=*/2.0);
  Acquire("a", 100);
  Acquire("b", 50);
  Advance(1.9);
  admission_->Tick();
  EXPECT_EQ(Calls("b"), 0);
  Advance(0.2);
  admission_->Tick();
  const AdmissionDecision b = Outcome("b");
  EXPECT_EQ(b.action, AdmissionAction::kBypass);
  EXPECT_EQ(b.reason, AdmissionReason::kAged);
  EXPECT_FALSE(b.lease_id.has_value());
  EXPECT_EQ(b.wait, TimeNs::Seconds(2.1));
  EXPECT_EQ(admission_->reserved(), 100) << "an aged bypass takes no lease";
  EXPECT_EQ(admission_->waiting(), 0);
  ReleaseTicket("a");
  EXPECT_EQ(admission_->reserved(), 0);
}

TEST_F(LocalAdmissionTest, CancelOfAWaiterResolvesCancelledAndLeaksNothing) {
  Build(100);
  Acquire("a", 100);
  Acquire("b", 50);
  admission_->Cancel("b");
  Check();
  EXPECT_EQ(Outcome("b").reason, AdmissionReason::kCancelled);
  EXPECT_EQ(Outcome("b").action, AdmissionAction::kBypass);
  EXPECT_EQ(admission_->waiting(), 0);
  ReleaseTicket("a");
  EXPECT_EQ(Calls("b"), 1) << "a cancelled waiter is never admitted later";
  EXPECT_EQ(admission_->reserved(), 0);
  EXPECT_EQ(admission_->lease_count(), 0);

  Acquire("c", 10);  // Cancelling a granted ticket returns its lease.
  EXPECT_EQ(Outcome("c").action, AdmissionAction::kAdmit);
  admission_->Cancel("c");
  Check();
  EXPECT_EQ(admission_->reserved(), 0);
  EXPECT_EQ(admission_->lease_count(), 0);
}

TEST_F(LocalAdmissionTest, DestructionResolvesEveryWaiterDegradedInOrder) {
  Build(100);
  Acquire("a", 100);
  Acquire("b", 10);
  Acquire("c", 10);
  admission_.reset();
  EXPECT_EQ(Outcome("b").reason, AdmissionReason::kDegraded);
  EXPECT_EQ(Outcome("c").reason, AdmissionReason::kDegraded);
  EXPECT_EQ(Outcome("c").action, AdmissionAction::kBypass);
  EXPECT_EQ(answered_, (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(LocalAdmissionTest, AfterShutdownAcquireBypassesDegradedAtOnce) {
  Build(100);
  Acquire("a", 100);
  Acquire("b", 10);
  admission_->Shutdown();
  EXPECT_EQ(Outcome("b").reason, AdmissionReason::kDegraded);
  Acquire("c", 10);
  EXPECT_EQ(Outcome("c").reason, AdmissionReason::kDegraded);
  EXPECT_EQ(admission_->reserved(), 0);
  EXPECT_EQ(admission_->waiting(), 0);
}

TEST_F(LocalAdmissionTest, WithoutACapacitySignalEverythingBypassesDegraded) {
  Build(/*capacity=*/0);
  Acquire("a", 10);
  EXPECT_EQ(Outcome("a").reason, AdmissionReason::kDegraded);
  EXPECT_TRUE(admission_->degraded());
}

TEST_F(LocalAdmissionTest, WaitersDrainAsDegradedOnceTheSnapshotIsStale) {
  Build(100);
  Acquire("a", 100);
  Acquire("b", 10);
  Advance(6.5);  // Past the default staleness of 6 s, before max_wait.
  admission_->Tick();
  EXPECT_EQ(Outcome("b").reason, AdmissionReason::kDegraded);
  EXPECT_TRUE(admission_->degraded());
  ReleaseTicket("a");
  EXPECT_EQ(admission_->reserved(), 0);
}

TEST_F(LocalAdmissionTest, RetriedWaitingTicketIsAnsweredOnceForEachCall) {
  Build(100);
  Acquire("a", 100);
  Acquire("b", 10);
  Acquire("b", 10);
  EXPECT_EQ(admission_->waiting(), 1);
  // A retry with another reservation is refused without touching the waiter.
  std::optional<StatusOr<AdmissionDecision>> refused;
  admission_->AcquireWithStatus(control::AcquireRequest{"b", 20, false},
                                [&refused](StatusOr<AdmissionDecision> r) { refused = r; });
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status().code(), StatusCode::kInvalidArgument);
  Check();
  ReleaseTicket("a");
  EXPECT_EQ(Calls("b"), 2);
  EXPECT_EQ(outcomes_["b"].action, AdmissionAction::kAdmit);
  admission_->Release(*outcomes_["b"].lease_id);
  EXPECT_EQ(admission_->reserved(), 0);
}

TEST_F(LocalAdmissionTest, StepMetricsMergeSessionClosesAndResetPerStep) {
  Build(100);
  Acquire("a", 60);
  Acquire("b", 60);
  Acquire("p", 5, /*is_protected=*/true);
  admission_->CountSessionClose(true);
  admission_->CountSessionClose(false);
  const auto step = admission_->StepMetrics(/*reset_step=*/true);
  EXPECT_EQ(Metric(step, control::kSessionCloseMetric), 2.0);
  EXPECT_EQ(Metric(step, control::kSessionCloseFailureMetric), 1.0);
  EXPECT_EQ(Metric(step, control::kAdmitMetric), 1.0);
  EXPECT_EQ(Metric(step, control::kWaitMetric), 1.0);
  EXPECT_EQ(Metric(step, control::kBypassProtectedMetric), 1.0);
  EXPECT_EQ(Metric(step, control::kWaitingMetric), 1.0);
  EXPECT_EQ(Metric(step, control::kCeilingMetric), 100.0);
  EXPECT_EQ(Metric(step, control::kReservedMetric), 60.0);
  EXPECT_EQ(Metric(step, control::kDegradedMetric), 0.0);
  const auto next = admission_->StepMetrics(/*reset_step=*/false);
  EXPECT_EQ(Metric(next, control::kSessionCloseMetric), -1.0) << "reset, so absent";
  EXPECT_EQ(Metric(next, control::kAdmitMetric), -1.0);
  EXPECT_EQ(Metric(next, control::kWaitingMetric), 1.0) << "a gauge survives the reset";
  admission_->Cancel("b");
  ReleaseTicket("a");
  EXPECT_EQ(admission_->reserved(), 0);
}

TEST_F(LocalAdmissionTest, TotalCountersSurviveStepResetsAndAddEveryStep) {
  Build(100);
  Acquire("a", 60);
  Acquire("b", 60);  // Waits.
  admission_->CountSessionClose(false);
  (void)admission_->StepMetrics(/*reset_step=*/true);
  Advance(2.0);
  ReleaseTicket("a");  // b is granted after 2 s in the FIFO.
  Acquire("p", 5, /*is_protected=*/true);
  std::optional<control::AdmissionCounters> total = admission_->TotalCounters();
  ASSERT_TRUE(total.has_value());
  EXPECT_EQ(total->admit, 1);
  EXPECT_EQ(total->wait, 1);
  EXPECT_EQ(total->bypass, 1);
  EXPECT_EQ(total->bypass_protected, 1);
  EXPECT_EQ(total->wait_granted, 1);
  EXPECT_DOUBLE_EQ(total->wait_seconds_sum, 2.0);
  EXPECT_EQ(total->session_close, 1);
  EXPECT_EQ(total->session_close_failure, 1);
  // A read without reset, and then a reset, change no total.
  (void)admission_->StepMetrics(/*reset_step=*/false);
  (void)admission_->StepMetrics(/*reset_step=*/true);
  EXPECT_EQ(admission_->TotalCounters(), total);
  EXPECT_EQ(Metric(admission_->StepMetrics(false), control::kAdmitMetric), -1.0)
      << "the step restarted";
  ReleaseTicket("b");
  EXPECT_EQ(admission_->reserved(), 0);
}

// A remote caller that stops giving signs of life (killed) has its leases released and its
// waiters cancelled one instance timeout (10 s) after its last one; the other caller's waiter
// is admitted then, and its heartbeats keep its own leases.
TEST_F(LocalAdmissionTest, ASilentInstanceLosesItsLeasesAfterTheInstanceTimeout) {
  Build(1000);
  AcquireAs("dead", "dead/1", 300);
  AcquireAs("dead", "dead/2", 300);
  AcquireAs("live", "live/1", 300);
  AcquireAs("live", "live/2", 500);
  AcquireAs("dead", "dead/3", 50);
  EXPECT_EQ(admission_->waiting(), 2);
  EXPECT_EQ(admission_->instances(), 2);
  for (int second = 1; second <= 10; ++second) {
    Advance(1.0);
    Poll(1000);
    admission_->Heartbeat("live");
    admission_->Tick();
    Check();
  }
  EXPECT_EQ(Calls("live/2"), 0) << "exactly the timeout is not yet silent";
  EXPECT_EQ(admission_->reserved(), 900);
  Advance(0.5);
  admission_->Tick();
  Check();
  EXPECT_EQ(Outcome("dead/3").reason, AdmissionReason::kCancelled);
  EXPECT_EQ(Outcome("live/2").action, AdmissionAction::kAdmit);
  EXPECT_EQ(admission_->reserved(), 800);
  EXPECT_EQ(admission_->instances(), 1);
  EXPECT_EQ(admission_->instance_expiry_totals(), (InstanceExpiryTotals{1, 2, 600, 1}));
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(expired_.size(), 1u);
  EXPECT_EQ(expired_[0].instance, "dead");
  EXPECT_EQ(expired_[0].silent_for, TimeNs::Seconds(10.5));
  EXPECT_EQ(expired_[0].released, (control::TicketsReleased{2, 600, 1}));
}

TEST(LocalAdmissionOptionsTest, CreateRejectsOutOfRangeOptionsNamingTheFlag) {
  LocalAdmissionOptions options;
  options.agentic.agentic_admission_headroom = 1.5;
  StatusOr<std::unique_ptr<LocalAdmission>> admission = LocalAdmission::Create(options);
  ASSERT_FALSE(admission.ok());
  EXPECT_NE(admission.status().message().find("--agentic-admission-headroom"), std::string::npos)
      << admission.status();
  options.agentic.agentic_admission_headroom = 0.9;
  options.instance_timeout_s = 0.0;
  admission = LocalAdmission::Create(options);
  ASSERT_FALSE(admission.ok());
  EXPECT_NE(admission.status().message().find("--instance-timeout-s must be in (0, 86400]"),
            std::string::npos)
      << admission.status();
}

TEST(LocalAdmissionTimerTest, TheTimerAgesWaitersWithoutAnyCall) {
  LocalAdmissionOptions options;
  options.agentic.agentic_admission_headroom = 1.0;
  options.agentic.agentic_admission_max_wait_s = 0.05;
  options.tick_interval = 10ms;
  StatusOr<std::unique_ptr<LocalAdmission>> created = LocalAdmission::Create(options);
  ASSERT_TRUE(created.ok());
  LocalAdmission& admission = **created;
  const std::vector<control::EngineSnapshot> fleet = {
      control::EngineSnapshot{"engine-0", 100, 0.1, 0, true}};
  admission.Reconcile(fleet);
  std::promise<AdmissionDecision> first;
  std::promise<AdmissionDecision> second;
  admission.Acquire({"a", 100, false},
                    [&first](const AdmissionDecision& d) { first.set_value(d); });
  admission.Acquire({"b", 10, false},
                    [&second](const AdmissionDecision& d) { second.set_value(d); });
  std::future<AdmissionDecision> aged = second.get_future();
  ASSERT_EQ(aged.wait_for(5s), std::future_status::ready);
  const AdmissionDecision b = aged.get();
  EXPECT_EQ(b.reason, AdmissionReason::kAged);
  EXPECT_GE(b.wait, TimeNs::Millis(50));
  admission.Release(*first.get_future().get().lease_id);
  EXPECT_EQ(admission.reserved(), 0);
}

// 8 threads x 200 attempts with random reservations, holds and cancels against a tight
// budget, with the timer ticking: every callback runs exactly once and the ledger returns to 0.
TEST(LocalAdmissionConcurrencyTest, ManyThreadsAcquireAndReleaseWithoutLeaks) {
  constexpr int kThreads = 8;
  constexpr int kAttempts = 200;
  LocalAdmissionOptions options;
  options.agentic.agentic_admission_headroom = 1.0;
  options.agentic.agentic_admission_max_wait_s = 30.0;
  options.agentic.staleness_s = 600.0;
  options.tick_interval = 5ms;
  StatusOr<std::unique_ptr<LocalAdmission>> created = LocalAdmission::Create(options);
  ASSERT_TRUE(created.ok());
  LocalAdmission& admission = **created;
  const std::vector<control::EngineSnapshot> fleet = {
      control::EngineSnapshot{"engine-0", 100, 0.1, 0, true}};
  admission.Reconcile(fleet);

  std::vector<std::atomic<int>> calls(kThreads * kAttempts);
  std::atomic<int> admitted{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(1234 + t));  // Seed printed on failure below.
      for (int i = 0; i < kAttempts; ++i) {
        const int index = t * kAttempts + i;
        const std::string ticket = "t" + std::to_string(t) + ":" + std::to_string(i);
        const int64_t tokens = std::uniform_int_distribution<int64_t>(1, 60)(rng);
        const bool cancel = std::uniform_int_distribution<int>(0, 9)(rng) == 0;
        auto done = std::make_shared<std::promise<AdmissionDecision>>();
        std::future<AdmissionDecision> decided = done->get_future();
        admission.Acquire({ticket, tokens, false},
                          [&calls, index, done](const AdmissionDecision& d) {
                            if (calls[static_cast<size_t>(index)].fetch_add(1) == 0)
                              done->set_value(d);
                          });
        if (cancel) admission.Cancel(ticket);
        if (decided.wait_for(20s) != std::future_status::ready) {
          ++failures;
          return;
        }
        const AdmissionDecision d = decided.get();
        if (d.action == AdmissionAction::kAdmit) {
          ++admitted;
          std::this_thread::sleep_for(
              std::chrono::microseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
          admission.Release(*d.lease_id);  // After a cancel too: idempotent.
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "seeds 1234.." << 1234 + kThreads - 1;
  for (size_t i = 0; i < calls.size(); ++i) {
    ASSERT_EQ(calls[i].load(), 1) << "attempt " << i << " (seeds 1234..)";
  }
  EXPECT_GT(admitted.load(), kThreads * kAttempts / 2);
  EXPECT_GT(Metric(admission.StepMetrics(false), control::kWaitMetric, 0.0), 0.0)
      << "the budget was never tight enough to make anyone wait";
  EXPECT_EQ(admission.reserved(), 0);
  EXPECT_EQ(admission.lease_count(), 0);
  EXPECT_EQ(admission.waiting(), 0);
  EXPECT_TRUE(admission.CheckInvariants().ok()) << admission.CheckInvariants();
}

}  // namespace
}  // namespace agentkv::service
