// Tests of Engine: it builds the cache with the pool SizeKvPool gives, keeps the cache's policy
// options, prices each step with the cost model, and fires its own policies through its door:
// stall offload learns turns at Submit and TakeReport, prefix pins end at their expiry, at the
// return of their conversation (Continuum) and under pressure before a step (Continuum).
#include "agentkv/engine/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
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
  const kv::KvCacheOptions& cache = engine->cache().options();
  EXPECT_EQ(cache.tokens_per_block, kTokensPerBlock);
  EXPECT_EQ(cache.device_blocks, 64);
  EXPECT_EQ(cache.host_blocks, 96);
  EXPECT_EQ(cache.session_close_mode, kv::SessionCloseMode::kRelease);
  EXPECT_EQ(engine->max_total_num_tokens(), 64 * kTokensPerBlock);
  EXPECT_EQ(engine->gauges().max_total_num_tokens, 64 * kTokensPerBlock);
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

  ASSERT_TRUE(engine->Submit(Request(1, 100, 2), TimeNs(0)).ok());
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
  const kv::BlockKeyHasher& hasher = engine->hasher();
  // Two requests of 6 committed blocks each in an 8-block pool: the second evicts.
  int64_t evicted = 0;
  for (int64_t id = 1; id <= 2; ++id) {
    SchedulerRequest request = Request(id, 6 * kTokensPerBlock + 1, 1);
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 6; ++b) ids.push_back(static_cast<uint64_t>(id) * 100 + b);
    request.prompt_keys = hasher.KeysFromBlockIds(ids);
    ASSERT_TRUE(engine->Submit(std::move(request), TimeNs(0)).ok());
    for (int i = 0; i < 4; ++i) evicted += engine->Step().evicted_blocks;
  }
  EXPECT_EQ(evicted, engine->cache().stats().device_evictions);
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
  const kv::BlockKeyHasher& hasher = engine->hasher();
  auto turn = [&](int64_t id, int64_t conversation, PauseKind hint, TimeNs at) {
    SchedulerRequest request = Request(id, 10 * kTokensPerBlock + 1, 1);
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 10; ++b) ids.push_back(static_cast<uint64_t>(conversation) * 100 + b);
    request.prompt_keys = hasher.KeysFromBlockIds(ids);
    request.kv_options.conversation = ConversationId(conversation);
    request.kv_options.next_pause = hint;
    ASSERT_TRUE(engine->Submit(std::move(request), at).ok());
    for (int i = 0; i < 4 && engine->gauges().num_finished_reqs < id; ++i) engine->Step();
    // Taking the report ends the turn: the pause starts now.
    ASSERT_TRUE(engine->TakeReport(RequestId(id), at).ok());
  };
  // Teach the engine that human turns of conversation 1 last about 100 s.
  for (int64_t k = 0; k < 10; ++k) {
    turn(2 * k + 1, 1, PauseKind::kHumanTurn, TimeNs::Seconds(200.0 * static_cast<double>(k)));
    // The conversation's next request arrives 100 s later (it ends the pause; aborted before
    // it runs, so that it starts no pause of its own).
    const TimeNs back_at = TimeNs::Seconds(200.0 * static_cast<double>(k) + 100);
    SchedulerRequest back = Request(2 * k + 2, 1, 1);
    back.kv_options.conversation = ConversationId(1);
    ASSERT_TRUE(engine->Submit(back, back_at).ok());
    ASSERT_TRUE(engine->Abort(back.id).ok());
    ASSERT_TRUE(engine->TakeReport(back.id, back_at).ok());
  }
  // A human turn of 10 blocks in a 16-block pool: under pressure, it goes to the host.
  turn(100, 1, PauseKind::kHumanTurn, TimeNs::Seconds(5000));
  const std::optional<TimeNs> wake = engine->RunStallOffload(TimeNs::Seconds(5000));
  ASSERT_TRUE(wake.has_value());
  EXPECT_GT(*wake, TimeNs::Seconds(5000));
  EXPECT_GT(engine->cache().stats().stall_offloaded_blocks, 0);
  EXPECT_EQ(engine->stall_offload()->offloaded_sessions(), 1);
  EXPECT_EQ(engine->RunStallOffload(*wake), std::nullopt);
  EXPECT_GT(engine->cache().stats().prefetched_blocks, 0);
  EXPECT_TRUE(engine->CheckInvariants().ok());
}

