// Block-key hashing: agentkv's Hash64 (base/hash.h) against XXH3 from libxxhash-dev (issue 35).
//
// Every arm computes the chained keys of a sequence's full blocks exactly as
// kv::BlockKeyHasher::AppendChainedKeys does: the block's token ids as little-endian 4-byte
// values, hashed with block_key.cc's token-domain seed, then chained to the parent key with
// HashCombine. Only the content hash differs between arms:
//  - agentkv_keys: BlockKeyHasher::AppendChainedKeys itself, the production code (the block
//    size is a compile-time constant for 16 and 32 tokens, a run-time value otherwise);
//  - hash64: agentkv::Hash64 with the block size a compile-time constant;
//  - xxh3_inline: XXH3_64bits_withSeed from xxhash.h compiled into this unit (XXH_INLINE_ALL),
//    the same compile-time size, same bytes, same seed;
//  - xxh3_library: the same function called in libxxhash.so, the size known at run time (the
//    SSE2 code on x86-64);
//  - xxh3_dispatch (x86-64 only): libxxhash.so's XXH3_64bits_withSeed_dispatch, which picks
//    AVX2 or AVX-512 at run time where the CPU has them (only inputs over 240 bytes use them).
// Before any timing, main() checks that the hash64 arm's keys equal the production keys and
// that all XXH3 arms agree, at every block size, on random tokens and on the trace.
//
// Inputs, at 1 (SGLang's default page), 16 (vLLM's and the standard trace's), 32 (agentkv's
// default) and 64 tokens per block (the WEKA traces'):
//  - random: 64-block chains cut from 65,536 random token ids (256 KiB, cache resident);
//  - trace: the standard trace (v1), the whole trace per iteration: the full blocks of every
//    request's prompt + output, as standard_trace_bench hashes them (its hashing alone; at 16
//    tokens 4.2M blocks).
// Wall-clock time. items_per_second counts blocks; time_per_block is its inverse (seconds in
// the JSON); bytes_per_second counts the hashed token bytes.
//
//   build/release/bench/block_hash_bench --benchmark_repetitions=9
//       --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "agentkv/base/hash.h"
#include "agentkv/base/rng.h"
#include "agentkv/kv/block_key.h"
#include "bench/standard_trace.h"
#include "bench/standard_trace_replay.h"

// The library's exported XXH3, declared by the plain include and wrapped here, before the
// XXH_INLINE_ALL include below renames XXH3_64bits_withSeed to the unit's inline copy.
#include <xxhash.h>
#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

