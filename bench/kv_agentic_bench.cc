// Benchmarks of the agentic policies of KvCacheManager: planning and applying a finished
// sub-agent's demotion (a child conversation with 10K owned blocks), and closing a session
// with 10K unique blocks in release mode. Each runs beside `resident` unrelated cached blocks
// (100K and 1M) to show that the cost follows the blocks touched, not the cache size.
// items_processed counts the child's or session's blocks: the time per block is reported,
// wall-clock (manual timing of the named operation only). `cpu_share` is the thread's CPU time
// over the wall time of the whole benchmark loop, which shows whether the thread kept its core
// (a thread-CPU clock read per operation would cost more than it measures).
//
//   build/release/bench/kv_agentic_bench --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <time.h>

#include <chrono>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
#include "bench/bench_clock.h"

namespace agentkv::kv {
namespace {

using bench::CpuShare;

constexpr int64_t kOwnedBlocks = 10'000;
constexpr int32_t kTokensPerBlock = 16;

using Clock = std::chrono::steady_clock;

std::vector<BlockKey> Chain(const KvCacheManager& cache, uint64_t namespace_id, int64_t blocks) {
  std::vector<uint64_t> ids(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) ids[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  return cache.hasher().KeysFromBlockIds(ids, namespace_id);
}

// Runs one whole request over `keys` with `options`.
void Run(KvCacheManager& cache, RequestId id, const std::vector<BlockKey>& keys,
         RequestOptions options) {
  options.prompt_tokens = static_cast<int64_t>(keys.size()) * kTokensPerBlock;
  const PrefixMatch m = cache.AddRequest(id, keys, options).value();
  cache.Reserve(id, options.prompt_tokens).IgnoreError();
  cache.Commit(id, std::span(keys).subspan(static_cast<size_t>(m.total_blocks()))).IgnoreError();
  cache.Release(id).IgnoreError();
}

// Fills the cache with `resident` unrelated blocks in 64-block chains.
void FillUnrelated(KvCacheManager& cache, int64_t resident, int64_t& next_request) {
  for (int64_t c = 0; c < resident / 64; ++c) {
    Run(cache, RequestId(next_request++), Chain(cache, 1'000'000 + static_cast<uint64_t>(c), 64),
        {});
  }
}

void BM_DemoteFinishedChild(benchmark::State& state) {
  const int64_t resident = state.range(0);
  KvCacheOptions o;
  o.tokens_per_block = kTokensPerBlock;
  o.device_blocks = resident + 2 * kOwnedBlocks;
  o.block_reuse_policy = BlockReusePolicy::kPerConversation;
  o.finished_subagent_priority = 1;
  KvCacheManager cache = std::move(KvCacheManager::Create(o)).value();
  int64_t next_request = 0;
  FillUnrelated(cache, resident, next_request);
  // The child computes 10K blocks of its own in one turn.
  RequestOptions child;
  child.conversation = ConversationId(2);
  child.parent_conversation = ConversationId(1);
  child.parent_hint_authenticated = true;
  Run(cache, RequestId(next_request++), Chain(cache, 7, kOwnedBlocks), child);
  const CpuShare cpu_share;
  for (auto _ : state) {
    const auto start = Clock::now();
    const CommittedRetentionHandle handle = cache.PlanCommittedRetention(ConversationId(2));
    const int64_t demoted = cache.ApplyCommittedRetention(handle, 1);
    const auto stop = Clock::now();
    if (demoted != kOwnedBlocks) state.SkipWithError("not every owned block was demoted");
    cache.ApplyCommittedRetention(handle, kDefaultPriority);  // Untimed restore.
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kOwnedBlocks);
}

void BM_CloseSessionRelease(benchmark::State& state) {
  const int64_t resident = state.range(0);
  KvCacheOptions o;
  o.tokens_per_block = kTokensPerBlock;
  o.device_blocks = resident + 2 * kOwnedBlocks;
  o.session_close_mode = SessionCloseMode::kRelease;
  KvCacheManager cache = std::move(KvCacheManager::Create(o)).value();
  int64_t next_request = 0;
  FillUnrelated(cache, resident, next_request);
  const std::vector<BlockKey> keys = Chain(cache, 9, kOwnedBlocks);
  int64_t session = 1;
  const CpuShare cpu_share;
  for (auto _ : state) {
    RequestOptions options;
    options.session = SessionId(session);
    Run(cache, RequestId(next_request++), keys, options);
    const auto start = Clock::now();
    const int64_t freed = cache.CloseSession(SessionId(session));
    const auto stop = Clock::now();
    if (freed != kOwnedBlocks * kTokensPerBlock) state.SkipWithError("close freed too little");
    ++session;
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  cpu_share.Finish(state);
  state.SetItemsProcessed(state.iterations() * kOwnedBlocks);
}

BENCHMARK(BM_DemoteFinishedChild)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CloseSessionRelease)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace agentkv::kv

BENCHMARK_MAIN();
