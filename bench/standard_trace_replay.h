// The standard trace (v1) replayed through agentkv's KvCacheManager, as the trace spec says:
// per request, match prompt[:-1], hold the matched blocks, allocate blocks for prompt + output -
// matched (evicting as needed), commit the full blocks of prompt + output, release. Key hashing of
// every full block is part of the replay. Shared by standard_trace_bench and the compiled-peer
// benchmark (bench/peers/), so that both time the same code.
#ifndef AGENTKV_BENCH_STANDARD_TRACE_REPLAY_H_
#define AGENTKV_BENCH_STANDARD_TRACE_REPLAY_H_

#include <cstdint>
#include <vector>

#include "agentkv/kv/block_key.h"
#include "bench/standard_trace.h"

namespace agentkv::bench {

// Tokens per KV block of every standard-trace replay.
inline constexpr int32_t kStandardBlockTokens = 16;

struct StandardReplayResult {
  // Prompt tokens found cached, summed over requests.
  int64_t matched_prompt_tokens = 0;
};

// The v1 trace, generated once per process and checked against every published fingerprint;
// exits with a message when it does not reproduce (no timing of another trace counts).
const StandardTrace& VerifiedStandardTraceV1();

// The cache size the benchmarks run at: `percent` of the trace's working set, in blocks.
int64_t StandardCapacityBlocks(const StandardTrace& trace, int percent);

// Matched prompt tokens over all prompt tokens.
double StandardHitRatio(const StandardTrace& trace, const StandardReplayResult& result);

// Computes the keys of every full block of `r`'s prompt + output into `keys` with `hasher` and
// returns how many of them cover `prompt[:-1]`, the part a request matches.
size_t StandardSequenceKeys(const StandardRequest& r, const kv::BlockKeyHasher& hasher,
                            std::vector<kv::BlockKey>& keys);

// Replays `trace` through a fresh KvCacheManager of `capacity_blocks` device blocks. When
// `matched_blocks` is not null, appends every request's matched block count in issue order (the
// verification pass; null when timed). Aborts if the cache refuses a step, which the trace never
// provokes at the benchmarks' capacities.
StandardReplayResult ReplayStandardTraceAgentkv(const StandardTrace& trace, int64_t capacity_blocks,
                                                std::vector<int64_t>* matched_blocks);

}  // namespace agentkv::bench

#endif  // AGENTKV_BENCH_STANDARD_TRACE_REPLAY_H_
