// Tests of Engine: it builds the cache with the pool SizeKvPool gives, keeps the cache's policy
// options, and prices each step with the cost model.
#include "agentkv/engine/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "agentkv/kv/block_key.h"

namespace agentkv::engine {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kTokensPerBlock = 16;

EngineConfig SmallConfig() {
  EngineConfig config;
  config.kv_pool.tokens_per_block = kTokensPerBlock;
  config.kv_pool.max_total_tokens = 64 * kTokensPerBlock;
  config.kv_pool.hicache_ratio = 1.5;
  config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  return config;
}

SchedulerRequest Request(int64_t id, int64_t prompt_tokens, int64_t max_new_tokens) {
  SchedulerRequest request;
  request.id = RequestId(id);
  request.prompt_tokens = prompt_tokens;
  request.max_new_tokens = max_new_tokens;
  return request;
}

TEST(EngineTest, BuildsTheCacheFromTheSizedPool) {
  StatusOr<Engine> engine = Engine::Create(SmallConfig());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(engine->kv_pool(),
            (KvPool{.tokens_per_block = kTokensPerBlock, .device_blocks = 64, .host_blocks = 96}));
  const kv::KvCacheOptions& cache = engine->scheduler().cache().options();
  EXPECT_EQ(cache.tokens_per_block, kTokensPerBlock);
  EXPECT_EQ(cache.device_blocks, 64);
  EXPECT_EQ(cache.host_blocks, 96);
  EXPECT_EQ(cache.session_close_mode, kv::SessionCloseMode::kRelease);
  EXPECT_EQ(engine->max_total_num_tokens(), 64 * kTokensPerBlock);
  EXPECT_EQ(engine->scheduler().gauges().max_total_num_tokens, 64 * kTokensPerBlock);
  EXPECT_EQ(engine->cost_model().model().name, "llama-3.1-8b");
  EXPECT_EQ(engine->cost_model().gpu().name, "h100");
  EXPECT_EQ(engine->config().kv_pool.max_total_tokens, 64 * kTokensPerBlock);
}

TEST(EngineTest, RefusesAnInvalidConfigNamingTheField) {
  EngineConfig config = SmallConfig();
  config.kv_pool.max_total_tokens = kTokensPerBlock - 1;
  EXPECT_THAT(Engine::Create(config).status().message(), HasSubstr("less than one block"));
  config = SmallConfig();
  config.cache.device_blocks = 10;
  EXPECT_EQ(Engine::Create(config).status().code(), StatusCode::kInvalidArgument);
  // The cache's own policy options are checked when the cache is built.
  config = SmallConfig();
  config.cache.max_num_turns = 0;
  EXPECT_THAT(Engine::Create(config).status().message(), HasSubstr("max_num_turns"));
}

TEST(EngineTest, StepsArePricedByTheCostModel) {
  StatusOr<Engine> engine = Engine::Create(SmallConfig());
  ASSERT_TRUE(engine.ok()) << engine.status();
  // An idle step computes nothing and costs nothing.
  const EngineStep idle = engine->Step();
  EXPECT_FALSE(idle.computed());
  EXPECT_EQ(idle.cost, TimeNs(0));

  ASSERT_TRUE(engine->mutable_scheduler().Submit(Request(1, 100, 2)).ok());
  const EngineStep prefill = engine->Step();
  EXPECT_TRUE(prefill.computed());
  EXPECT_EQ(prefill.shape.prefill_tokens, 100);
  EXPECT_EQ(prefill.shape.decode_tokens, 0);
  EXPECT_EQ(prefill.shape.num_requests, 1);
  EXPECT_EQ(prefill.shape.host_load_tokens, 0);
  EXPECT_EQ(prefill.evicted_blocks, 0);
  EXPECT_EQ(prefill.cost, engine->cost_model().Estimate(prefill.shape));
  EXPECT_GT(prefill.cost, TimeNs(0));

  const EngineStep decode = engine->Step();
  EXPECT_EQ(decode.shape.prefill_tokens, 0);
  EXPECT_EQ(decode.shape.decode_tokens, 1);
  // The prompt's KV; the first output token's KV is computed by this decode.
  EXPECT_EQ(decode.shape.context_tokens, 100);
  EXPECT_EQ(decode.cost, engine->cost_model().Estimate(decode.shape));
  EXPECT_EQ(decode.result.finished, std::vector<RequestId>{RequestId(1)});
}

TEST(EngineTest, CountsEvictionsOfTheStep) {
  EngineConfig config = SmallConfig();
  config.kv_pool.max_total_tokens = 8 * kTokensPerBlock;
  config.kv_pool.hicache_ratio = 0;
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const kv::BlockKeyHasher& hasher = engine->scheduler().cache().hasher();
  // Two requests of 6 committed blocks each in an 8-block pool: the second evicts.
  int64_t evicted = 0;
  for (int64_t id = 1; id <= 2; ++id) {
    SchedulerRequest request = Request(id, 6 * kTokensPerBlock + 1, 1);
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 6; ++b) ids.push_back(static_cast<uint64_t>(id) * 100 + b);
    request.prompt_keys = hasher.KeysFromBlockIds(ids);
    ASSERT_TRUE(engine->mutable_scheduler().Submit(std::move(request)).ok());
    for (int i = 0; i < 4; ++i) evicted += engine->Step().evicted_blocks;
  }
  EXPECT_EQ(evicted, engine->scheduler().cache().stats().device_evictions);
  EXPECT_GT(evicted, 0);
}

