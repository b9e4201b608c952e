#include "bench/standard_trace_replay.h"

#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::bench {
namespace {

std::span<const int32_t> AsTokens(std::span<const uint32_t> s) {
  // int32 and uint32 may alias; token ids are below 2^31.
  return {reinterpret_cast<const int32_t*>(s.data()), s.size()};
}

}  // namespace

const StandardTrace& VerifiedStandardTraceV1() {
  static const StandardTrace* trace = [] {
    std::string error;
    auto generated = StandardTrace::Generate(StandardTraceParams{}, &error);
    if (!generated.has_value()) {
      std::fprintf(stderr, "standard trace: %s\n", error.c_str());
      std::exit(1);
    }
    const std::string mismatch = VerifyStandardTraceV1(*generated);
    if (!mismatch.empty()) {
      std::fprintf(stderr, "standard trace fingerprints do not reproduce; no timing counts:\n%s\n",
                   mismatch.c_str());
      std::exit(1);
    }
    return new StandardTrace(std::move(*generated));
  }();
  return *trace;
}

int64_t StandardCapacityBlocks(const StandardTrace& trace, int percent) {
  return trace.CapacityTokens(static_cast<double>(percent) / 100.0) / trace.params().block_size;
}

double StandardHitRatio(const StandardTrace& trace, const StandardReplayResult& result) {
  return static_cast<double>(result.matched_prompt_tokens) /
         static_cast<double>(trace.prompt_tokens());
}

size_t StandardSequenceKeys(const StandardRequest& r, const kv::BlockKeyHasher& hasher,
                            std::vector<kv::BlockKey>& keys) {
  // The prompt and output are contiguous in the session buffer.
  const std::span<const int32_t> seq =
      AsTokens({r.prompt.data(), r.prompt.size() + r.output.size()});
  keys.clear();
  hasher.AppendKeysFromTokens(seq, kStandardBlockTokens, 0, keys);
  return (r.prompt.size() - 1) / kStandardBlockTokens;
}

StandardReplayResult ReplayStandardTraceAgentkv(const StandardTrace& trace, int64_t capacity_blocks,
                                                std::vector<int64_t>* matched_blocks) {
  kv::KvCacheOptions o;
  o.tokens_per_block = kStandardBlockTokens;
  o.device_blocks = capacity_blocks;
  kv::KvCacheManager cache = std::move(kv::KvCacheManager::Create(o)).value();
  std::vector<kv::BlockKey> keys;
  StandardReplayResult result;
  for (int64_t i = 0; i < trace.num_requests(); ++i) {
    const StandardRequest r = trace.request(i);
    const size_t lookup = StandardSequenceKeys(r, cache.hasher(), keys);
    const int64_t tokens = static_cast<int64_t>(r.prompt.size() + r.output.size());
    const RequestId id(i);
    const kv::PrefixMatch m = cache.AddRequest(id, std::span(keys).first(lookup)).value();
    if (!cache.Reserve(id, tokens).ok()) std::abort();
    if (!cache.Commit(id, std::span(keys).subspan(static_cast<size_t>(m.total_blocks()))).ok()) {
      std::abort();
    }
    if (!cache.Release(id).ok()) std::abort();
    result.matched_prompt_tokens += m.device_blocks * kStandardBlockTokens;
    if (matched_blocks != nullptr) matched_blocks->push_back(m.device_blocks);
  }
  return result;
}

}  // namespace agentkv::bench
