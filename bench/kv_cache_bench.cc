// Micro-benchmarks of KvCacheManager's block operations at 10K, 100K and 1M resident blocks.
//
// Each benchmark works on chains of 64 blocks (one request each). Every operation that takes
// keys comes in two variants:
// - id-keyed (`BM_MatchHit`, `BM_CommitInsert`, `BM_OffloadOnboard`): keys are derived from
//   precomputed block ids outside the timed region, so key hashing is excluded;
// - hashed (`...Hashed`): keys are computed from the chain's 1,024 token ids (64 blocks of 16)
//   with BlockKeyHasher::AppendKeysFromTokens inside the timed region, as an engine that
//   receives token ids must, so the figure is the per-block cost with hashing.
// The token ids are generated untimed before each measurement. `BM_AllocateWithEviction`
// takes no keys and has no hashed variant; `BM_NewRequestHashed` times a whole missing
// request (hash, add, allocate with eviction, commit, release), and `BM_HashBlocks` the
// hashing alone, so the hashing's share can be read off.
//
// items_processed counts blocks, so Google Benchmark's items_per_second is blocks per second
// of wall-clock time: `BM_MatchHit` is timed automatically with UseRealTime(), the rest with
// manual timing (a steady clock around the named operation only; the rest of the request
// lifecycle runs untimed between measurements). A thread-CPU clock read costs about as much
// as a 64-block operation, so no per-operation CPU time is measured; the `cpu_share` counter
// is the thread's CPU time over the wall time of the whole benchmark loop (timed and untimed
// parts together), which shows whether the thread kept its core.
//
//   build/release/bench/kv_cache_bench --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <time.h>

#include <chrono>
#include <span>
#include <vector>

#include "agentkv/base/hash.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "bench/bench_clock.h"

