// The threads `agentkv replay` runs its arms on: the simulator starts none (sim::ArmTaskRunner),
// so the command line decides how many arms run at once (--jobs). Arms share nothing mutable and
// each writes its own result, so the report does not depend on how many run at once.
#ifndef AGENTKV_TOOLS_AGENTKV_ARM_THREADS_H_
#define AGENTKV_TOOLS_AGENTKV_ARM_THREADS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace agentkv::tools {

// The largest --jobs.
inline constexpr int64_t kMaxArmJobs = 256;

// How many arms run at once: `jobs` (--jobs, in [0, kMaxArmJobs]; 0 = the hardware threads,
// at least 1), never more than `arms` nor fewer than 1.
size_t ArmJobs(int64_t jobs, size_t arms);

// Runs every task exactly once on `threads` threads (the caller's among them), each thread
// taking the next task not yet started; returns when all have finished. `threads` <= 1 runs them
// in order on the caller's thread.
void RunOnThreads(const std::vector<std::function<void()>>& tasks, size_t threads);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_ARM_THREADS_H_
