// Tests of the KV pool sizing rule: one table of cases (device tier from --max-total-tokens or
// the cost model's capacity, the infinite-cache floor, the host tier from a ratio or a token
// count, rounding and the caps), option validation, and the working-set fraction rule.
#include "agentkv/engine/kv_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;

struct SizingCase {
  std::string name;
  KvPoolOptions options;
  int64_t kv_capacity_tokens;
  int64_t expect_device_blocks;
  int64_t expect_host_blocks;
};

KvPoolOptions Pool(int32_t tokens_per_block, int64_t max_total_tokens, double hicache_ratio = 0,
                   int64_t hicache_tokens = 0, int64_t min_device_blocks = 0) {
  return KvPoolOptions{.tokens_per_block = tokens_per_block,
                       .max_total_tokens = max_total_tokens,
                       .min_device_blocks = min_device_blocks,
                       .hicache_ratio = hicache_ratio,
                       .hicache_tokens = hicache_tokens};
}

TEST(KvPoolTest, SizesBothTiersByTheRule) {
  constexpr int64_t kCapacity = 450'911;  // llama-3.1-8b on one h100 (cost_model_test.cc).
  const std::vector<SizingCase> cases = {
      {"cost model capacity, whole blocks", Pool(16, 0), kCapacity, kCapacity / 16, 0},
      {"cost model capacity, one-token blocks", Pool(1, 0), kCapacity, kCapacity, 0},
      {"cost model capacity, 512-token blocks", Pool(512, 0), kCapacity, 880, 0},
      {"max_total_tokens wins over the cost model", Pool(16, 262'144), kCapacity, 16'384, 0},
      {"max_total_tokens rounds down", Pool(16, 262'150), kCapacity, 16'384, 0},
      {"max_total_tokens of exactly one block", Pool(16, 16), kCapacity, 1, 0},
      {"max_total_tokens above the cost model", Pool(16, int64_t{1} << 30), 100, 1 << 26, 0},
      {"min_device_blocks enlarges", Pool(16, 160, 0, 0, 1000), kCapacity, 1000, 0},
      {"min_device_blocks below the pool does nothing", Pool(16, 160, 0, 0, 3), kCapacity, 10, 0},
      {"hicache ratio 2", Pool(16, 1600, 2.0), kCapacity, 100, 200},
      {"hicache ratio floors", Pool(16, 1600, 0.333), kCapacity, 100, 33},
      {"hicache ratio below one block", Pool(16, 1600, 0.001), kCapacity, 100, 0},
      {"hicache ratio of the enlarged device tier", Pool(16, 160, 1.5, 0, 1000), kCapacity, 1000,
       1500},
      {"hicache ratio capped at 2^30", Pool(1, int64_t{1} << 40, 100.0), kCapacity,
       int64_t{1} << 40, kMaxKvPoolBlocks},
      {"hicache tokens round down", Pool(16, 1600, 0, 1000), kCapacity, 100, 62},
      {"hicache tokens override the ratio", Pool(16, 1600, 2.0, 320), kCapacity, 100, 20},
      {"hicache tokens under one block", Pool(16, 1600, 0, 15), kCapacity, 100, 0},
  };
  for (const SizingCase& c : cases) {
    SCOPED_TRACE(c.name);
    StatusOr<KvPool> pool = SizeKvPool(c.options, c.kv_capacity_tokens);
    ASSERT_TRUE(pool.ok()) << pool.status();
    EXPECT_EQ(pool->tokens_per_block, c.options.tokens_per_block);
    EXPECT_EQ(pool->device_blocks, c.expect_device_blocks);
    EXPECT_EQ(pool->host_blocks, c.expect_host_blocks);
    EXPECT_EQ(pool->device_tokens(), c.expect_device_blocks * c.options.tokens_per_block);
    EXPECT_EQ(pool->host_tokens(), c.expect_host_blocks * c.options.tokens_per_block);
  }
}

TEST(KvPoolTest, ADeviceTierUnderOneBlockIsInvalid) {
  StatusOr<KvPool> small = SizeKvPool(Pool(16, 10), 450'911);
  ASSERT_EQ(small.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(small.status().message(), "max_total_tokens 10 is less than one block of 16 tokens");

  StatusOr<KvPool> starved = SizeKvPool(Pool(512, 0), 511);
  ASSERT_EQ(starved.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(starved.status().message(),
              HasSubstr("the cost model leaves 511 KV tokens, less than one block of 512"));

  // The infinite-cache floor does not hide a pool that is too small.
  EXPECT_FALSE(SizeKvPool(Pool(16, 10, 0, 0, 100), 450'911).ok());
}

TEST(KvPoolTest, ValidatesEveryOptionNamingIt) {
  struct BadCase {
    KvPoolOptions options;
    std::string field;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<BadCase> cases = {
      {Pool(0, 0), "kv_pool.tokens_per_block"},
      {Pool((1 << 20) + 1, 0), "kv_pool.tokens_per_block"},
      {Pool(16, -1), "kv_pool.max_total_tokens"},
      {Pool(16, (int64_t{1} << 40) + 1), "kv_pool.max_total_tokens"},
      {Pool(16, 0, 0, 0, -1), "kv_pool.min_device_blocks"},
      {Pool(16, 0, 0, 0, kMaxKvPoolBlocks + 1), "kv_pool.min_device_blocks"},
      {Pool(16, 0, -0.5), "kv_pool.hicache_ratio"},
      {Pool(16, 0, 100.5), "kv_pool.hicache_ratio"},
      {Pool(16, 0, nan), "kv_pool.hicache_ratio"},
      {Pool(16, 0, 0, -1), "kv_pool.hicache_tokens"},
      {Pool(16, 0, 0, (int64_t{1} << 40) + 1), "kv_pool.hicache_tokens"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.field);
    const Status status = c.options.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.field + " must be in"));
    EXPECT_EQ(SizeKvPool(c.options, 450'911).status(), status);
  }
  // The bounds themselves are valid.
  EXPECT_TRUE(
      Pool(1 << 20, int64_t{1} << 40, 100.0, int64_t{1} << 40, kMaxKvPoolBlocks).Validate().ok());
  EXPECT_TRUE(KvPoolOptions{}.Validate().ok());
}

TEST(KvPoolTest, DefaultsAreAsDocumented) {
  const KvPoolOptions o;
  EXPECT_EQ(o.tokens_per_block, 16);
  EXPECT_EQ(o.max_total_tokens, 0);
  EXPECT_EQ(o.min_device_blocks, 0);
  EXPECT_EQ(o.hicache_ratio, 0.0);
  EXPECT_EQ(o.hicache_tokens, 0);
}

TEST(KvPoolTest, BlocksForFractionFloorsAndKeepsOneBlock) {
  EXPECT_EQ(BlocksForFraction(0.25, 1000), 250);
  EXPECT_EQ(BlocksForFraction(0.25, 1003), 250);
  EXPECT_EQ(BlocksForFraction(1.0, 1003), 1003);
  EXPECT_EQ(BlocksForFraction(0.01, 50), 1);
  EXPECT_EQ(BlocksForFraction(0.5, 0), 1);
  EXPECT_EQ(BlocksForFraction(1.0, int64_t{1} << 30), int64_t{1} << 30);
}

}  // namespace
}  // namespace agentkv::engine