// Caches a finished chain of `blocks` blocks of `conversation` in `engine` (request `id`).
std::vector<kv::BlockKey> CacheChain(Engine& engine, int64_t id, int64_t conversation,
                                     int64_t blocks) {
  SchedulerRequest request = Request(id, blocks * kTokensPerBlock + 1, 1);
  std::vector<uint64_t> ids;
  for (int64_t b = 0; b < blocks; ++b) ids.push_back(static_cast<uint64_t>(conversation * 100 + b));
  request.prompt_keys = engine.hasher().KeysFromBlockIds(ids);
  const std::vector<kv::BlockKey> keys = request.prompt_keys;
  EXPECT_TRUE(engine.Submit(std::move(request), TimeNs(0)).ok());
  for (int i = 0; i < 4 && engine.FindReport(RequestId(id))->finished == std::nullopt; ++i) {
    engine.Step();
  }
  EXPECT_TRUE(engine.TakeReport(RequestId(id), TimeNs(0)).ok());
  return keys;
}

std::vector<kv::Priority> Priorities(const Engine& engine, const std::vector<kv::BlockKey>& keys) {
  std::vector<kv::Priority> out;
  for (const kv::BlockKey key : keys) out.push_back(*engine.cache().GetPriority(key));
  return out;
}

TEST(EngineTest, SubmitAndTakeReportFireTheStallOffloadHooks) {
  EngineConfig config = SmallConfig();
  config.stall_offload = StallOffloadOptions{};
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const StallOffloadPolicy& stall = *engine->stall_offload();
  SchedulerRequest request = Request(1, 3 * kTokensPerBlock + 1, 1);
  request.kv_options.conversation = ConversationId(4);
  request.kv_options.next_pause = PauseKind::kHumanTurn;
  ASSERT_TRUE(engine->Submit(std::move(request), TimeNs::Seconds(1)).ok());
  EXPECT_EQ(stall.turns_in_flight(), 1);
  // A request the scheduler refuses as malformed ends the turn it would have started.
  EXPECT_FALSE(engine->Submit(Request(2, 0, 1), TimeNs::Seconds(1)).ok());
  EXPECT_EQ(stall.turns_in_flight(), 1);
  while (engine->FindReport(RequestId(1))->finished == std::nullopt) engine->Step();
  EXPECT_EQ(stall.turns_in_flight(), 1);
  EXPECT_EQ(stall.paused_sessions(), 0);
  // Taking the report ends the turn: conversation 4 is paused from now on.
  ASSERT_TRUE(engine->TakeReport(RequestId(1), TimeNs::Seconds(2)).ok());
  EXPECT_EQ(stall.turns_in_flight(), 0);
  EXPECT_EQ(stall.paused_sessions(), 1);
  EXPECT_EQ(stall.counters().pauses, 1);
}

