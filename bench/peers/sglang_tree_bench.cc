// agentkv beside a compiled peer, SGLang's C++ radix tree (`radix_tree_v2::RadixTree`, the tree
// behind `RadixCacheCpp`), on the standard trace (v1) in one process, arms interleaved at random
// (--benchmark_enable_random_interleaving), so that both are timed in the same window, on the
// same machine state and in the same address space.
//
// The peer's source is not part of this repository: bench/peers/sglang-tree.sh builds this
// program from a checkout of SGLang given on its command line (see docs/PERFORMANCE.md,
// "Compiled peer"). This file is only the driver.
//
// agentkv runs bench/standard_trace_replay.cc, the code standard_trace_bench times (16-token
// blocks, hashing included). The tree is driven per request as SGLang's `RadixCacheCpp` and its
// scheduler drive it without a host tier: match prompt[:-1] (the tree truncates keys to its
// page), lock the matched node, take pages for the rest of prompt + output from a free-page
// stack, evicting whole least recently used leaves with `evict(tokens)` when the stack runs
// short, insert prompt + output with `writing_through` (an int64 tensor of KV indices, the
// matched ones followed by the new ones), free the unaligned tail page and any duplicate the
// insert reports, and unlock. The stack is cheaper than SGLang's allocators, so the figure is the
// tree's own. The tree keys on int64 token ids: the trace's tokens are widened once, untimed.
//
// Both arms time the whole replay, construction included (the tree allocates nothing up front;
// agentkv sizes its arena and index). Counters: ns_per_token (wall clock of the replay over
// prompt + output tokens, the figure to report), cpu_ns_per_token beside it, hit_ratio.
// Before any timing both arms replay once at 100 % capacity, where nothing is evicted, and must
// agree on the hit ratio; otherwise the driver is wrong and the program exits.
//
//   bench/peers/sglang-tree.sh SGLANG_CHECKOUT -- --benchmark_repetitions=5
#include <ATen/ops/empty.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_clock.h"
#include "bench/standard_trace_replay.h"
#include "tree_v2.h"

namespace agentkv::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The trace's sessions as int64 token ids, the tree's key type.
const std::vector<std::vector<int64_t>>& WideSessions() {
  static const auto* sessions = [] {
    const StandardTrace& trace = VerifiedStandardTraceV1();
    auto* out = new std::vector<std::vector<int64_t>>();
    for (int s = 0; s < trace.params().sessions; ++s) {
      const std::span<const uint32_t> tokens = trace.session_tokens(s);
      out->emplace_back(tokens.begin(), tokens.end());
    }
    return out;
  }();
  return *sessions;
}

// A stack of free pages of `page` token slots each: page k holds slots [k * page, (k+1) * page).
class FreePages {
 public:
  FreePages(int64_t pages, int64_t page) : page_(page) {
    free_.reserve(static_cast<size_t>(pages));
    for (int64_t k = pages - 1; k >= 0; --k) free_.push_back(k);
  }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t Take() {
    const int64_t k = free_.back();
    free_.pop_back();
    return k;
  }
  // Frees the pages of a run of token slots, page-aligned at its start.
  void FreeSlots(const int64_t* slots, int64_t n) {
    for (int64_t j = 0; j < n; j += page_) free_.push_back(slots[j] / page_);
  }

 private:
  int64_t page_;
  std::vector<int64_t> free_;
};

