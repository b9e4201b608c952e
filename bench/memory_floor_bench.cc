// The cache-miss floor of the block cache's access pattern on this machine, without the cache:
// what a match and an eviction cost when nothing but their memory accesses is done.
//
// Tables shaped like the cache's at 10K, 100K and 1M resident blocks (an index of 64-byte
// chunks, a power of two of at least one per 5 blocks, and an arena of 40-byte blocks, both on
// huge pages as the cache allocates them):
//  - MatchFloor: 64-element chains (a request's prefix); per element, one load of a random
//    index chunk and one dependent load of the block it names, as a match reads a chunk and
//    then the block to compare its key. `serial` waits for each; `prefetched` prefetches chunks
//    64 ahead and blocks 32 ahead, as BlockCache::Match does.
//  - ChaseFloor: a walk of a random cyclic permutation of the arena, each step a dependent
//    load (the next victim of a linked-list LRU), the floor of evicting through a list.
// items/s counts elements (blocks); wall-clock time.
//
//   build/release/bench/memory_floor_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "agentkv/base/huge_page_allocator.h"
#include "agentkv/base/rng.h"

namespace agentkv {
namespace {

struct Block {  // The arena slot's size and alignment, as kv::internal::Block has them.
  uint64_t key = 0;
  int32_t links[8] = {};
};
static_assert(sizeof(Block) == 40);

struct alignas(64) Chunk {  // An index chunk's size; only the block id it names is used.
  uint64_t id = 0;
};
static_assert(sizeof(Chunk) == 64);

constexpr int kChain = 64;

struct Tables {
  std::vector<Chunk, HugePageAllocator<Chunk>> chunks;
  std::vector<Block, HugePageAllocator<Block>> blocks;
  std::vector<uint32_t> queries;  // Chunk indices, kChain per chain.
};

Tables MakeTables(int64_t blocks, int64_t chains) {
  Tables t;
  size_t chunks = 1;
  while (static_cast<int64_t>(chunks) * 5 < blocks) chunks *= 2;
  Rng rng(7);
  t.blocks.resize(static_cast<size_t>(blocks));
  for (size_t i = 0; i < t.blocks.size(); ++i) t.blocks[i].key = i;
  t.chunks.resize(chunks);
  for (Chunk& c : t.chunks) c.id = static_cast<uint64_t>(rng.Uniform(0, blocks - 1));
  t.queries.resize(static_cast<size_t>(chains * kChain));
  for (uint32_t& q : t.queries) q = static_cast<uint32_t>(rng.Uniform(0, int64_t(chunks) - 1));
  return t;
}

void BM_MatchFloor(benchmark::State& state) {
  const bool prefetched = state.range(1) != 0;
  const int64_t chains = 16384;
  const Tables t = MakeTables(state.range(0), chains);
  uint64_t sum = 0;
  int64_t c = 0;
  for (auto _ : state) {
    const uint32_t* q = &t.queries[static_cast<size_t>(c * kChain)];
    if (prefetched) {
      for (int j = 0; j < kChain; ++j) __builtin_prefetch(&t.chunks[q[j]]);
      for (int j = 0; j < 32; ++j) __builtin_prefetch(&t.blocks[t.chunks[q[j]].id]);
    }
    for (int i = 0; i < kChain; ++i) {
      if (prefetched && i + 32 < kChain) __builtin_prefetch(&t.blocks[t.chunks[q[i + 32]].id]);
      sum += t.blocks[t.chunks[q[i]].id].key;
    }
    if (++c == chains) c = 0;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * kChain);
}

void BM_ChaseFloor(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<Block, HugePageAllocator<Block>> blocks(static_cast<size_t>(n));
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(11);
  for (size_t i = order.size() - 1; i > 0; --i) {
    std::swap(order[i], order[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(i)))]);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    blocks[static_cast<size_t>(order[i])].links[0] = order[(i + 1) % order.size()];
  }
  int32_t at = order[0];
  for (auto _ : state) {
    for (int i = 0; i < kChain; ++i) at = blocks[static_cast<size_t>(at)].links[0];
  }
  benchmark::DoNotOptimize(at);
  state.SetItemsProcessed(state.iterations() * kChain);
}

void MatchSizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {9'984, 99'968, 1'000'000}) b->Args({n, 0})->Args({n, 1});
}

BENCHMARK(BM_MatchFloor)->Apply(MatchSizes)->ArgNames({"blocks", "prefetched"})->UseRealTime();
BENCHMARK(BM_ChaseFloor)
    ->Arg(9'984)
    ->Arg(99'968)
    ->Arg(1'000'000)
    ->ArgNames({"blocks"})
    ->UseRealTime();

}  // namespace
}  // namespace agentkv

BENCHMARK_MAIN();
