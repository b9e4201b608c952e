#include "agentkv/kv/kv_cache_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::kv {
namespace {

using ::testing::HasSubstr;

struct BadField {
  std::string field;
  int64_t value;
  std::function<void(KvCacheOptions&)> apply;
};

// One entry per field bound: just below the minimum and just above the maximum.
std::vector<BadField> OutOfRangeFields() {
  return {
      {"tokens_per_block", 0, [](KvCacheOptions& o) { o.tokens_per_block = 0; }},
      {"tokens_per_block", -4, [](KvCacheOptions& o) { o.tokens_per_block = -4; }},
      {"tokens_per_block", (1 << 20) + 1,
       [](KvCacheOptions& o) { o.tokens_per_block = (1 << 20) + 1; }},
      {"device_blocks", -1, [](KvCacheOptions& o) { o.device_blocks = -1; }},
      {"device_blocks", (int64_t{1} << 30) + 1,
       [](KvCacheOptions& o) { o.device_blocks = (int64_t{1} << 30) + 1; }},
      {"host_blocks", -1, [](KvCacheOptions& o) { o.host_blocks = -1; }},
      {"host_blocks", (int64_t{1} << 30) + 1,
       [](KvCacheOptions& o) { o.host_blocks = (int64_t{1} << 30) + 1; }},
      {"offload_threshold", -1, [](KvCacheOptions& o) { o.offload_threshold = -1; }},
      {"offload_threshold", 102, [](KvCacheOptions& o) { o.offload_threshold = 102; }},
      {"default_priority", -1, [](KvCacheOptions& o) { o.default_priority = -1; }},
      {"default_priority", 101, [](KvCacheOptions& o) { o.default_priority = 101; }},
      {"event_log_capacity", -1, [](KvCacheOptions& o) { o.event_log_capacity = -1; }},
      {"event_log_capacity", (int64_t{1} << 26) + 1,
       [](KvCacheOptions& o) { o.event_log_capacity = (int64_t{1} << 26) + 1; }},
  };
}

TEST(KvCacheOptionsTest, DefaultsAreAsDocumented) {
  const KvCacheOptions o;
  EXPECT_EQ(o.tokens_per_block, 32);
  EXPECT_EQ(o.device_blocks, 0);
  EXPECT_EQ(o.host_blocks, 0);
  EXPECT_EQ(o.offload_threshold, 30);
  EXPECT_EQ(o.default_priority, 35);
  EXPECT_EQ(o.hash_seed, 0u);
  EXPECT_EQ(o.event_log_capacity, 0);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(KvCacheOptionsTest, ValidateRejectsEachOutOfRangeFieldNamingFieldAndValue) {
  for (const BadField& bad : OutOfRangeFields()) {
    SCOPED_TRACE(bad.field + " = " + std::to_string(bad.value));
    KvCacheOptions o;
    bad.apply(o);
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(bad.field));
    EXPECT_THAT(s.message(), HasSubstr("got " + std::to_string(bad.value)));
  }
}

TEST(KvCacheOptionsTest, CreateRejectsEachOutOfRangeFieldNamingFieldAndValue) {
  for (const BadField& bad : OutOfRangeFields()) {
    SCOPED_TRACE(bad.field + " = " + std::to_string(bad.value));
    KvCacheOptions o;
    o.device_blocks = 4;
    bad.apply(o);
    const StatusOr<KvCacheManager> cache = KvCacheManager::Create(o);
    ASSERT_FALSE(cache.ok());
    EXPECT_EQ(cache.status().code(), StatusCode::kInvalidArgument) << cache.status();
    EXPECT_THAT(cache.status().message(), HasSubstr(bad.field));
    EXPECT_THAT(cache.status().message(), HasSubstr("got " + std::to_string(bad.value)));
  }
}

TEST(KvCacheOptionsTest, BoundaryValuesAreAccepted) {
  const std::vector<std::function<void(KvCacheOptions&)>> edges = {
      [](KvCacheOptions& o) { o.tokens_per_block = 1; },
      [](KvCacheOptions& o) { o.tokens_per_block = 1 << 20; },
      [](KvCacheOptions& o) { o.device_blocks = int64_t{1} << 30; },
      [](KvCacheOptions& o) { o.host_blocks = int64_t{1} << 30; },
      [](KvCacheOptions& o) { o.offload_threshold = 0; },
      [](KvCacheOptions& o) { o.offload_threshold = 101; },
      [](KvCacheOptions& o) { o.default_priority = 0; },
      [](KvCacheOptions& o) { o.default_priority = 100; },
      [](KvCacheOptions& o) { o.event_log_capacity = int64_t{1} << 26; },
      [](KvCacheOptions& o) { o.hash_seed = ~uint64_t{0}; },
  };
  for (size_t i = 0; i < edges.size(); ++i) {
    KvCacheOptions o;
    edges[i](o);
    EXPECT_TRUE(o.Validate().ok()) << "edge " << i << ": " << o.Validate();
  }
}

TEST(KvCacheOptionsTest, TiersTogetherAtMostTwoToTheThirtyOneMinusTwoBlocks) {
  // Each tier alone may have 2^30 blocks, but block ids are int32: together at most 2^31 - 2.
  KvCacheOptions o;
  o.device_blocks = int64_t{1} << 30;
  o.host_blocks = (int64_t{1} << 30) - 2;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  for (const int64_t host : {(int64_t{1} << 30) - 1, int64_t{1} << 30}) {
    o.host_blocks = host;
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("device_blocks"));
    EXPECT_THAT(s.message(), HasSubstr("host_blocks"));
    EXPECT_THAT(s.message(), HasSubstr(std::to_string((int64_t{1} << 30) + host)));
  }
}

