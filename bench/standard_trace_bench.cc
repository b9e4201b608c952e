// Replays the standard prefix-cache benchmark trace (v1) through KvCacheManager and, as the
// baseline measured in the same run, through a textbook LRU prefix cache (std::unordered_map +
// std::list, the shape of most Python engines' block pools). Before any timing it regenerates
// the trace and checks every published fingerprint; a mismatch aborts the run.
//
// Per request, as the trace spec says: match prompt[:-1], hold the matched blocks, allocate
// blocks for prompt + output - matched (evicting as needed), commit the full blocks of
// prompt + output, release. Key hashing of every full block is inside the timed region.
// Counters: ns_per_token (total time / prompt+output tokens) and hit_ratio (matched prompt
// tokens / prompt tokens).
//
//   build/release/bench/standard_trace_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "bench/standard_trace.h"

namespace agentkv::kv {
namespace {

const bench::StandardTrace& Trace() {
  static const bench::StandardTrace* trace = [] {
    std::string error;
    auto generated = bench::StandardTrace::Generate(bench::StandardTraceParams{}, &error);
    if (!generated.has_value()) {
      std::fprintf(stderr, "standard trace: %s\n", error.c_str());
      std::exit(1);
    }
    const std::string mismatch = bench::VerifyStandardTraceV1(*generated);
    if (!mismatch.empty()) {
      std::fprintf(stderr, "standard trace fingerprints do not reproduce; no timing counts:\n%s\n",
                   mismatch.c_str());
      std::exit(1);
    }
    return new bench::StandardTrace(std::move(*generated));
  }();
  return *trace;
}

std::span<const int32_t> AsTokens(std::span<const uint32_t> s) {
  // int32 and uint32 may alias; token ids are below 2^31.
  return {reinterpret_cast<const int32_t*>(s.data()), s.size()};
}

// Computes the keys of every full block of `r`'s prompt + output into `keys` (hashing is part
// of what is timed) and returns how many of them cover `prompt[:-1]`, the part to match.
size_t SequenceKeys(const bench::StandardRequest& r, const BlockKeyHasher& hasher,
                    std::vector<BlockKey>& keys) {
  constexpr int32_t kBlock = 16;
  // The prompt and output are contiguous in the session buffer.
  const std::span<const int32_t> seq =
      AsTokens({r.prompt.data(), r.prompt.size() + r.output.size()});
  keys.clear();
  hasher.AppendKeysFromTokens(seq, kBlock, 0, keys);
  return (r.prompt.size() - 1) / kBlock;
}

struct ReplayResult {
  int64_t matched_prompt_tokens = 0;
};

[[gnu::noinline]] ReplayResult ReplayAgentkv(const bench::StandardTrace& trace,
                                             int64_t capacity_blocks) {
  constexpr int32_t kBlock = 16;
  KvCacheOptions o;
  o.tokens_per_block = kBlock;
  o.device_blocks = capacity_blocks;
  KvCacheManager cache = std::move(KvCacheManager::Create(o)).value();
  std::vector<BlockKey> keys;
  ReplayResult result;
  for (int64_t i = 0; i < trace.num_requests(); ++i) {
    const bench::StandardRequest r = trace.request(i);
    const size_t lookup = SequenceKeys(r, cache.hasher(), keys);
    const int64_t tokens = static_cast<int64_t>(r.prompt.size() + r.output.size());
    const RequestId id(i);
    const PrefixMatch m = cache.AddRequest(id, std::span(keys).first(lookup)).value();
    if (!cache.Reserve(id, tokens).ok()) std::abort();
    if (!cache.Commit(id, std::span(keys).subspan(static_cast<size_t>(m.total_blocks()))).ok()) {
      std::abort();
    }
    if (!cache.Release(id).ok()) std::abort();
    result.matched_prompt_tokens += m.device_blocks * kBlock;
  }
  return result;
}

// The baseline: one hash map from block key to an LRU list node; a request's blocks are
// taken out of the list while it runs, evictions pop the list front.
[[gnu::noinline]] ReplayResult ReplayNaiveLru(const bench::StandardTrace& trace,
                                              int64_t capacity_blocks) {
  constexpr int32_t kBlock = 16;
  const BlockKeyHasher hasher(0);
  std::list<uint64_t> lru;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  std::vector<BlockKey> keys;
  int64_t used = 0;
  ReplayResult result;
  for (int64_t i = 0; i < trace.num_requests(); ++i) {
    const bench::StandardRequest r = trace.request(i);
    const size_t lookup = SequenceKeys(r, hasher, keys);
    const int64_t tokens = static_cast<int64_t>(r.prompt.size() + r.output.size());
    std::list<uint64_t> mine;
    size_t matched = 0;
    for (; matched < lookup; ++matched) {
      auto it = where.find(keys[matched].value());
      if (it == where.end()) break;
      mine.splice(mine.end(), lru, it->second);
    }
    const int64_t need = (tokens + kBlock - 1) / kBlock - static_cast<int64_t>(matched);
    while (used + need > capacity_blocks) {
      where.erase(lru.front());
      lru.pop_front();
      --used;
    }
    used += need;
    // The partial last block is freed at once; full new blocks are cached.
    used -= (tokens % kBlock != 0) ? 1 : 0;
    for (size_t b = matched; b < keys.size(); ++b) {
      mine.push_back(keys[b].value());
      where[keys[b].value()] = std::prev(mine.end());
    }
    // Release deepest first: the request's blocks become most recent, parents last.
    mine.reverse();
    lru.splice(lru.end(), mine);
    result.matched_prompt_tokens += static_cast<int64_t>(matched) * kBlock;
  }
  return result;
}

template <ReplayResult (*Replay)(const bench::StandardTrace&, int64_t)>
void BM_StandardTrace(benchmark::State& state) {
  const bench::StandardTrace& trace = Trace();
  const double fraction = static_cast<double>(state.range(0)) / 100.0;
  const int64_t capacity_blocks = trace.CapacityTokens(fraction) / trace.params().block_size;
  ReplayResult result;
  for (auto _ : state) {
    result = Replay(trace, capacity_blocks);
    benchmark::DoNotOptimize(result);
  }
  const double tokens = static_cast<double>(trace.total_tokens());
  state.counters["ns_per_token"] = benchmark::Counter(
      tokens * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["hit_ratio"] = static_cast<double>(result.matched_prompt_tokens) /
                                static_cast<double>(trace.prompt_tokens());
  state.counters["capacity_blocks"] = static_cast<double>(capacity_blocks);
}

BENCHMARK(BM_StandardTrace<ReplayAgentkv>)
    ->Name("StandardTrace/agentkv")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_StandardTrace<ReplayNaiveLru>)
    ->Name("StandardTrace/naive_lru")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace agentkv::kv

BENCHMARK_MAIN();
