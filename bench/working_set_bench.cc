// Working-set decisions per second (control::WorkingSetAdmission), with 10,000 new programs
// waiting behind a full fleet of 100 engines. Each iteration ends one live program's agent
// (its footprint is released and the oldest waiting program is admitted into the room) and
// a new program arrives (it waits at the tail): two decisions, plus the hold of a finished
// request. items_processed counts decisions.
//
//   build/release/bench/working_set_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <deque>
#include <string>
#include <vector>

#include "agentkv/control/working_set.h"

namespace agentkv::control {
namespace {

constexpr int kEngines = 100;
constexpr int64_t kTokensPerEngine = 1000;
constexpr int64_t kTokensPerProgram = 100;

void BM_EndAgentAdmitsTheNextProgram(benchmark::State& state) {
  const int64_t queued = state.range(0);
  WorkingSetOptions options;
  options.headroom = 1.0;
  options.max_wait = TimeNs::Seconds(86'400);
  WorkingSetAdmission ws(options);
  std::vector<EngineSnapshot> fleet;
  for (int e = 0; e < kEngines; ++e) {
    fleet.push_back(EngineSnapshot{.engine_id = "engine-" + std::to_string(e),
                                   .max_total_num_tokens = kTokensPerEngine});
  }
  const TimeNs now = TimeNs::Seconds(1);
  ws.Reconcile(fleet, TimeNs());
  int64_t next = 0;
  std::deque<std::string> live;  // Oldest first.
  auto arrive = [&] {
    const std::string name = "p" + std::to_string(next++);
    const WorkingSetDecision d = ws.Acquire({.ticket = name + ":0",
                                             .program = name,
                                             .agent = name,
                                             .reservation_tokens = kTokensPerProgram},
                                            now)
                                     .value();
    if (d.admitted) live.push_back(name);
  };
  const int64_t admitted = kEngines * kTokensPerEngine / kTokensPerProgram;
  for (int64_t i = 0; i < admitted + queued; ++i) arrive();
  if (ws.Gauges().waiting_programs != queued) state.SkipWithError("setup did not queue");
  for (auto _ : state) {
    const std::string done = live.front();
    live.pop_front();
    ws.Finish(done + ":0",
              RequestEnd{.context_tokens = kTokensPerProgram, .next_pause = PauseKind::kSessionEnd},
              now);
    ws.EndAgent(done, now);
    for (const WorkingSetDecision& d : ws.TakeResolved()) {
      live.push_back(d.ticket.substr(0, d.ticket.size() - 2));
    }
    arrive();
  }
  if (ws.Gauges().waiting_programs != queued) state.SkipWithError("the queue length drifted");
  state.SetItemsProcessed(state.iterations() * 2);
}

BENCHMARK(BM_EndAgentAdmitsTheNextProgram)->Arg(10'000);

}  // namespace
}  // namespace agentkv::control

BENCHMARK_MAIN();