// A request carries its pause hint once (kv_options.next_pause): both of the engine's users of
// it learn from the same value, stall offload (its pauses) and the cache's gap-aware order
// (the pause estimator its effective last use reads).
TEST(EngineTest, OnePauseHintReachesStallOffloadAndTheCachesGapEstimator) {
  EngineConfig config = SmallConfig();
  config.cache.eviction_order = kv::EvictionOrder::kGapAware;
  config.stall_offload = StallOffloadOptions{};
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const StallOffloadPolicy& stall = *engine->stall_offload();
  auto run = [&](SchedulerRequest request, TimeNs at) {
    const RequestId id = request.id;
    engine->SetCacheClock(at);
    ASSERT_TRUE(engine->Submit(std::move(request), at).ok());
    while (engine->FindReport(id)->finished == std::nullopt) engine->Step();
    ASSERT_TRUE(engine->TakeReport(id, at).ok());
  };
  // Conversation 1 waits 100 s for its user after each of 5 turns.
  constexpr int64_t kTurns = 5;
  for (int64_t k = 0; k < kTurns; ++k) {
    const TimeNs at = TimeNs::Seconds(200.0 * static_cast<double>(k));
    SchedulerRequest turn = Request(2 * k + 1, 3 * kTokensPerBlock + 1, 1);
    turn.kv_options.conversation = ConversationId(1);
    turn.kv_options.next_pause = PauseKind::kHumanTurn;
    run(std::move(turn), at);
    SchedulerRequest back = Request(2 * k + 2, 1, 1);
    back.kv_options.conversation = ConversationId(1);
    back.kv_options.arrival = at + TimeNs::Seconds(100);
    run(std::move(back), at + TimeNs::Seconds(100));
  }
  // Stall offload saw each turn's hint: each started a pause, and each return ended one.
  EXPECT_EQ(stall.counters().pauses, kTurns);
  EXPECT_EQ(stall.counters().returns, kTurns);
  // The cache saw the same hint: it measured the 5 human turns of 100 s.
  const std::optional<TimeNs> gap = engine->cache().pause_gaps().Estimate(PauseKind::kHumanTurn);
  ASSERT_TRUE(gap.has_value());
  EXPECT_NEAR(gap->seconds(), 100.0, 10.0);
  EXPECT_EQ(engine->cache().pause_gaps().Estimate(PauseKind::kToolCall), std::nullopt);
  EXPECT_TRUE(engine->CheckInvariants().ok());
}

TEST(EngineTest, APinLastsUntilTheDriverExpiresIt) {
  StatusOr<Engine> engine = Engine::Create(SmallConfig());
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<kv::BlockKey> keys = CacheChain(*engine, 1, 1, 3);
  const kv::Priority fallback = engine->cache().options().default_priority;
  const PinTicket ticket = engine->PinPrefix(ConversationId(1), keys);
  EXPECT_EQ(ticket.pinned_blocks, 3);
  EXPECT_EQ(Priorities(*engine, keys), std::vector<kv::Priority>(3, kv::kMaxPriority));
  EXPECT_EQ(engine->pinned_tokens(), 3 * kTokensPerBlock);
  EXPECT_DOUBLE_EQ(engine->kv_pressure(), 3.0 / 64.0);
  // Without Continuum's lifecycle the conversation's return counts, but the pin stays.
  SchedulerRequest back = Request(2, 3 * kTokensPerBlock + 1, 1);
  back.kv_options.conversation = ConversationId(1);
  back.prompt_keys = keys;
  ASSERT_TRUE(engine->Submit(std::move(back), TimeNs(0)).ok());
  engine->Step();
  EXPECT_EQ(engine->pin_counters().returned, 1);
  EXPECT_EQ(engine->pinned_tokens(), 3 * kTokensPerBlock);
  engine->ExpirePin(ConversationId(1), ticket.generation);
  EXPECT_EQ(Priorities(*engine, keys), std::vector<kv::Priority>(3, fallback));
  EXPECT_EQ(engine->pinned_tokens(), 0);
  EXPECT_EQ(engine->pin_counters().expired, 0);
  EXPECT_TRUE(engine->CheckInvariants().ok());
}

TEST(EngineTest, ContinuumEndsAPinWhenItsConversationIsAdmitted) {
  EngineConfig config = SmallConfig();
  config.continuum_pins = true;
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<kv::BlockKey> keys = CacheChain(*engine, 1, 1, 3);
  const PinTicket ticket = engine->PinPrefix(ConversationId(1), keys);
  SchedulerRequest back = Request(2, 3 * kTokensPerBlock + 1, 1);
  back.kv_options.conversation = ConversationId(1);
  back.prompt_keys = keys;
  ASSERT_TRUE(engine->Submit(std::move(back), TimeNs(0)).ok());
  // Until its admission the pin protects the blocks.
  EXPECT_EQ(engine->pinned_tokens(), 3 * kTokensPerBlock);
  const EngineStep step = engine->Step();
  ASSERT_EQ(step.result.admitted, std::vector<RequestId>{RequestId(2)});
  EXPECT_EQ(engine->pinned_tokens(), 0);
  EXPECT_EQ(engine->pin_counters().returned, 1);
  // The expiry that follows finds nothing to end.
  engine->ExpirePin(ConversationId(1), ticket.generation);
  EXPECT_EQ(engine->pin_counters().expired, 0);
  EXPECT_TRUE(engine->CheckInvariants().ok());
}

