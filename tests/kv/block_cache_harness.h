// A BlockCache with small deterministic options and domain helpers, for the suites that test
// an agentic layer directly over the core (session_table_test.cc,
// conversation_retention_test.cc, subagent_demotion_test.cc) rather than through
// KvCacheManager. Every mutating helper expects success and checks the core's invariants.
#ifndef AGENTKV_TESTS_KV_BLOCK_CACHE_HARNESS_H_
#define AGENTKV_TESTS_KV_BLOCK_CACHE_HARNESS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/kv/block_cache.h"
#include "agentkv/kv/kv_cache_options.h"

namespace agentkv::kv::testing_internal {

class BlockCacheHarness {
 public:
  static constexpr int32_t kTokensPerBlock = 4;

  // Options with small tiers; the agentic fields keep their defaults for the test to set.
  static KvCacheOptions Options(int64_t device_blocks, int64_t host_blocks = 0) {
    KvCacheOptions o;
    o.tokens_per_block = kTokensPerBlock;
    o.device_blocks = device_blocks;
    o.host_blocks = host_blocks;
    o.hash_seed = 7;
    o.event_log_capacity = 64;
    return o;
  }

  explicit BlockCacheHarness(const KvCacheOptions& options)
      : cache_(std::move(BlockCache::Create(options)).value()) {}

  BlockCache& cache() { return cache_; }

  // The full-block keys of `blocks` blocks whose tokens start at `first`.
  std::vector<BlockKey> Chain(int32_t first, int32_t blocks) const {
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < blocks * kTokensPerBlock; ++i) tokens.push_back(first + i);
    return cache_.hasher().KeysFromTokens(tokens, kTokensPerBlock);
  }

  // Admits `id` for `keys` and commits every block it did not match; it keeps running.
  void Start(int64_t id, const std::vector<BlockKey>& keys) {
    const StatusOr<PrefixMatch> m = cache_.AddRequest(RequestId(id), keys);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(
        cache_.Reserve(RequestId(id), static_cast<int64_t>(keys.size()) * kTokensPerBlock).ok());
    ASSERT_TRUE(cache_
                    .Commit(RequestId(id), std::span<const BlockKey>(keys).subspan(
                                               static_cast<size_t>(m->total_blocks())))
                    .ok());
    CheckInvariants();
  }
  // The committed chain of the running `id`.
  CommittedChain ChainOf(int64_t id) const {
    return std::move(cache_.CommittedChainOf(RequestId(id))).value();
  }
  void Finish(int64_t id) {
    ASSERT_TRUE(cache_.Release(RequestId(id)).ok());
    CheckInvariants();
  }

  void CheckInvariants() const {
    const Status s = cache_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
  }

 private:
  BlockCache cache_;
};

}  // namespace agentkv::kv::testing_internal

#endif  // AGENTKV_TESTS_KV_BLOCK_CACHE_HARNESS_H_