TEST(EngineTest, StallOffloadNeedsAHostTierAndIsOffByDefault) {
  EngineConfig config = SmallConfig();
  StatusOr<Engine> plain = Engine::Create(config);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->stall_offload(), nullptr);
  EXPECT_EQ(plain->RunStallOffload(TimeNs::Seconds(1)), std::nullopt);
  config.stall_offload = StallOffloadOptions{};
  config.stall_offload->pressure_threshold = 2;
  EXPECT_THAT(config.Validate().message(), HasSubstr("pressure_threshold"));
  config.stall_offload->pressure_threshold = 0.5;
  config.kv_pool.hicache_ratio = 0;
  EXPECT_THAT(Engine::Create(config).status().message(),
              HasSubstr("EngineConfig.stall_offload needs a host tier"));
}

TEST(EngineTest, StallOffloadMovesAPausedSessionOutAndBackOnTheDriversClock) {
  EngineConfig config = SmallConfig();
  config.kv_pool.max_total_tokens = 16 * kTokensPerBlock;
  config.kv_pool.hicache_ratio = 2;
  config.stall_offload = StallOffloadOptions{};
  config.stall_offload->pressure_threshold = 0.5;
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_NE(engine->stall_offload(), nullptr);
  const kv::BlockKeyHasher& hasher = engine->scheduler().cache().hasher();
  auto turn = [&](int64_t id, int64_t conversation, PauseKind hint, TimeNs at) {
    SchedulerRequest request = Request(id, 10 * kTokensPerBlock + 1, 1);
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 10; ++b) ids.push_back(static_cast<uint64_t>(conversation) * 100 + b);
    request.prompt_keys = hasher.KeysFromBlockIds(ids);
    request.kv_options.conversation = ConversationId(conversation);
    request.next_pause = hint;
    engine->NoteSubmitted(request, at);
    ASSERT_TRUE(engine->mutable_scheduler().Submit(std::move(request)).ok());
    for (int i = 0; i < 4 && engine->scheduler().num_finished() < id; ++i) engine->Step();
    ASSERT_TRUE(engine->mutable_scheduler().TakeReport(RequestId(id)).ok());
    engine->NoteFinished(RequestId(id), /*completed=*/true, at);
  };
  // Teach the engine that human turns of conversation 1 last about 100 s.
  for (int64_t k = 0; k < 10; ++k) {
    turn(2 * k + 1, 1, PauseKind::kHumanTurn, TimeNs::Seconds(200.0 * static_cast<double>(k)));
    // The conversation's next request arrives 100 s later (it ends the pause; not run here).
    SchedulerRequest back = Request(2 * k + 2, 1, 1);
    back.kv_options.conversation = ConversationId(1);
    engine->NoteSubmitted(back, TimeNs::Seconds(200.0 * static_cast<double>(k) + 100));
    engine->NoteFinished(back.id, /*completed=*/false, TimeNs::Seconds(0));
  }
  // A human turn of 10 blocks in a 16-block pool: under pressure, it goes to the host.
  turn(100, 1, PauseKind::kHumanTurn, TimeNs::Seconds(5000));
  const std::optional<TimeNs> wake = engine->RunStallOffload(TimeNs::Seconds(5000));
  ASSERT_TRUE(wake.has_value());
  EXPECT_GT(*wake, TimeNs::Seconds(5000));
  EXPECT_GT(engine->scheduler().cache().stats().stall_offloaded_blocks, 0);
  EXPECT_EQ(engine->stall_offload()->offloaded_sessions(), 1);
  EXPECT_EQ(engine->RunStallOffload(*wake), std::nullopt);
  EXPECT_GT(engine->scheduler().cache().stats().prefetched_blocks, 0);
  EXPECT_TRUE(engine->scheduler().CheckInvariants().ok());
}

}  // namespace
}  // namespace agentkv::engine