TEST(EngineTest, ContinuumEndsAPinWhoseReturningRequestEndsUnadmitted) {
  EngineConfig config = SmallConfig();
  config.continuum_pins = true;
  StatusOr<Engine> engine = Engine::Create(config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<kv::BlockKey> keys = CacheChain(*engine, 1, 1, 2);
  engine->PinPrefix(ConversationId(1), keys);
  SchedulerRequest back = Request(2, 2 * kTokensPerBlock + 1, 1);
  back.kv_options.conversation = ConversationId(1);
  ASSERT_TRUE(engine->Submit(std::move(back), TimeNs(0)).ok());
  ASSERT_TRUE(engine->Abort(RequestId(2)).ok());
  EXPECT_EQ(engine->pinned_tokens(), 2 * kTokensPerBlock);
  ASSERT_TRUE(engine->TakeReport(RequestId(2), TimeNs(0)).ok());
  EXPECT_EQ(engine->pinned_tokens(), 0);
}

TEST(EngineTest, PrepareStepReleasesPinsUnderPressureOnlyWithContinuum) {
  for (const bool continuum : {false, true}) {
    SCOPED_TRACE(continuum ? "continuum" : "ttl only");
    EngineConfig config = SmallConfig();
    config.kv_pool.max_total_tokens = 8 * kTokensPerBlock;
    config.kv_pool.hicache_ratio = 0;
    config.continuum_pins = continuum;
    StatusOr<Engine> engine = Engine::Create(config);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::vector<kv::BlockKey> keys = CacheChain(*engine, 1, 1, 4);
    engine->PinPrefix(ConversationId(1), keys);
    // Nothing waits: no pressure.
    EXPECT_EQ(engine->PrepareStep(TimeNs(0)), std::nullopt);
    EXPECT_EQ(engine->pinned_tokens(), 4 * kTokensPerBlock);
    // A waiting request and less room than one prefill chunk: Continuum releases the pin.
    ASSERT_TRUE(engine->Submit(Request(2, 5 * kTokensPerBlock, 1), TimeNs(0)).ok());
    EXPECT_EQ(engine->PrepareStep(TimeNs(0)), std::nullopt);
    EXPECT_EQ(engine->pinned_tokens(), continuum ? 0 : 4 * kTokensPerBlock);
    EXPECT_EQ(engine->pin_counters().unpinned_under_pressure, continuum ? 1 : 0);
    EXPECT_TRUE(engine->CheckInvariants().ok());
  }
}

TEST(EngineTest, ClosesSessionsResetsTheCacheAndDeliversAParentsReturn) {
  StatusOr<Engine> engine = Engine::Create(SmallConfig());
  ASSERT_TRUE(engine.ok()) << engine.status();
  SchedulerRequest request = Request(1, 2 * kTokensPerBlock + 1, 3);
  request.kv_options.session = SessionId(3);
  request.prompt_keys = engine->hasher().KeysFromBlockIds(std::vector<uint64_t>{1, 2});
  ASSERT_TRUE(engine->Submit(std::move(request), TimeNs(0)).ok());
  engine->Step();
  // Flushing needs an idle cache.
  EXPECT_EQ(engine->ResetCache().code(), StatusCode::kFailedPrecondition);
  while (engine->FindReport(RequestId(1))->finished == std::nullopt) engine->Step();
  ASSERT_TRUE(engine->TakeReport(RequestId(1), TimeNs(0)).ok());
  EXPECT_TRUE(engine->cache().SessionOpen(SessionId(3)));
  EXPECT_GT(engine->CloseSession(SessionId(3)), 0);
  EXPECT_FALSE(engine->cache().SessionOpen(SessionId(3)));
  // Demotion is off by default: delivering a parent's return demotes nothing.
  EXPECT_EQ(engine->DeliverParentReturn(ConversationId(7), TimeNs::Seconds(5)), 0);
  EXPECT_TRUE(engine->ResetCache().ok());
  EXPECT_EQ(engine->cache().stats().device.cached + engine->cache().stats().host.cached, 0);
  EXPECT_TRUE(engine->CheckInvariants().ok());
}

}  // namespace
}  // namespace agentkv::engine
