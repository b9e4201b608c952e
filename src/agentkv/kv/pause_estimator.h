// PauseEstimator: how long an agent stays away after a request, learned online per pause class
// (the pause's kind, base/pause.h, and whether a sub-agent takes it) and, where the caller names
// it, per tool. The one pause estimator of agentkv: the KV cache's gap-aware eviction order and
// the working set (control/working_set.h) read a quantile of it (Estimate), Continuum's TTL
// pins and stall offload (engine/) read its distribution (ReturnProbability, WeightsOf,
// ConditionalQuantile), each with its own grid and prior (Options).
//
// Each class is a histogram over a fixed grid of bucket edges (PauseGrid; bounded memory,
// integer counts): bucket b holds pauses in (edge(b-1), edge(b)], and one more bucket past the
// last edge holds longer pauses and pauses that never ended (ObserveNoReturn). Old
// observations fade: when a distribution holds `max_samples` observations its counts are
// halved, so the estimate follows drift. The distribution answers add a prior of
// `prior_weight` pseudo-samples spread exponentially with mean `prior_pause` (real samples
// outweigh it as they arrive); Estimate reads the counts alone.
//
// Pure: no clock, no I/O, no globals; time enters as durations. Deterministic. Thread-
// compatible: const methods may run concurrently; Observe* need external synchronization.
// Copyable value.
#ifndef AGENTKV_KV_PAUSE_ESTIMATOR_H_
#define AGENTKV_KV_PAUSE_ESTIMATOR_H_

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::kv {

// Whose pause a distribution learns: its kind and whether a sub-agent (a request with a parent
// conversation) takes it. A policy picks the classes it keeps apart: the eviction order and the
// working set use the kind alone (a main agent's), Continuum the main agent's and a
// sub-agent's tool call and the wait for sub-agents, stall offload those and the human's turn.
struct PauseClass {
  PauseKind kind = PauseKind::kUnknown;
  bool subagent = false;

  constexpr PauseClass() = default;
  // Implicit: a pause kind alone is the main agent's pause of that kind.
  constexpr PauseClass(PauseKind k, bool sub = false) : kind(k), subagent(sub) {}  // NOLINT
  friend constexpr auto operator<=>(const PauseClass&, const PauseClass&) = default;
};

// The bucket edges of a histogram: ascending, inclusive upper bounds, each >= 0.
class PauseGrid {
 public:
  // Quarter octaves over [0, 2^63) ns: 0, 1, 2 and 3 ns exactly, then every octave [2^k,
  // 2^(k+1)) in four equal parts (each bucket within about 10 % of its middle). The grid of
  // Estimate's users (the eviction order, the working set).
  static PauseGrid QuarterOctaves();
  // Octaves from `first_edge`: edges first_edge * 2^b for b in [0, finite_buckets). Default:
  // 250 ms .. 2048 s (14 edges), the grid of Continuum (its candidate TTLs) and stall offload.
  // Precondition: first_edge > 0, finite_buckets in [1, 40] (CHECKed).
  static PauseGrid Octaves(TimeNs first_edge = TimeNs::Millis(250), int32_t finite_buckets = 14);

  // The finite edges; the histogram has one more bucket past the last.
  int32_t finite_buckets() const { return static_cast<int32_t>(edges_.size()); }
  // Precondition: bucket in [0, finite_buckets()).
  TimeNs edge(int32_t bucket) const;
  // The first bucket whose edge is >= `pause`, or finite_buckets() past the last edge.
  int32_t BucketOf(TimeNs pause) const;
  // The middle of a finite bucket: low + (edge - low + 1) / 2, low = the previous edge + 1
  // (0 for bucket 0). Precondition: bucket in [0, finite_buckets()).
  TimeNs Middle(int32_t bucket) const;

  friend bool operator==(const PauseGrid&, const PauseGrid&) = default;

 private:
  explicit PauseGrid(std::vector<int64_t> edges) : edges_(std::move(edges)) {}
  std::vector<int64_t> edges_;
};

class PauseEstimator {
 public:
  struct Options {
    // The histogram's buckets. Default: PauseGrid::QuarterOctaves().
    PauseGrid grid = PauseGrid::QuarterOctaves();
    // Estimate's quantile. Default: 0.5 (the median). Range: (0, 1).
    double quantile = 0.5;
    // Observations a distribution needs before Estimate uses it: a tool with fewer falls back
    // to its class, a class with fewer has no estimate. Default: 4. Range: [1, 1 << 20].
    int64_t min_samples = 4;
    // Observations at which a distribution's counts are halved (old pauses fade).
    // Default: 4096. Range: [max(2, 2 * min_samples), 1 << 30].
    int64_t max_samples = 4096;
    // Distinct tools tracked per class; later tools use their class's distribution.
    // Default: 256. Range: [0, 1 << 16].
    int64_t max_tools = 256;
    // The prior of the distribution answers (not of Estimate): `prior_weight` pseudo-samples
    // per class, exponentially distributed with mean `prior_pause`. Default: none (0 samples;
    // mean 2 s). Ranges: prior_weight [0, 1 << 20]; prior_pause [1 ms, 1 day].
    int64_t prior_weight = 0;
    TimeNs prior_pause = TimeNs::Seconds(2);

    // InvalidArgument naming the first field out of range, prefixed with `owner` (e.g.
    // "StallOffloadOptions.pauses.").
    Status Validate(std::string_view owner = "PauseEstimator.Options.") const;
  };

  // The options of the engine's policies: the octave grid (PauseGrid::Octaves()), a prior of 4
  // samples of mean 2 s (most tool calls of coding agents return within seconds), min_samples
  // 1 (unused: they read the distribution).
  static Options DistributionOptions();

  // Per-bucket weights of a class: its counts plus the prior; finite_buckets() + 1 entries.
  using Weights = std::vector<double>;

  PauseEstimator() : PauseEstimator(Options{}) {}
  // Precondition: `options` valid (CHECKed); Create returns the error instead.
  explicit PauseEstimator(const Options& options);
  // InvalidArgument naming the field when `options` is out of range.
  static StatusOr<PauseEstimator> Create(const Options& options);

  const Options& options() const { return options_; }
  const PauseGrid& grid() const { return options_.grid; }

  // Records that a session of `pause_class` paused for `gap` after a request (with `tool`,
  // empty when unknown). Classes of kUnknown and kSessionEnd carry no pause and are ignored, as
  // is a negative gap.
  void Observe(PauseClass pause_class, std::string_view tool, TimeNs gap);
  void Observe(PauseClass pause_class, TimeNs gap) { Observe(pause_class, {}, gap); }
  // Records a pause of `pause_class` that never ended (the program stopped after it): it counts
  // in the bucket past the last edge. Ignored for kUnknown and kSessionEnd.
  void ObserveNoReturn(PauseClass pause_class);

  // The estimated gap after a request of `pause_class` and `tool`, without the prior: the
  // tool's distribution when it has min_samples observations, else the class's, else nullopt
  // (also for kUnknown and kSessionEnd, and when the quantile lies past the last edge). The
  // value is the middle (PauseGrid::Middle) of the bucket the quantile falls in.
  std::optional<TimeNs> Estimate(PauseClass pause_class, std::string_view tool = {}) const;

  // P(pause <= ttl) for `pause_class` under its counts and the prior, counting a bucket as
  // within `ttl` when its edge is. 0 when the class has no weight at all.
  double ReturnProbability(PauseClass pause_class, TimeNs ttl) const;
  // The class's counts plus the prior, per bucket.
  Weights WeightsOf(PauseClass pause_class) const;
  // The smallest edge e > `elapsed` with P(pause <= e | pause > elapsed) >= q under `weights`
  // (WeightsOf, for callers that ask many times at once): the time, counted from the pause's
  // start, by which a pause already `elapsed` long has ended with probability q. Unset when
  // the finite edges do not reach q. Precondition: q in (0, 1], elapsed >= 0, weights from this
  // estimator's grid.
  std::optional<TimeNs> ConditionalQuantile(const Weights& weights, double q, TimeNs elapsed) const;
  std::optional<TimeNs> ConditionalQuantile(PauseClass pause_class, double q,
                                            TimeNs elapsed) const {
    return ConditionalQuantile(WeightsOf(pause_class), q, elapsed);
  }

  // Observations currently counted for `pause_class` (after fading), without the prior.
  int64_t samples(PauseClass pause_class) const;

 private:
  // Kinds times {main agent, sub-agent}.
  static constexpr size_t kClasses = 5 * 2;

  struct Distribution {
    std::vector<int64_t> counts;
    int64_t total = 0;
  };

  static size_t IndexOf(PauseClass pause_class);
  void Add(Distribution& d, int32_t bucket) const;
  std::optional<TimeNs> Quantile(const Distribution& d) const;

  Options options_;
  std::array<Distribution, kClasses> classes_{};
  // (class, tool) -> distribution; ordered, so iteration could never change an outcome.
  std::map<std::pair<size_t, std::string>, Distribution> tools_;
  std::array<int64_t, kClasses> tools_per_class_{};
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_PAUSE_ESTIMATOR_H_
