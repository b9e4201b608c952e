// Tests of EngineConfig: defaults, validation naming the bad field, the typed presets and
// their names, and SizeKvPool(config) applying the one rule to the config's cost model.
#include "agentkv/engine/engine_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;

TEST(EngineConfigTest, DefaultsAreLlama8bOnOneH100AndValid) {
  const EngineConfig config;
  EXPECT_EQ(config.model, ModelPresetId::kLlama31_8b);
  EXPECT_EQ(config.gpu, GpuPresetId::kH100);
  EXPECT_EQ(config.tp, 1);
  EXPECT_EQ(config.kv_pool.tokens_per_block, 16);
  EXPECT_EQ(config.cache.device_blocks, 0);
  EXPECT_EQ(config.cache.host_blocks, 0);
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
}

TEST(EngineConfigTest, ValidateNamesTheBadField) {
  struct BadCase {
    std::string name;
    void (*mutate)(EngineConfig&);
    std::string expect;
  };
  const std::vector<BadCase> cases = {
      {"scheduler", [](EngineConfig& c) { c.scheduler.max_running_requests = 0; },
       "max_running_requests"},
      {"kv_pool", [](EngineConfig& c) { c.kv_pool.tokens_per_block = 0; },
       "kv_pool.tokens_per_block"},
      {"cache device blocks", [](EngineConfig& c) { c.cache.device_blocks = 64; },
       "kv_pool sizes the tiers"},
      {"cache host blocks", [](EngineConfig& c) { c.cache.host_blocks = 64; },
       "kv_pool sizes the tiers"},
      {"tp", [](EngineConfig& c) { c.tp = 3; }, "tp = 3"},
      {"tp and kv heads", [](EngineConfig& c) { c.tp = 16; }, "tp = 16"},
      {"model does not fit", [](EngineConfig& c) { c.model = ModelPresetId::kLlama31_70b; },
       "llama-3.1-70b"},
      {"cost options", [](EngineConfig& c) { c.cost.mfu = 0; }, "mfu"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    EngineConfig config;
    c.mutate(config);
    const Status status = config.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.expect));
    EXPECT_EQ(SizeKvPool(config).status(), status);
  }
}

TEST(EngineConfigTest, PresetNamesRoundTrip) {
  for (const ModelPresetId id :
       {ModelPresetId::kLlama31_8b, ModelPresetId::kQwen25_32b, ModelPresetId::kLlama31_70b}) {
    StatusOr<ModelPresetId> parsed = ParseModelPreset(PresetName(id));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, id);
    EXPECT_EQ(PresetOf(id).name, PresetName(id));
  }
  for (const GpuPresetId id : {GpuPresetId::kH100, GpuPresetId::kH200}) {
    StatusOr<GpuPresetId> parsed = ParseGpuPreset(PresetName(id));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, id);
  }
  EXPECT_EQ(PresetName(ModelPresetId::kLlama31_8b), "llama-3.1-8b");
  EXPECT_EQ(PresetName(ModelPresetId::kQwen25_32b), "qwen2.5-32b");
  EXPECT_EQ(PresetName(ModelPresetId::kLlama31_70b), "llama-3.1-70b");
  EXPECT_EQ(PresetName(GpuPresetId::kH100), "h100");
  EXPECT_EQ(PresetName(GpuPresetId::kH200), "h200");
}

TEST(EngineConfigTest, UnknownPresetNamesAreNotFoundListingKnownNames) {
  StatusOr<ModelPresetId> model = ParseModelPreset("gpt-9");
  ASSERT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(model.status().message(),
            "unknown model preset \"gpt-9\"; known: llama-3.1-8b qwen2.5-32b llama-3.1-70b");
  StatusOr<GpuPresetId> gpu = ParseGpuPreset("H100");
  ASSERT_EQ(gpu.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(gpu.status().message(), "unknown gpu preset \"H100\"; known: h100 h200");
}

TEST(EngineConfigTest, SizeKvPoolUsesTheConfigsCostModel) {
  EngineConfig config;
  config.kv_pool.tokens_per_block = 32;
  StatusOr<KvPool> pool = SizeKvPool(config);
  ASSERT_TRUE(pool.ok()) << pool.status();
  // llama-3.1-8b on one h100 leaves 450,911 KV tokens (cost_model_test.cc).
  EXPECT_EQ(pool->device_blocks, 450'911 / 32);
  EXPECT_EQ(pool->host_blocks, 0);

  // A bigger GPU leaves more; tensor parallelism splits the weights.
  config.gpu = GpuPresetId::kH200;
  StatusOr<KvPool> h200 = SizeKvPool(config);
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_GT(h200->device_blocks, pool->device_blocks);
  config.model = ModelPresetId::kLlama31_70b;
  config.gpu = GpuPresetId::kH100;
  config.tp = 4;
  StatusOr<KvPool> seventy = SizeKvPool(config);
  ASSERT_TRUE(seventy.ok()) << seventy.status();
  EXPECT_EQ(seventy->device_blocks, 486'595 / 32);  // docs/COST_MODEL.md's worked example.

  // --max-total-tokens and the host tier as the rule says.
  config = EngineConfig{};
  config.kv_pool.max_total_tokens = 8192;
  config.kv_pool.hicache_ratio = 2.0;
  StatusOr<KvPool> fixed = SizeKvPool(config);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(*fixed, (KvPool{.tokens_per_block = 16, .device_blocks = 512, .host_blocks = 1024}));
}

}  // namespace
}  // namespace agentkv::engine