namespace {

uint64_t Xxh3Library(const void* bytes, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(bytes, size, seed);
}

#if defined(__x86_64__)
constexpr bool kHasDispatch = true;
// The library's entry point that picks the widest vector unit (SSE2, AVX2, AVX-512) at run time.
uint64_t Xxh3Dispatch(const void* bytes, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed_dispatch(bytes, size, seed);
}
#else
constexpr bool kHasDispatch = false;
uint64_t Xxh3Dispatch(const void* bytes, size_t size, uint64_t seed) {
  return Xxh3Library(bytes, size, seed);
}
#endif

unsigned Xxh3LibraryVersion() { return XXH_versionNumber(); }

}  // namespace

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace agentkv::kv {
namespace {

// block_key.cc's kTokenDomain: the seed of every token block's content hash.
constexpr uint64_t kTokenDomain = 0x6b76746f6b0003ULL;

constexpr size_t kChainBlocks = 64;
constexpr size_t kRandomTokens = size_t{1} << 16;
constexpr int64_t kVocab = 32000;

enum class Arm { kAgentkvKeys, kHash64, kXxh3Inline, kXxh3Library, kXxh3Dispatch };

const char* ArmName(Arm arm) {
  switch (arm) {
    case Arm::kAgentkvKeys:
      return "agentkv_keys";
    case Arm::kHash64:
      return "hash64";
    case Arm::kXxh3Inline:
      return "xxh3_inline";
    case Arm::kXxh3Library:
      return "xxh3_library";
    case Arm::kXxh3Dispatch:
      return "xxh3_dispatch";
  }
  return "?";
}

template <Arm kArm, size_t kTokens>
uint64_t ContentHash(const int32_t* block) {
  constexpr size_t kBytes = kTokens * sizeof(int32_t);
  if constexpr (kArm == Arm::kHash64) {
    return Hash64(std::as_bytes(std::span<const int32_t>(block, kTokens)), kTokenDomain);
  } else if constexpr (kArm == Arm::kXxh3Inline) {
    return XXH3_64bits_withSeed(block, kBytes, kTokenDomain);
  } else if constexpr (kArm == Arm::kXxh3Library) {
    return Xxh3Library(block, kBytes, kTokenDomain);
  } else {
    return Xxh3Dispatch(block, kBytes, kTokenDomain);
  }
}

// Appends the keys of the full blocks of `tokens` after `parent`, as AppendChainedKeys does.
template <Arm kArm, size_t kTokens>
void ChainKeys(std::span<const int32_t> tokens, BlockKey parent, std::vector<BlockKey>& out) {
  if constexpr (kArm == Arm::kAgentkvKeys) {
    BlockKeyHasher::AppendChainedKeys(tokens, static_cast<int32_t>(kTokens), parent, out);
  } else {
    const size_t full = tokens.size() / kTokens;
    const size_t first = out.size();
    out.resize(first + full);
    uint64_t key = parent.value();
    for (size_t i = 0; i < full; ++i) {
      const uint64_t content = ContentHash<kArm, kTokens>(tokens.data() + i * kTokens);
      key = HashCombine(key, content) ^ content;
      out[first + i] = BlockKey(key);
    }
  }
}

const std::vector<int32_t>& RandomTokens() {
  static const std::vector<int32_t>* tokens = [] {
    auto* t = new std::vector<int32_t>(kRandomTokens);
    Rng rng(35);
    for (int32_t& token : *t) token = static_cast<int32_t>(rng.Uniform(0, kVocab - 1));
    return t;
  }();
  return *tokens;
}

std::span<const int32_t> Sequence(const bench::StandardRequest& r) {
  // The prompt and output are contiguous in the session buffer; token ids are below 2^31.
  return {reinterpret_cast<const int32_t*>(r.prompt.data()), r.prompt.size() + r.output.size()};
}

BlockKey Root() { return BlockKeyHasher(0).RootKey(0); }

void SetCounters(benchmark::State& state, int64_t blocks, size_t tokens_per_block) {
  state.SetItemsProcessed(blocks);
  state.SetBytesProcessed(blocks * static_cast<int64_t>(tokens_per_block * sizeof(int32_t)));
  // Blocks per second inverted: seconds per block (the console prints it with an SI prefix).
  state.counters["time_per_block"] = benchmark::Counter(
      static_cast<double>(blocks), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <Arm kArm, size_t kTokens>
void BM_RandomBlocks(benchmark::State& state) {
  const std::vector<int32_t>& tokens = RandomTokens();
  constexpr size_t kChainTokens = kChainBlocks * kTokens;
  const BlockKey root = Root();
  std::vector<BlockKey> keys;
  keys.reserve(kChainBlocks);
  size_t offset = 0;
  for (auto _ : state) {
    keys.clear();
    ChainKeys<kArm, kTokens>(std::span(tokens).subspan(offset, kChainTokens), root, keys);
    benchmark::DoNotOptimize(keys.data());
    benchmark::ClobberMemory();
    offset += kChainTokens;
    if (offset + kChainTokens > tokens.size()) offset = 0;
  }
  SetCounters(state, state.iterations() * static_cast<int64_t>(kChainBlocks), kTokens);
}

// One iteration hashes the whole trace: the full blocks of every request's prompt + output.
template <Arm kArm, size_t kTokens>
void BM_TraceBlocks(benchmark::State& state) {
  const bench::StandardTrace& trace = bench::VerifiedStandardTraceV1();
  const BlockKey root = Root();
  std::vector<BlockKey> keys;
  keys.reserve(static_cast<size_t>(trace.longest_sequence()));
  int64_t blocks = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < trace.num_requests(); ++i) {
      keys.clear();
      ChainKeys<kArm, kTokens>(Sequence(trace.request(i)), root, keys);
      benchmark::DoNotOptimize(keys.data());
      benchmark::ClobberMemory();
      blocks += static_cast<int64_t>(keys.size());
    }
  }
  SetCounters(state, blocks, kTokens);
}

template <Arm kArm, size_t kTokens>
std::vector<BlockKey> Keys(std::span<const int32_t> tokens) {
  std::vector<BlockKey> keys;
  ChainKeys<kArm, kTokens>(tokens, Root(), keys);
  return keys;
}

// Exits unless the hash64 arm reproduces the production keys and both XXH3 arms agree on
// `tokens`: a benchmark of other keys than block keys would not count.
template <size_t kTokens>
void CheckArms(std::span<const int32_t> tokens, const char* input) {
  const std::vector<BlockKey> production = Keys<Arm::kAgentkvKeys, kTokens>(tokens);
  const std::vector<BlockKey> xxh3 = Keys<Arm::kXxh3Library, kTokens>(tokens);
  const bool ok = production.size() == tokens.size() / kTokens &&
                  Keys<Arm::kHash64, kTokens>(tokens) == production &&
                  Keys<Arm::kXxh3Inline, kTokens>(tokens) == xxh3 &&
                  Keys<Arm::kXxh3Dispatch, kTokens>(tokens) == xxh3 && xxh3 != production;
  if (!ok) {
    std::fprintf(stderr, "block_hash_bench: arms disagree at %zu tokens per block on %s\n", kTokens,
                 input);
    std::exit(1);
  }
}

// Aggregates beside Google Benchmark's mean, median and stddev, so that an aggregates-only
// report still gives each median's spread.
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double Max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

template <Arm kArm, size_t kTokens>
void Register(bool trace) {
  const std::string name = std::string("BlockHash/") + (trace ? "trace/" : "random/") +
                           std::to_string(kTokens) + "/" + ArmName(kArm);
  benchmark::RegisterBenchmark(
      name.c_str(), trace ? BM_TraceBlocks<kArm, kTokens> : BM_RandomBlocks<kArm, kTokens>)
      ->UseRealTime()
      ->ComputeStatistics("min", Min)
      ->ComputeStatistics("max", Max);
}

template <size_t kTokens>
void CheckAndRegister() {
  CheckArms<kTokens>(RandomTokens(), "random tokens");
  const bench::StandardTrace& trace = bench::VerifiedStandardTraceV1();
  for (int64_t i = 0; i < trace.num_requests(); i += 97) {
    CheckArms<kTokens>(Sequence(trace.request(i)), "the standard trace");
  }
  for (const bool on_trace : {false, true}) {
    Register<Arm::kAgentkvKeys, kTokens>(on_trace);
    Register<Arm::kHash64, kTokens>(on_trace);
    Register<Arm::kXxh3Inline, kTokens>(on_trace);
    Register<Arm::kXxh3Library, kTokens>(on_trace);
    if (kHasDispatch) Register<Arm::kXxh3Dispatch, kTokens>(on_trace);
  }
}

}  // namespace
}  // namespace agentkv::kv

int main(int argc, char** argv) {
  using namespace agentkv::kv;
  CheckAndRegister<1>();
  CheckAndRegister<16>();
  CheckAndRegister<32>();
  CheckAndRegister<64>();
  benchmark::AddCustomContext("xxhash_header_version", std::to_string(XXH_versionNumber()));
  benchmark::AddCustomContext("xxhash_library_version", std::to_string(Xxh3LibraryVersion()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
