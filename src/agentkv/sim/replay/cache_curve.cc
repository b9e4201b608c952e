#include "agentkv/sim/replay/cache_curve.h"

#include <string>

#include "agentkv/sim/replay/instant_replay.h"
#include "agentkv/sim/replay/instant_sources.h"
#include "agentkv/sim/workload/open_loop_trace.h"

namespace agentkv::sim {
namespace {

constexpr int32_t kMaxBlockTokens = 1 << 20;

// The runner's options for `options`, without the callback.
InstantReplayOptions RunnerOptions(const CacheCurveOptions& options) {
  InstantReplayOptions runner;
  runner.arms = {BaselineArm()};
  runner.capacity_fractions = options.fractions;
  runner.capacity_blocks = options.capacity_blocks;
  runner.host_blocks = 0;
  runner.truncate_long_requests = true;
  return runner;
}

}  // namespace

Status CacheCurveOptions::Validate() const {
  if (block_tokens < 1 || block_tokens > kMaxBlockTokens) {
    return InvalidArgumentError("block_tokens must be in [1, " + std::to_string(kMaxBlockTokens) +
                                "], got " + std::to_string(block_tokens));
  }
  return RunnerOptions(*this).Validate();
}

int64_t CountUniqueBlocks(const std::vector<MooncakeRequest>& requests) {
  return UniqueBlocks(OpenLoopInOrder(OpenLoopFromMooncake(requests), 1));
}

StatusOr<std::vector<CacheCurvePoint>> RunCacheCurve(const std::vector<MooncakeRequest>& requests,
                                                     const CacheCurveOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  InstantReplayOptions runner = RunnerOptions(options);
  if (options.progress) {
    runner.progress = [&options](size_t point, int64_t requests_done) {
      options.progress(static_cast<int>(point), requests_done);
    };
  }
  AGENTKV_ASSIGN_OR_RETURN(
      const InstantReplayResult run,
      RunInstantReplay(OpenLoopInOrder(OpenLoopFromMooncake(requests), options.block_tokens),
                       runner));
  std::vector<CacheCurvePoint> points;
  points.reserve(run.points.size());
  for (const InstantPoint& p : run.points) {
    points.push_back(CacheCurvePoint{.fraction = p.fraction,
                                     .capacity_blocks = p.capacity_blocks,
                                     .hits = p.hits,
                                     .total_blocks = p.total_blocks,
                                     .evictions = p.stats.device_evictions,
                                     .hit_ratio = p.hit_ratio});
  }
  return points;
}

}  // namespace agentkv::sim
