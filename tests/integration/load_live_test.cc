// `agentkv load`'s client against one live engine emulator: each API (`/generate` with ids, the
// OpenAI completions and chat routes) completes every request and reads the server's cached
// tokens, and an engine's 400 (a prompt past its context length) is a refusal the agent goes on
// from, not a failure.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "agentkv/load/load_run.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/sim/workload/synthetic_agentic.h"

namespace agentkv::service {
namespace {

constexpr int32_t kBlock = 64;
constexpr double kTimeScale = 200;

// Two small synthetic sessions.
sim::AgenticWorkload Workload() {
  sim::SyntheticAgenticOptions o;
  o.sessions = 2;
  o.context_scale = 0.05;
  o.max_turns = 6;
  StatusOr<sim::AgenticWorkload> workload = sim::GenerateSyntheticAgentic(o);
  EXPECT_TRUE(workload.ok()) << workload.status();
  return *std::move(workload);
}

std::unique_ptr<EngineEmulator> StartEngine(int64_t context_length = 0) {
  EngineEmulatorOptions options;
  options.runtime.engine.kv_pool.tokens_per_block = kBlock;
  options.runtime.speed = kTimeScale;
  options.runtime.context_length = context_length;
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

sim::ArmResult Load(const std::string& url, load::LoadApi api) {
  load::LoadOptions options;
  options.target.url = url;
  options.target.api = api;
  options.target.tokens_per_block = kBlock;
  options.target.close_sessions = false;  // An engine serves no /v1/sessions/{id}/close.
  options.time_scale = kTimeScale;
  StatusOr<sim::ReplayResult> result = load::RunLoad(Workload(), options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result->arms.front();
}

class LoadLiveTest : public testing::TestWithParam<load::LoadApi> {};

TEST_P(LoadLiveTest, EveryRequestCompletesAndTheServersCachedTokensAreRead) {
  std::unique_ptr<EngineEmulator> engine = StartEngine();
  ASSERT_NE(engine, nullptr);
  const sim::ArmResult arm = Load(engine->base_url(), GetParam());
  ASSERT_TRUE(arm.measured.has_value());
  EXPECT_GT(arm.requests_issued, 4);
  EXPECT_EQ(arm.requests_completed, arm.requests_issued);
  EXPECT_EQ(arm.requests_refused, 0);
  EXPECT_TRUE(arm.measured->errors.empty());
  EXPECT_EQ(arm.measured->attempts, arm.requests_issued);
  // The turns of a session share their prefix: the engine found it cached.
  EXPECT_GT(arm.cached_device_tokens, 0);
  EXPECT_GT(arm.token_hit_ratio_device, 0.3);
  EXPECT_EQ(arm.ttft.count, arm.requests_completed);
  EXPECT_GT(arm.output_tokens, arm.requests_completed);
  EXPECT_GT(arm.measured->inter_token.count, 0);
}

INSTANTIATE_TEST_SUITE_P(Apis, LoadLiveTest,
                         testing::Values(load::LoadApi::kGenerate, load::LoadApi::kCompletions,
                                         load::LoadApi::kChat),
                         [](const testing::TestParamInfo<load::LoadApi>& api) {
                           return std::string(load::LoadApiName(api.param));
                         });

TEST(LoadLiveRefusalTest, APromptPastTheContextLengthIsRefusedAndTheAgentGoesOn) {
  std::unique_ptr<EngineEmulator> engine = StartEngine(/*context_length=*/900);
  ASSERT_NE(engine, nullptr);
  const sim::ArmResult arm = Load(engine->base_url(), load::LoadApi::kGenerate);
  EXPECT_EQ(arm.requests_completed, arm.requests_issued);
  EXPECT_GT(arm.requests_refused, 0);
  EXPECT_LT(arm.requests_refused, arm.requests_issued);
  EXPECT_GT(arm.refused_prompt_tokens, 900 * arm.requests_refused - 1);
  EXPECT_EQ(arm.measured->requests_failed, 0);
  EXPECT_TRUE(arm.measured->errors.empty());
}

}  // namespace
}  // namespace agentkv::service
