// End-to-end throughput of `agentkv replay`: the whole simulator (agent driver, gateway with
// admission and lifecycle, router, step schedulers over the KV cache, cost model, event loop)
// on two workloads, one arm per run:
//   - weka: the 39 WEKA Claude Code traces bundled in data/weka, Poisson starts 60 s apart, two
//     8B engines on H100 (the docs/RESULTS.md operating point);
//   - synthetic: the embedded default of `agentkv replay` (48 sessions, context scale 0.5,
//     two engines with 262,144 KV tokens each).
// Counters: block_lookups_per_s (full prompt blocks matched against the prefix index, per
// second of wall time) and requests_per_s, over real (wall) time. Target: >= 1,000,000 block
// lookups/s.
//
// BM_ReplayBurst replays an open-loop burst: N requests arriving at the same instant, each its
// own session (1,024-token prompts of 512-token blocks, 16 output tokens), one arm, so that a
// step whose cost grows with the requests waiting or the sessions known shows as a per-request
// time (ns_per_request) that grows with N; linear work keeps it flat (docs/PERFORMANCE.md).
//
//   build/release/bench/replay_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/open_loop_trace.h"
#include "agentkv/sim/workload/synthetic_agentic.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {
namespace {

const AgenticWorkload& WekaAll() {
  static const AgenticWorkload* const kWorkload = [] {
    StatusOr<std::vector<WekaConversation>> conversations =
        ReadWekaTraces({std::string(AGENTKV_DATA_DIR) + "/weka"});
    if (!conversations.ok()) {
      std::fprintf(stderr, "%s\n", conversations.status().ToString().c_str());
      std::abort();
    }
    return new AgenticWorkload(WekaWorkload(*std::move(conversations), TimeNs::Seconds(60), 1));
  }();
  return *kWorkload;
}

const AgenticWorkload& SyntheticDefault() {
  static const AgenticWorkload* const kWorkload = [] {
    SyntheticAgenticOptions options;
    options.sessions = 48;
    options.context_scale = 0.5;
    options.mean_session_interarrival = TimeNs::Seconds(15);
    options.max_context_blocks = static_cast<int64_t>(0.9 * 4096 / 0.5);
    return new AgenticWorkload(GenerateSyntheticAgentic(options).value());
  }();
  return *kWorkload;
}

void RunArmBench(benchmark::State& state, const AgenticWorkload& workload, ReplayOptions options,
                 const char* arm) {
  const ArmSpec spec = ParseArm(arm).value();
  int64_t lookups = 0;
  int64_t requests = 0;
  for (auto _ : state) {
    StatusOr<ArmRun> run = RunAgenticArm(workload, options, spec);
    if (!run.ok()) {
      state.SkipWithError(run.status().ToString().c_str());
      return;
    }
    lookups += run->result.prompt_blocks;
    requests += run->result.requests_completed;
  }
  state.counters["block_lookups_per_s"] =
      benchmark::Counter(static_cast<double>(lookups), benchmark::Counter::kIsRate);
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
}

void BM_ReplayWeka(benchmark::State& state, const char* arm) {
  ReplayOptions options;
  RunArmBench(state, WekaAll(), options, arm);
}

void BM_ReplaySynthetic(benchmark::State& state, const char* arm) {
  ReplayOptions options;
  options.engine.kv_pool.max_total_tokens = 262144;
  options.shared_prefix_ids = 15000 / 2 / 64;
  RunArmBench(state, SyntheticDefault(), options, arm);
}

std::vector<OpenLoopRequest> Burst(int64_t n) {
  std::vector<OpenLoopRequest> requests;
  requests.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t id = static_cast<uint64_t>(i) * 2;
    requests.push_back(OpenLoopRequest{TimeNs(), {id, id + 1}, 1024, 16});
  }
  return requests;
}

void BM_ReplayBurst(benchmark::State& state, const char* arm) {
  const std::vector<OpenLoopRequest> requests = Burst(state.range(0));
  const ArmSpec spec = ParseArm(arm).value();
  const ReplayOptions options;
  for (auto _ : state) {
    StatusOr<ArmRun> run = RunOpenLoopArm(requests, 512, options, spec);
    if (!run.ok()) {
      state.SkipWithError(run.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(run->result.requests_completed);
  }
  state.counters["ns_per_request"] = benchmark::Counter(
      static_cast<double>(requests.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_ReplayBurst, baseline, "baseline")
    ->Arg(5000)
    ->Arg(10000)
    ->Arg(20000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// The recommended set, whose admission v2 drain used to walk every waiter on each call.
BENCHMARK_CAPTURE(BM_ReplayBurst, agentkv, "agentkv")
    ->Arg(5000)
    ->Arg(20000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplayBurst, all, "all")
    ->Arg(5000)
    ->Arg(20000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_CAPTURE(BM_ReplayWeka, baseline, "baseline")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplayWeka, all, "all")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplayWeka, infinite_cache, "infinite-cache")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplaySynthetic, baseline, "baseline")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_ReplaySynthetic, all, "all")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace agentkv::sim

BENCHMARK_MAIN();
