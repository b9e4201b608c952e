// PauseDistribution: the length of an agent's pauses between two of its model requests,
// learned online per pause class (a small key the caller maps its kinds of pause to: a main
// agent's tool call, a sub-agent's, a wait for sub-agents, a human's turn). Each class is a
// fixed log-spaced histogram (bounded memory): bucket i < kPauseBuckets - 1 holds pauses in
// (edge(i-1), edge(i)] with edge(i) = 250 ms * 2^i (250 ms .. 2048 s); the last bucket holds
// longer pauses and pauses that never ended (the program stopped). Until a class has samples,
// a prior of `prior_weight` pseudo-samples distributed exponentially with mean `prior_pause`
// stands in for them (real samples outweigh the prior as they arrive); counts halve when a
// class reaches `decay_at` samples, so the distribution follows drift.
//
// The one pause estimator of the engine's policies: Continuum's TTL (continuum_policy.h) and
// stall offload (stall_offload_policy.h) both read it.
//
// Pure: no I/O, clocks or globals; time enters as durations. Deterministic. Thread-compatible:
// const methods may run concurrently; Observe* need external synchronization. Copyable value.
#ifndef AGENTKV_ENGINE_PAUSE_DISTRIBUTION_H_
#define AGENTKV_ENGINE_PAUSE_DISTRIBUTION_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/pause_gap_estimator.h"

namespace agentkv::engine {

// Pause classes kept apart: keys in [0, kMaxPauseClasses).
inline constexpr int32_t kMaxPauseClasses = 8;

// Histogram buckets (see the header comment). The finite edges are the candidate TTLs of
// Continuum and the resolution of every quantile.
inline constexpr int32_t kPauseBuckets = 15;

struct PauseDistributionOptions {
  // The prior: `prior_weight` pseudo-samples in every class, exponentially distributed with
  // mean `prior_pause`. Default: 4 samples of mean 2 s (most tool calls of coding agents
  // return within seconds). Ranges: prior_weight [0, 1 << 20]; prior_pause [1 ms, 1 day].
  int64_t prior_weight = 4;
  TimeNs prior_pause = TimeNs::Seconds(2);
  // When a class has seen this many samples, every count is halved. Default: 4096.
  // Range: [2, 1 << 30].
  int64_t decay_at = 4096;

  // InvalidArgument naming the first field out of range; `owner` prefixes the field name
  // (e.g. "ContinuumPolicyOptions.").
  Status Validate(const char* owner = "PauseDistributionOptions.") const;
};

class PauseDistribution {
 public:
  using Weights = std::array<double, kPauseBuckets>;

  // Validates `options` (InvalidArgument naming the field).
  static StatusOr<PauseDistribution> Create(const PauseDistributionOptions& options);

  const PauseDistributionOptions& options() const { return options_; }

  // Records one pause of `pause_class` that ended after `pause` (the program's next request
  // arrived). Precondition: class in range, pause >= 0.
  void ObservePause(int32_t pause_class, TimeNs pause);
  // Records a pause that never ended (the program stopped after it).
  void ObserveNoReturn(int32_t pause_class);

  // P(pause <= ttl) for `pause_class` under the learned distribution and the prior, counting a
  // bucket as within `ttl` when its upper edge is.
  double ReturnProbability(int32_t pause_class, TimeNs ttl) const;
  // The smallest bucket edge e > `elapsed` with P(pause <= e | pause > elapsed) >= q: the
  // time, counted from the pause's start, by which a pause already `elapsed` long has ended
  // with probability q. Unset when the finite edges do not reach q (the class's mass beyond
  // 2048 s, or never returning, exceeds 1 - q). Precondition: q in (0, 1], elapsed >= 0.
  std::optional<TimeNs> ConditionalQuantile(int32_t pause_class, double q, TimeNs elapsed) const {
    return ConditionalQuantile(WeightsOf(pause_class), q, elapsed);
  }
  // The same over a class's weights (WeightsOf), for callers that ask many times at once.
  static std::optional<TimeNs> ConditionalQuantile(const Weights& weights, double q,
                                                   TimeNs elapsed);
  // Real samples recorded for `pause_class` (after decay), without the prior.
  int64_t samples(int32_t pause_class) const;
  // The class's counts plus the prior, per bucket.
  Weights WeightsOf(int32_t pause_class) const;

  // The finite bucket edges, ascending: 250 ms * 2^bucket. Precondition: bucket in
  // [0, kPauseBuckets - 1).
  static TimeNs BucketEdge(int32_t bucket);
  // The bucket a pause falls in.
  static int32_t BucketOf(TimeNs pause);

 private:
  explicit PauseDistribution(const PauseDistributionOptions& options) : options_(options) {}

  using Histogram = std::array<int64_t, kPauseBuckets>;
  void Add(int32_t pause_class, int32_t bucket);

  PauseDistributionOptions options_;
  std::array<Histogram, kMaxPauseClasses> counts_{};
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_PAUSE_DISTRIBUTION_H_
