// Clocks the benchmark programs share: the calling thread's CPU time, and the `cpu_share`
// counter that says whether a benchmark's thread kept its core while it was timed.
#ifndef AGENTKV_BENCH_BENCH_CLOCK_H_
#define AGENTKV_BENCH_BENCH_CLOCK_H_

#include <benchmark/benchmark.h>
#include <time.h>

#include <chrono>

namespace agentkv::bench {

using Clock = std::chrono::steady_clock;

// The calling thread's CPU time, in seconds.
inline double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Records the thread's CPU time against the wall time of a whole benchmark loop as the
// `cpu_share` counter: created just before the loop, Finish() called right after it.
class CpuShare {
 public:
  CpuShare() : cpu_start_(ThreadCpuSeconds()), wall_start_(Clock::now()) {}
  void Finish(benchmark::State& state) const {
    const double wall = std::chrono::duration<double>(Clock::now() - wall_start_).count();
    const double cpu = ThreadCpuSeconds() - cpu_start_;
    state.counters["cpu_share"] = wall > 0 ? cpu / wall : 0.0;
  }

 private:
  double cpu_start_;
  Clock::time_point wall_start_;
};

}  // namespace agentkv::bench

#endif  // AGENTKV_BENCH_BENCH_CLOCK_H_