[[gnu::noinline]] StandardReplayResult ReplaySglangTree(const StandardTrace& trace,
                                                        int64_t capacity_tokens, int64_t page) {
  const std::vector<std::vector<int64_t>>& sessions = WideSessions();
  radix_tree_v2::RadixTree tree(/*disabled=*/false, /*host_size=*/std::nullopt,
                                static_cast<std::size_t>(page), /*threshold=*/1);
  FreePages pool(capacity_tokens / page, page);
  StandardReplayResult result;
  for (int64_t i = 0; i < trace.num_requests(); ++i) {
    const StandardRequest r = trace.request(i);
    const std::vector<int64_t>& tokens = sessions[static_cast<size_t>(r.session)];
    const auto prompt = static_cast<int64_t>(r.prompt.size());
    const int64_t length = prompt + static_cast<int64_t>(r.output.size());

    auto [chunks, host_hit, node, host_node] = tree.match_prefix(
        radix_tree_v2::token_slice(tokens.data(), static_cast<size_t>(prompt - 1)));
    int64_t matched = 0;
    for (const at::Tensor& c : chunks) matched += c.size(0);
    tree.lock_ref(node, true);

    const int64_t need_pages = (length - matched + page - 1) / page;
    if (pool.free_pages() < need_pages) {
      for (const at::Tensor& v :
           tree.evict(static_cast<std::size_t>((need_pages - pool.free_pages()) * page))) {
        pool.FreeSlots(v.data_ptr<int64_t>(), v.size(0));
      }
      if (pool.free_pages() < need_pages) std::abort();
    }
    at::Tensor value = at::empty({length}, at::kLong);
    int64_t* slots = value.data_ptr<int64_t>();
    int64_t at = 0;
    for (const at::Tensor& c : chunks) {
      std::copy_n(c.data_ptr<int64_t>(), c.size(0), slots + at);
      at += c.size(0);
    }
    for (int64_t p = 0; p < need_pages; ++p) {
      const int64_t first = pool.Take() * page;
      for (int64_t t = 0; t < page && at < length; ++t) slots[at++] = first + t;
    }

    auto [ios, prefix_len, new_node] = tree.writing_through(
        radix_tree_v2::token_slice(tokens.data(), static_cast<size_t>(length)), value);
    const auto inserted = static_cast<int64_t>(prefix_len);
    // Pages already in the tree past what was matched are duplicates: free ours.
    if (inserted > matched) pool.FreeSlots(slots + matched, inserted - matched);
    // The unaligned tail's page is not cached.
    const int64_t aligned = length / page * page;
    if (aligned < length) pool.FreeSlots(slots + aligned, 1);
    tree.lock_ref(node, false);
    result.matched_prompt_tokens += matched;
  }
  return result;
}

struct Arm {
  // 0 for agentkv, else the tree's page size.
  int64_t page;
};

StandardReplayResult Replay(const StandardTrace& trace, int percent, Arm arm) {
  if (arm.page == 0) {
    return ReplayStandardTraceAgentkv(trace, StandardCapacityBlocks(trace, percent), nullptr);
  }
  return ReplaySglangTree(trace, trace.CapacityTokens(percent / 100.0), arm.page);
}

// Nothing is evicted at 100 %: every arm must find every cached prefix, so the hit ratios agree
// up to the page size's truncation (a 16-token page loses at most 15 tokens per request).
void VerifyArmsAgree(const StandardTrace& trace) {
  const double agentkv = StandardHitRatio(trace, Replay(trace, 100, Arm{0}));
  for (const int64_t page : {int64_t{1}, int64_t{16}}) {
    const double tree = StandardHitRatio(trace, Replay(trace, 100, Arm{page}));
    if (std::fabs(tree - agentkv) > 0.0015) {
      std::fprintf(stderr,
                   "verification failed: at 100 %% capacity the tree at page %lld finds %.4f of "
                   "prompt tokens and agentkv %.4f; the driver is wrong. No timing counts.\n",
                   static_cast<long long>(page), tree, agentkv);
      std::exit(1);
    }
    std::fprintf(stderr, "verified: at 100 %% the tree at page %lld finds %.4f, agentkv %.4f\n",
                 static_cast<long long>(page), tree, agentkv);
  }
}

void BM_Peer(benchmark::State& state) {
  const StandardTrace& trace = VerifiedStandardTraceV1();
  const Arm arm{state.range(0)};
  const auto percent = static_cast<int>(state.range(1));
  StandardReplayResult result;
  double wall_seconds = 0;
  double cpu_seconds = 0;
  for (auto _ : state) {
    const double cpu_start = ThreadCpuSeconds();
    const auto start = Clock::now();
    result = Replay(trace, percent, arm);
    // The count, not the struct: GCC loses a struct passed to DoNotOptimize here (its "+m,r"
    // operand), and the hit ratio read 0.
    benchmark::DoNotOptimize(result.matched_prompt_tokens);
    const auto stop = Clock::now();
    const double wall = std::chrono::duration<double>(stop - start).count();
    state.SetIterationTime(wall);
    wall_seconds += wall;
    cpu_seconds += ThreadCpuSeconds() - cpu_start;
  }
  const double tokens =
      static_cast<double>(trace.total_tokens()) * static_cast<double>(state.iterations());
  state.counters["ns_per_token"] = wall_seconds * 1e9 / tokens;
  state.counters["cpu_ns_per_token"] = cpu_seconds * 1e9 / tokens;
  state.counters["hit_ratio"] = StandardHitRatio(trace, result);
}

// Arms: agentkv (page 0 here), the tree at page 1 and 16; capacities 50 % and 100 %.
BENCHMARK(BM_Peer)
    ->Name("Peer")
    ->ArgNames({"page", "capacity"})
    ->ArgsProduct({{0, 1, 16}, {50, 100}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseManualTime();

}  // namespace
}  // namespace agentkv::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  agentkv::bench::VerifyArmsAgree(agentkv::bench::VerifiedStandardTraceV1());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