TEST(KvCacheOptionsTest, CreateRejectsTiersTooLargeTogetherInsteadOfAborting) {
  KvCacheOptions o;
  o.device_blocks = int64_t{1} << 30;
  o.host_blocks = int64_t{1} << 30;
  const StatusOr<KvCacheManager> cache = KvCacheManager::Create(o);
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), StatusCode::kInvalidArgument) << cache.status();
}

TEST(KvCacheOptionsTest, FinishedSubagentIdleSecondsIsCheckedNamingTheField) {
  KvCacheOptions o;
  EXPECT_FALSE(o.finished_subagent_min_idle_s.has_value());
  EXPECT_FALSE(o.finished_subagent_offloadable);
  for (const double ok : {0.0, 0.25, 1e6}) {
    o.finished_subagent_min_idle_s = ok;
    EXPECT_TRUE(o.Validate().ok()) << ok << ": " << o.Validate();
  }
  for (const double bad : {-0.5, 1e6 + 1, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    o.finished_subagent_min_idle_s = bad;
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("block_reuse_config.finished_subagent_min_idle_s"));
    EXPECT_THAT(s.message(), HasSubstr("[0, 1000000]"));
  }
}

TEST(KvCacheOptionsTest, CreateKeepsValidOptions) {
  KvCacheOptions o;
  o.tokens_per_block = 16;
  o.device_blocks = 10;
  o.host_blocks = 20;
  o.offload_threshold = 50;
  o.default_priority = 60;
  o.hash_seed = 99;
  o.event_log_capacity = 8;
  const StatusOr<KvCacheManager> cache = KvCacheManager::Create(o);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(cache->tokens_per_block(), 16);
  EXPECT_EQ(cache->options().offload_threshold, 50);
  EXPECT_EQ(cache->options().default_priority, 60);
  EXPECT_EQ(cache->hasher().RootKey(), BlockKeyHasher(99).RootKey());
  EXPECT_EQ(cache->stats().device.capacity, 10);
  EXPECT_EQ(cache->stats().device.free, 10);
  EXPECT_EQ(cache->stats().host.capacity, 20);
  EXPECT_EQ(cache->stats().host.free, 20);
}

}  // namespace
}  // namespace agentkv::kv
