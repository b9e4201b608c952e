// Cache curve (`agentkv cache-curve`): block hit ratio of a Mooncake trace as a function of
// device capacity. A view of the instant single cache (instant_replay.h): the trace in file
// order (OpenLoopFromMooncake, then OpenLoopInOrder of instant_sources.h), the `baseline` arm (LRU
// at one priority, host tier 0, so an evicted block is dropped) at one point per capacity, long
// requests truncated to the capacity. Capacities are fractions of the trace's unique blocks
// (distinct chained keys: a block is identified by its whole prefix, not by its id alone) or one
// absolute block count. This file only maps its options onto the runner's. Pure function over its
// inputs (no printing: progress goes through a callback); thread-safe.
#ifndef AGENTKV_SIM_REPLAY_CACHE_CURVE_H_
#define AGENTKV_SIM_REPLAY_CACHE_CURVE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/sim/workload/mooncake_trace.h"

namespace agentkv::sim {

struct CacheCurveOptions {
  // Tokens per KV block; Mooncake hash ids stand for 512-token blocks.
  // Default: 512. Range: [1, 1048576].
  int32_t block_tokens = 512;
  // Device capacities as fractions of the trace's unique blocks; each point gets
  // max(1, floor(fraction * unique_blocks)) blocks. Points are reported in this order.
  // Default: {0.01, 0.05, 0.10, 0.25, 0.50, 1.0}. Range: non-empty, each in (0, 1].
  std::vector<double> fractions = {0.01, 0.05, 0.10, 0.25, 0.50, 1.0};
  // When set, replaces `fractions` with one point of exactly this many device blocks (its
  // `fraction` is capacity / unique_blocks, possibly above 1). Default: unset.
  // Range: [1, 1073741824].
  std::optional<int64_t> capacity_blocks;
  // Called with the 0-based point index and the requests replayed so far at that point:
  // every 4096 requests and once when the point is complete (requests_done == trace size).
  // Runs on the caller's thread. Default: none.
  std::function<void(int point, int64_t requests_done)> progress;

  // InvalidArgument naming the first option out of range and its value.
  Status Validate() const;
};

// One capacity of the curve.
struct CacheCurvePoint {
  // The fraction of unique blocks asked for (or capacity / unique blocks for an absolute
  // capacity).
  double fraction = 0;
  int64_t capacity_blocks = 0;
  // Leading request blocks found resident on the device, summed over requests.
  int64_t hits = 0;
  // All request blocks (hash ids), summed over requests, including blocks beyond capacity.
  int64_t total_blocks = 0;
  // Blocks evicted from the device (KvCacheStats::device_evictions).
  int64_t evictions = 0;
  // hits / total_blocks; 0 for a trace without blocks.
  double hit_ratio = 0;
};

// The number of distinct chained block keys of `requests` (hash seed 0): the number of
// distinct (prefix, block) positions, which is the device capacity at which nothing is ever
// evicted.
int64_t CountUniqueBlocks(const std::vector<MooncakeRequest>& requests);

// Replays `requests` at each capacity of `options` and returns one point per capacity, in
// the order of `options.fractions`. Request i (0-based, file order) matches its first
// c = min(n, capacity) chained keys, allocates blocks for c * block_tokens tokens (evicting
// least recently used blocks), commits the blocks it did not find and releases them. A
// request longer than the whole device thus caches only its first `capacity` blocks, though
// all its n blocks count in total_blocks. InvalidArgument for invalid options (nothing is
// replayed); Internal if the cache manager refuses a call, which would be a bug in it or here.
StatusOr<std::vector<CacheCurvePoint>> RunCacheCurve(const std::vector<MooncakeRequest>& requests,
                                                     const CacheCurveOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_CACHE_CURVE_H_
