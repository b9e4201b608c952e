// Micro-benchmarks of KvCacheManager's block operations at 10K, 100K and 1M resident blocks.
//
// Each benchmark works on chains of 64 blocks (one request each) keyed by precomputed block
// ids, so key hashing is excluded; items_processed counts blocks, so Google Benchmark reports
// the time per block. Only the operation named is timed (manual timing around it); the rest of
// the request lifecycle runs untimed between measurements.
//
//   build/release/bench/kv_cache_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::kv {
namespace {

constexpr int64_t kChainBlocks = 64;
constexpr int32_t kTokensPerBlock = 16;

std::vector<BlockKey> ChainKeys(const KvCacheManager& cache, int64_t chain) {
  std::vector<uint64_t> ids(kChainBlocks);
  for (int64_t j = 0; j < kChainBlocks; ++j)
    ids[static_cast<size_t>(j)] = uint64_t(chain * kChainBlocks + j);
  return cache.hasher().KeysFromBlockIds(ids);
}

KvCacheManager MakeCache(int64_t device_blocks, int64_t host_blocks) {
  KvCacheOptions o;
  o.tokens_per_block = kTokensPerBlock;
  o.device_blocks = device_blocks;
  o.host_blocks = host_blocks;
  return std::move(KvCacheManager::Create(o)).value();
}

// Runs one whole request that computes `keys` (nothing matched is recomputed).
void RunRequest(KvCacheManager& cache, RequestId id, const std::vector<BlockKey>& keys) {
  const PrefixMatch m = cache.AddRequest(id, keys).value();
  const int64_t tokens = static_cast<int64_t>(keys.size()) * kTokensPerBlock;
  cache.Reserve(id, tokens).IgnoreError();
  cache.Commit(id, std::span(keys).subspan(static_cast<size_t>(m.total_blocks()))).IgnoreError();
  cache.Release(id).IgnoreError();
}

// Fills the cache with `chains` chains (ids 0..chains-1) in order.
void Fill(KvCacheManager& cache, int64_t chains, int64_t& next_request) {
  for (int64_t c = 0; c < chains; ++c)
    RunRequest(cache, RequestId(next_request++), ChainKeys(cache, c));
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Match of a fully resident 64-block chain (a hit), cycling over every resident chain.
void BM_MatchHit(benchmark::State& state) {
  const int64_t resident = state.range(0);
  KvCacheManager cache = MakeCache(resident, 0);
  int64_t next_request = 0;
  const int64_t chains = resident / kChainBlocks;
  Fill(cache, chains, next_request);
  std::vector<std::vector<BlockKey>> keys;
  for (int64_t c = 0; c < chains; ++c) keys.push_back(ChainKeys(cache, c));
  size_t c = 0;
  for (auto _ : state) {
    const PrefixMatch m = cache.Match(keys[c]);
    benchmark::DoNotOptimize(m);
    if (++c == keys.size()) c = 0;
  }
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
  state.counters["metadata_bytes_per_block"] =
      static_cast<double>(cache.MetadataBytes()) / static_cast<double>(resident);
}

// The phase of a request that NewChains times.
enum class Timed { kReserve, kCommit };

// Runs one new 64-block chain per iteration through a full cache and times only `timed`.
void NewChains(benchmark::State& state, Timed timed) {
  const int64_t resident = state.range(0);
  KvCacheManager cache = MakeCache(resident, 0);
  int64_t next_request = 0;
  Fill(cache, resident / kChainBlocks, next_request);
  int64_t chain = resident / kChainBlocks;
  for (auto _ : state) {
    const std::vector<BlockKey> keys = ChainKeys(cache, chain++);
    const RequestId id(next_request++);
    cache.AddRequest(id, keys).status().IgnoreError();
    auto start = Clock::now();
    cache.Reserve(id, kChainBlocks * kTokensPerBlock).IgnoreError();
    auto stop = Clock::now();
    if (timed == Timed::kCommit) start = Clock::now();
    cache.Commit(id, keys).IgnoreError();
    if (timed == Timed::kCommit) stop = Clock::now();
    cache.Release(id).IgnoreError();
    state.SetIterationTime(Seconds(start, stop));
  }
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

// Commit (insert into the prefix index) of a new 64-block chain in a full cache; the
// allocation that makes room for it is not timed.
void BM_CommitInsert(benchmark::State& state) { NewChains(state, Timed::kCommit); }

// Allocation of 64 blocks in a full cache: every block evicts the least recently used one.
void BM_AllocateWithEviction(benchmark::State& state) { NewChains(state, Timed::kReserve); }

// A host hit: 64 blocks onboarded from the host, each making room by offloading the least
// recently used device block to the host. Device and host each hold `resident` blocks and the
// requests cycle over all chains, so the requested chain is always the coldest, on the host.
void BM_OffloadOnboard(benchmark::State& state) {
  const int64_t resident = state.range(0);
  KvCacheManager cache = MakeCache(resident, resident);
  int64_t next_request = 0;
  const int64_t chains = 2 * resident / kChainBlocks;
  Fill(cache, chains, next_request);
  std::vector<std::vector<BlockKey>> keys;
  for (int64_t c = 0; c < chains; ++c) keys.push_back(ChainKeys(cache, c));
  size_t c = 0;
  for (auto _ : state) {
    const RequestId id(next_request++);
    const auto start = Clock::now();
    const PrefixMatch m = cache.AddRequest(id, keys[c]).value();
    const auto stop = Clock::now();
    if (m.host_blocks != kChainBlocks) state.SkipWithError("the chain was not on the host");
    cache.Release(id).IgnoreError();
    state.SetIterationTime(Seconds(start, stop));
    if (++c == keys.size()) c = 0;
  }
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(10'000 / kChainBlocks * kChainBlocks)
      ->Arg(100'000 / kChainBlocks * kChainBlocks)
      ->Arg(1'000'000 / kChainBlocks * kChainBlocks);
}

BENCHMARK(BM_MatchHit)->Apply(Sizes);
BENCHMARK(BM_CommitInsert)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_AllocateWithEviction)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_OffloadOnboard)->Apply(Sizes)->UseManualTime();

}  // namespace
}  // namespace agentkv::kv

BENCHMARK_MAIN();
