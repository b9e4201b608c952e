// Admission decisions per second: acquire + release pairs against a fleet of 100 engines with
// 10,000 waiters queued. Each iteration releases the oldest lease (the FIFO head is admitted
// into the freed tokens) and acquires for a new ticket (which waits at the tail): two
// decisions. items_processed counts decisions.
//
//   build/release/bench/admission_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <deque>
#include <string>
#include <vector>

#include "agentkv/control/admission_coordinator.h"

namespace agentkv::control {
namespace {

constexpr int kEngines = 100;
constexpr int64_t kTokensPerEngine = 1000;
constexpr int64_t kTokensPerRequest = 100;

void BM_AcquireReleaseWithQueuedWaiters(benchmark::State& state) {
  const int64_t queued = state.range(0);
  CoordinatorParams p;
  p.ledger.headroom = 1.0;
  p.max_wait = TimeNs::Seconds(1e6);
  AdmissionCoordinator c(p);
  std::vector<EngineSnapshot> fleet;
  for (int e = 0; e < kEngines; ++e) {
    fleet.push_back(
        EngineSnapshot{"http://engine-" + std::to_string(e), kTokensPerEngine, 0.5, 0, true});
  }
  const TimeNs now = TimeNs::Seconds(1);
  c.Reconcile(fleet, TimeNs());
  int64_t next = 0;
  std::deque<std::string> leases;  // Oldest first.
  const int64_t admitted = kEngines * kTokensPerEngine / kTokensPerRequest;
  for (int64_t i = 0; i < admitted + queued; ++i) {
    const AdmissionDecision d =
        c.Acquire(AcquireRequest{"r" + std::to_string(next++) + ":0", kTokensPerRequest, false},
                  now)
            .value();
    if (d.lease_id.has_value()) leases.push_back(*d.lease_id);
  }
  if (c.waiting() != queued) state.SkipWithError("setup did not queue every waiter");
  for (auto _ : state) {
    c.Release(leases.front(), now);
    leases.pop_front();
    for (const AdmissionDecision& d : c.TakeResolved()) leases.push_back(*d.lease_id);
    const StatusOr<AdmissionDecision> d = c.Acquire(
        AcquireRequest{"r" + std::to_string(next++) + ":0", kTokensPerRequest, false}, now);
    benchmark::DoNotOptimize(d);
  }
  if (c.waiting() != queued) state.SkipWithError("the queue length drifted");
  state.SetItemsProcessed(state.iterations() * 2);
}

BENCHMARK(BM_AcquireReleaseWithQueuedWaiters)->Arg(10'000);

}  // namespace
}  // namespace agentkv::control

BENCHMARK_MAIN();