namespace agentkv::kv {
namespace {

using bench::CpuShare;

constexpr int64_t kChainBlocks = 64;
constexpr int32_t kTokensPerBlock = 16;
constexpr int64_t kChainTokens = kChainBlocks * kTokensPerBlock;
constexpr uint32_t kVocab = 32'000;

// How a benchmark keys its chains.
enum class Keying { kBlockIds, kTokens };

// The token ids of chain `chain`: a pure function of the chain, distinct between chains (with
// overwhelming probability), so that every chain's first block has its own key.
void ChainTokens(int64_t chain, std::vector<int32_t>& tokens) {
  tokens.resize(static_cast<size_t>(kChainTokens));
  for (int64_t j = 0; j < kChainTokens; ++j) {
    tokens[static_cast<size_t>(j)] =
        static_cast<int32_t>(Mix64(static_cast<uint64_t>(chain * kChainTokens + j)) % kVocab);
  }
}

// Hashes `tokens` into `keys` (cleared first): the work the hashed variants time.
void HashTokens(const KvCacheManager& cache, std::span<const int32_t> tokens,
                std::vector<BlockKey>& keys) {
  keys.clear();
  cache.hasher().AppendKeysFromTokens(tokens, kTokensPerBlock, 0, keys);
}

std::vector<BlockKey> ChainKeys(const KvCacheManager& cache, int64_t chain, Keying keying) {
  if (keying == Keying::kTokens) {
    std::vector<int32_t> tokens;
    ChainTokens(chain, tokens);
    std::vector<BlockKey> keys;
    HashTokens(cache, tokens, keys);
    return keys;
  }
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

// Fills the cache with `chains` chains (0..chains-1) in order, keyed as `keying` says.
void Fill(KvCacheManager& cache, int64_t chains, Keying keying, int64_t& next_request) {
  for (int64_t c = 0; c < chains; ++c)
    RunRequest(cache, RequestId(next_request++), ChainKeys(cache, c, keying));
}

// A device tier of `resident` blocks filled with its resident / 64 chains (ids 0, 1, ...).
KvCacheManager FullCache(int64_t resident, Keying keying, int64_t& next_request) {
  KvCacheManager cache = MakeCache(resident, 0);
  Fill(cache, resident / kChainBlocks, keying, next_request);
  return cache;
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Match of a fully resident 64-block chain (a hit) keyed by block ids, cycling over every
// resident chain. Timed automatically (no clock reads inside the loop), on the wall clock.
void BM_MatchHit(benchmark::State& state) {
  const int64_t resident = state.range(0);
  int64_t next_request = 0;
  KvCacheManager cache = FullCache(resident, Keying::kBlockIds, next_request);
  const int64_t chains = resident / kChainBlocks;
  std::vector<std::vector<BlockKey>> keys;
  for (int64_t c = 0; c < chains; ++c) keys.push_back(ChainKeys(cache, c, Keying::kBlockIds));
  size_t c = 0;
  const CpuShare cpu_share;
  for (auto _ : state) {
    const PrefixMatch m = cache.Match(keys[c]);
    benchmark::DoNotOptimize(m);
    if (++c == keys.size()) c = 0;
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
  state.counters["metadata_bytes_per_block"] =
      static_cast<double>(cache.MetadataBytes()) / static_cast<double>(resident);
}

// The same match, with the chain's keys hashed from its token ids inside the timed region.
void BM_MatchHitHashed(benchmark::State& state) {
  const int64_t resident = state.range(0);
  int64_t next_request = 0;
  KvCacheManager cache = FullCache(resident, Keying::kTokens, next_request);
  const int64_t chains = resident / kChainBlocks;
  std::vector<int32_t> tokens;
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  int64_t c = 0;
  const CpuShare cpu_share;
  for (auto _ : state) {
    ChainTokens(c, tokens);
    const auto start = Clock::now();
    HashTokens(cache, tokens, keys);
    const PrefixMatch m = cache.Match(keys);
    benchmark::DoNotOptimize(m);
    const auto stop = Clock::now();
    if (m.device_blocks != kChainBlocks) state.SkipWithError("the chain was not resident");
    state.SetIterationTime(Seconds(start, stop));
    if (++c == chains) c = 0;
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

// The phase of a request that NewChains times.
enum class Timed { kReserve, kCommit };

// Runs one new 64-block chain per iteration through a full cache and times only `timed`;
// with Keying::kTokens the hashing of the chain's keys is timed too.
void NewChains(benchmark::State& state, Timed timed, Keying keying) {
  const int64_t resident = state.range(0);
  int64_t next_request = 0;
  KvCacheManager cache = FullCache(resident, keying, next_request);
  int64_t chain = resident / kChainBlocks;
  std::vector<int32_t> tokens;
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  const CpuShare cpu_share;
  for (auto _ : state) {
    double seconds = 0;
    if (keying == Keying::kTokens) {
      ChainTokens(chain++, tokens);
      const auto start = Clock::now();
      HashTokens(cache, tokens, keys);
      seconds += Seconds(start, Clock::now());
    } else {
      keys = ChainKeys(cache, chain++, keying);
    }
    const RequestId id(next_request++);
    cache.AddRequest(id, keys).status().IgnoreError();
    auto start = Clock::now();
    cache.Reserve(id, kChainBlocks * kTokensPerBlock).IgnoreError();
    auto stop = Clock::now();
    if (timed == Timed::kCommit) start = Clock::now();
    cache.Commit(id, keys).IgnoreError();
    if (timed == Timed::kCommit) stop = Clock::now();
    cache.Release(id).IgnoreError();
    seconds += Seconds(start, stop);
    state.SetIterationTime(seconds);
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

// Commit (insert into the prefix index) of a new 64-block chain in a full cache; the
// allocation that makes room for it is not timed.
void BM_CommitInsert(benchmark::State& state) {
  NewChains(state, Timed::kCommit, Keying::kBlockIds);
}
// The same commit, plus the hashing of the chain's keys from its token ids.
void BM_CommitInsertHashed(benchmark::State& state) {
  NewChains(state, Timed::kCommit, Keying::kTokens);
}

// Allocation of 64 blocks in a full cache: every block evicts the least recently used one.
void BM_AllocateWithEviction(benchmark::State& state) {
  NewChains(state, Timed::kReserve, Keying::kBlockIds);
}

// A whole request that misses, with hashing, in a full cache: hash the chain's tokens, add
// the request (a miss), allocate 64 blocks (each evicting one), commit them, release.
void BM_NewRequestHashed(benchmark::State& state) {
  const int64_t resident = state.range(0);
  int64_t next_request = 0;
  KvCacheManager cache = FullCache(resident, Keying::kTokens, next_request);
  int64_t chain = resident / kChainBlocks;
  std::vector<int32_t> tokens;
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  const CpuShare cpu_share;
  for (auto _ : state) {
    ChainTokens(chain++, tokens);
    const RequestId id(next_request++);
    const auto start = Clock::now();
    HashTokens(cache, tokens, keys);
    const PrefixMatch m = cache.AddRequest(id, keys).value();
    cache.Reserve(id, kChainTokens).IgnoreError();
    cache.Commit(id, std::span(keys).subspan(static_cast<size_t>(m.total_blocks()))).IgnoreError();
    cache.Release(id).IgnoreError();
    const auto stop = Clock::now();
    if (m.total_blocks() != 0) state.SkipWithError("a new chain was found cached");
    state.SetIterationTime(Seconds(start, stop));
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

// Hashing alone: the keys of one 64-block chain from its 1,024 token ids. The cache only
// provides the hasher; its size does not matter, so this runs at one size.
void BM_HashBlocks(benchmark::State& state) {
  const KvCacheManager cache = MakeCache(kChainBlocks, 0);
  std::vector<int32_t> tokens;
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  int64_t chain = 0;
  const CpuShare cpu_share;
  for (auto _ : state) {
    ChainTokens(chain++, tokens);
    const auto start = Clock::now();
    HashTokens(cache, tokens, keys);
    benchmark::DoNotOptimize(keys.data());
    const auto stop = Clock::now();
    state.SetIterationTime(Seconds(start, stop));
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

// A host hit: 64 blocks onboarded from the host, each making room by offloading the least
// recently used device block to the host. Device and host each hold `resident` blocks and the
// requests cycle over all chains, so the requested chain is always the coldest, on the host.
// With Keying::kTokens the hashing of the chain's keys is timed too.
void OffloadOnboard(benchmark::State& state, Keying keying) {
  const int64_t resident = state.range(0);
  KvCacheManager cache = MakeCache(resident, resident);
  int64_t next_request = 0;
  const int64_t chains = 2 * resident / kChainBlocks;
  Fill(cache, chains, keying, next_request);
  std::vector<std::vector<BlockKey>> id_keys;
  if (keying == Keying::kBlockIds) {
    for (int64_t c = 0; c < chains; ++c) id_keys.push_back(ChainKeys(cache, c, keying));
  }
  std::vector<int32_t> tokens;
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  int64_t c = 0;
  const CpuShare cpu_share;
  for (auto _ : state) {
    const RequestId id(next_request++);
    if (keying == Keying::kTokens) ChainTokens(c, tokens);
    const auto start = Clock::now();
    if (keying == Keying::kTokens) HashTokens(cache, tokens, keys);
    const PrefixMatch m =
        cache.AddRequest(id, keying == Keying::kTokens ? keys : id_keys[static_cast<size_t>(c)])
            .value();
    const auto stop = Clock::now();
    if (m.host_blocks != kChainBlocks) state.SkipWithError("the chain was not on the host");
    cache.Release(id).IgnoreError();
    state.SetIterationTime(Seconds(start, stop));
    if (++c == chains) c = 0;
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kChainBlocks);
}

void BM_OffloadOnboard(benchmark::State& state) { OffloadOnboard(state, Keying::kBlockIds); }
void BM_OffloadOnboardHashed(benchmark::State& state) { OffloadOnboard(state, Keying::kTokens); }

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(10'000 / kChainBlocks * kChainBlocks)
      ->Arg(100'000 / kChainBlocks * kChainBlocks)
      ->Arg(1'000'000 / kChainBlocks * kChainBlocks);
}

BENCHMARK(BM_MatchHit)->Apply(Sizes)->UseRealTime();
BENCHMARK(BM_MatchHitHashed)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_CommitInsert)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_CommitInsertHashed)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_AllocateWithEviction)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_NewRequestHashed)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_OffloadOnboard)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_OffloadOnboardHashed)->Apply(Sizes)->UseManualTime();
BENCHMARK(BM_HashBlocks)->UseManualTime();

}  // namespace
}  // namespace agentkv::kv

BENCHMARK_MAIN();
