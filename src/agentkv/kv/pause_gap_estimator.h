// PauseGapEstimator: how long a session stays away after a request, learned online per kind of
// pause (a tool call, a sub-agent's run, a human's turn) and, where the caller names it, per
// tool. Each observation is the gap between a request's finish and its session's next arrival;
// the estimate is a quantile (the median by default) of a log-scale histogram of them, so it is
// robust to the heavy tails agentic pauses have (a forgotten session must not drag the typical
// tool call up) and deterministic: integer counts, no floating-point state. Old observations
// fade: when a distribution holds `max_samples` observations its counts are halved, so the
// estimate follows a workload whose pauses drift.
//
// KvCacheManager's gap-aware eviction order (KvCacheOptions::eviction_order) owns one; any
// policy that wants a pause prediction (e.g. offloading a session that enters a long pause)
// can own another. A pure value class: no clock, no I/O. Thread-compatible.
#ifndef AGENTKV_KV_PAUSE_GAP_ESTIMATOR_H_
#define AGENTKV_KV_PAUSE_GAP_ESTIMATOR_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agentkv/base/time.h"

namespace agentkv::kv {

// What a session does after a request: the hint a finished request carries.
enum class PauseKind : uint8_t {
  // Not known: the request's blocks are ranked by plain recency.
  kUnknown,
  // The response called a tool; the next request carries its result.
  kToolCall,
  // The response started sub-agents; the next request carries their results.
  kSubagentWait,
  // The response ended the turn; the next request is a human's.
  kHumanTurn,
  // The session ended with this request: nothing of it is needed again.
  kSessionEnd,
};

// "unknown", "tool_call", "subagent_wait", "human_turn" or "session_end".
std::string_view PauseKindName(PauseKind kind);

// True for the pauses a session comes back from (a tool call, a sub-agent wait, a human's
// turn); false for an unknown pause and for the end of the session.
constexpr bool IsReturningPause(PauseKind kind) {
  return kind == PauseKind::kToolCall || kind == PauseKind::kSubagentWait ||
         kind == PauseKind::kHumanTurn;
}

class PauseGapEstimator {
 public:
  struct Options {
    // The quantile Estimate returns. Default: 0.5 (the median). Range: (0, 1).
    double quantile = 0.5;
    // Observations a distribution needs before it is used: a tool with fewer falls back to its
    // kind, a kind with fewer has no estimate. Default: 4. Range: [1, 1 << 20].
    int64_t min_samples = 4;
    // Observations at which a distribution's counts are halved (old pauses fade).
    // Default: 4096. Range: [2 * min_samples, 1 << 30].
    int64_t max_samples = 4096;
    // Distinct tools tracked per kind; later tools use their kind's distribution.
    // Default: 256. Range: [0, 1 << 16].
    int64_t max_tools = 256;
  };

  PauseGapEstimator() : PauseGapEstimator(Options{}) {}
  // Precondition: `options` in range (CHECKed).
  explicit PauseGapEstimator(const Options& options);

  // Records that a session paused for `gap` after a request whose hint was `kind` (and
  // `tool`, empty when unknown). kUnknown and kSessionEnd carry no pause and are ignored, as
  // is a negative gap.
  void Observe(PauseKind kind, std::string_view tool, TimeNs gap);

  // The estimated gap after a request with hint `kind` and `tool`: the tool's distribution when
  // it has min_samples observations, else the kind's, else nullopt (also for kUnknown and
  // kSessionEnd). The value is the middle of the histogram bucket the quantile falls in
  // (buckets are a quarter of an octave wide: within about 10 % of the exact quantile).
  std::optional<TimeNs> Estimate(PauseKind kind, std::string_view tool = {}) const;

  // Observations currently counted for `kind` (after fading).
  int64_t samples(PauseKind kind) const;

 private:
  // Quarter-octave buckets over [0, 2^63) ns.
  static constexpr int kBuckets = 64 * 4;

  struct Distribution {
    std::array<int64_t, kBuckets> counts{};
    int64_t total = 0;
  };

  static int BucketOf(int64_t ns);
  static int64_t BucketMiddle(int bucket);
  void Add(Distribution& d, int64_t ns) const;
  std::optional<TimeNs> Quantile(const Distribution& d) const;

  Options options_;
  // Indexed by PauseKind (kToolCall..kHumanTurn used).
  std::array<Distribution, 5> kinds_{};
  // (kind, tool) -> distribution; ordered, so iteration could never change an outcome.
  std::map<std::pair<PauseKind, std::string>, Distribution> tools_;
  std::array<int64_t, 5> tools_per_kind_{};
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_PAUSE_GAP_ESTIMATOR_H_
