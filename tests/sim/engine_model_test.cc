// Tests of EngineModel: step timing against the cost model, arrivals mid-step, idleness,
// conservation of requests and determinism.
#include "agentkv/sim/engine_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/retention.h"
#include "agentkv/sim/event_loop.h"
#include "sim_test_support.h"

namespace agentkv::sim {
namespace {

constexpr int32_t kTokensPerBlock = 16;

using testing_support::Keys;
using testing_support::Llama8bH100;

engine::SchedulerRequest MakeRequest(int64_t id, int64_t prompt_tokens, int64_t max_new_tokens,
                                     uint64_t content = 0) {
  engine::SchedulerRequest request;
  request.id = RequestId(id);
  request.prompt_keys = Keys(content != 0 ? content : static_cast<uint64_t>(id) * 100000,
                             prompt_tokens / kTokensPerBlock);
  request.prompt_tokens = prompt_tokens;
  request.max_new_tokens = max_new_tokens;
  return request;
}

// `device_blocks` = 0 sizes the device tier from the cost model.
EngineModelOptions DefaultOptions(int64_t device_blocks = 0) {
  EngineModelOptions options;
  options.config.kv_pool.tokens_per_block = kTokensPerBlock;
  options.config.kv_pool.max_total_tokens = device_blocks * kTokensPerBlock;
  return options;
}

engine::StepShape Shape(int64_t prefill, int64_t decode, int64_t context, int64_t requests) {
  return engine::StepShape{.prefill_tokens = prefill,
                           .decode_tokens = decode,
                           .context_tokens = context,
                           .num_requests = requests};
}

class EngineModelTest : public ::testing::Test {
 protected:
  void Build(EngineModelOptions options = DefaultOptions()) {
    StatusOr<std::unique_ptr<EngineModel>> engine = EngineModel::Create(&loop_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    engine_->set_completion_callback([this](const EngineRequestRecord& record) {
      ASSERT_TRUE(record.finished.has_value());
      EXPECT_EQ(*record.finished, loop_.now()) << "callback fires at the finish time";
      ++completions_[record.id.value()];
    });
  }

  void SubmitAt(TimeNs at, engine::SchedulerRequest request) {
    loop_.Schedule(at, [this, request = std::move(request)]() mutable {
      Status status = engine_->Submit(std::move(request));
      ASSERT_TRUE(status.ok()) << status;
    });
  }

  EventLoop loop_;
  engine::CostModel cost_ = Llama8bH100();
  std::unique_ptr<EngineModel> engine_;
  std::map<int64_t, int> completions_;
};

TEST_F(EngineModelTest, SizesTheDeviceTierFromTheCostModel) {
  Build();
  EXPECT_EQ(engine_->engine().cache().options().device_blocks,
            cost_.kv_capacity_tokens() / kTokensPerBlock);
  EXPECT_EQ(engine_->gauges().max_total_num_tokens,
            cost_.kv_capacity_tokens() / kTokensPerBlock * kTokensPerBlock);
}

TEST_F(EngineModelTest, LoneRequestFinishesAtTheSumOfItsStepEstimates) {
  Build();
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 1000, 4)).ok());
  loop_.RunUntilIdle();

  // Step 0 prefills the whole prompt (under the 8192 chunk) and emits token 1; steps 1..3
  // decode one token each over a context of 1000, 1001, 1002 tokens.
  const TimeNs prefill = cost_.Estimate(Shape(1000, 0, 0, 1));
  TimeNs expected = prefill;
  for (int64_t i = 0; i < 3; ++i) expected += cost_.Estimate(Shape(0, 1, 1000 + i, 1));

  const EngineRequestRecord* record = engine_->FindRecord(RequestId(1));
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->arrival, TimeNs(0));
  EXPECT_EQ(record->first_token, prefill);
  EXPECT_EQ(record->finished, expected);
  EXPECT_EQ(record->report.output_tokens, 4);
  EXPECT_EQ(record->report.uncached_tokens, 1000);
  EXPECT_EQ(record->cached_tokens(), 0);
  EXPECT_EQ(engine_->num_steps(), 4);
  EXPECT_EQ(engine_->busy_time(), expected);
  EXPECT_EQ(loop_.now(), expected);
  EXPECT_FALSE(engine_->busy());
  EXPECT_EQ(completions_[1], 1);
}

TEST_F(EngineModelTest, SecondArrivalJoinsAtTheNextStepBoundary) {
  Build();
  const TimeNs step0 = cost_.Estimate(Shape(1000, 0, 0, 1));
  SubmitAt(TimeNs(0), MakeRequest(1, 1000, 3));
  SubmitAt(TimeNs(step0.ns() / 2), MakeRequest(2, 1000, 2));
  loop_.RunUntilIdle();

  // Step 1 (at step0): request 1 decodes over 1000 tokens, request 2 prefills 1000.
  const TimeNs step1 = cost_.Estimate(Shape(1000, 1, 1000, 2));
  // Step 2: both decode, contexts 1001 and 1000; request 2 is done (2 tokens).
  const TimeNs step2 = cost_.Estimate(Shape(0, 2, 2001, 2));
  const EngineRequestRecord* first = engine_->FindRecord(RequestId(1));
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->arrival, TimeNs(step0.ns() / 2));
  EXPECT_EQ(first->first_token, step0);
  EXPECT_EQ(second->first_token, step0 + step1);
  EXPECT_EQ(first->finished, step0 + step1 + step2);
  EXPECT_EQ(second->finished, step0 + step1 + step2);
  EXPECT_EQ(engine_->num_steps(), 3);
  EXPECT_EQ((std::map<int64_t, int>{{1, 1}, {2, 1}}), completions_);
}

TEST_F(EngineModelTest, SharedPrefixIsCachedForALaterRequest) {
  Build();
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 1024, 1, /*content=*/7)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 1024, 1, /*content=*/7)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  // The last prompt token is always recomputed, so the last full block is too.
  EXPECT_EQ(second->report.cached_device_tokens, 1024 - kTokensPerBlock);
  EXPECT_EQ(second->report.uncached_tokens, kTokensPerBlock);
}

TEST_F(EngineModelTest, IdleEngineSchedulesNothing) {
  Build();
  EXPECT_EQ(loop_.pending(), 0);
  EXPECT_EQ(loop_.RunUntilIdle(), 0);
  EXPECT_FALSE(engine_->busy());
  EXPECT_EQ(engine_->num_steps(), 0);

  // After finishing its work it goes idle again, and wakes on the next Submit.
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 100, 2)).ok());
  EXPECT_TRUE(engine_->busy());
  EXPECT_EQ(loop_.pending(), 1);
  const int64_t events = loop_.RunUntilIdle();
  EXPECT_EQ(events, 1 + 2) << "one submit-time start plus one event per step";
  EXPECT_EQ(loop_.pending(), 0);
  EXPECT_FALSE(engine_->busy());
  loop_.RunUntil(TimeNs::Seconds(10));
  EXPECT_EQ(loop_.processed(), events);
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 100, 1)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->arrival, TimeNs::Seconds(10));
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->finished,
            TimeNs::Seconds(10) + cost_.Estimate(Shape(100, 0, 0, 1)));
  EXPECT_EQ(engine_->gauges().num_running_reqs, 0);
  EXPECT_EQ(engine_->gauges().num_queue_reqs, 0);
}

TEST_F(EngineModelTest, RejectsWhatTheSchedulerRejects) {
  Build();
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 100, 1)).ok());
  EXPECT_FALSE(engine_->Submit(MakeRequest(1, 100, 1)).ok());
  EXPECT_FALSE(engine_->Submit(MakeRequest(2, 0, 1)).ok());
  EXPECT_EQ(engine_->FindRecord(RequestId(2)), nullptr);
  loop_.RunUntilIdle();
  EXPECT_EQ(engine_->completion_order().size(), 1u);
}

// A request that could never fit (one of 2^63-1 output tokens, or more than the device tier)
// completes at once as rejected instead of failing the run or being retracted forever; the
// requests around it are served as usual.
TEST_F(EngineModelTest, RefusesWhatCanNeverFitAsACompletedRejection) {
  Build(DefaultOptions(/*device_blocks=*/64));
  SubmitAt(TimeNs(0), MakeRequest(1, 100, 4));
  SubmitAt(TimeNs(0), MakeRequest(2, 100, std::numeric_limits<int64_t>::max()));
  SubmitAt(TimeNs::Millis(5), MakeRequest(3, 64 * kTokensPerBlock, 1));
  SubmitAt(TimeNs::Millis(5), MakeRequest(4, 100, 4));
  loop_.RunUntilIdle();
  for (int64_t id = 1; id <= 4; ++id) EXPECT_EQ(completions_[id], 1) << "request " << id;
  for (int64_t id : {2, 3}) {
    const EngineRequestRecord* record = engine_->FindRecord(RequestId(id));
    ASSERT_NE(record, nullptr);
    EXPECT_TRUE(record->report.rejected);
    EXPECT_EQ(record->finished, record->arrival) << "refused at once";
    EXPECT_FALSE(record->first_scheduled.has_value());
    EXPECT_EQ(record->report.output_tokens, 0);
  }
  EXPECT_FALSE(engine_->FindRecord(RequestId(4))->report.rejected);
  EXPECT_EQ(engine_->FindRecord(RequestId(4))->report.output_tokens, 4);
  EXPECT_EQ(engine_->completion_order().size(), 4u);
  EXPECT_EQ(engine_->in_flight(), 0);
  // The scheduler retired every finished request; the engine's records are the history.
  EXPECT_EQ(engine_->engine().num_held(), 0);
  EXPECT_TRUE(engine_->engine().CheckInvariants().ok());
}

TEST(EngineModelOptionsTest, ValidatesEmptyStepTime) {
  EngineModelOptions options = DefaultOptions();
  options.empty_step_time = TimeNs(0);
  EXPECT_FALSE(options.Validate().ok());
  EventLoop loop;
  EXPECT_FALSE(EngineModel::Create(&loop, options).ok());
}

// A seeded workload on a small cache (preemption and eviction happen); returns each request's
// finish time by id.
std::map<int64_t, TimeNs> RunWorkload(int64_t num_requests, std::map<int64_t, int>* completions,
                                      int64_t* preemptions) {
  EventLoop loop;
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/256);
  options.config.scheduler.max_running_requests = 16;
  options.config.scheduler.chunked_prefill_size = 512;
  StatusOr<std::unique_ptr<EngineModel>> made = EngineModel::Create(&loop, options);
  EXPECT_TRUE(made.ok()) << made.status();
  EngineModel& engine = **made;
  std::map<int64_t, TimeNs> finished;
  engine.set_completion_callback([&](const EngineRequestRecord& record) {
    ++(*completions)[record.id.value()];
    finished[record.id.value()] = *record.finished;
  });
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> gap_us(0, 20'000);
  std::uniform_int_distribution<int64_t> prompt(16, 1200);
  std::uniform_int_distribution<int64_t> output(1, 64);
  std::uniform_int_distribution<uint64_t> prefix(1, 4);
  TimeNs at(0);
  for (int64_t id = 0; id < num_requests; ++id) {
    at += TimeNs(gap_us(rng) * 1000);
    engine::SchedulerRequest request =
        MakeRequest(id, prompt(rng), output(rng), /*content=*/prefix(rng) * 1'000'000);
    loop.Schedule(at, [&engine, request = std::move(request)]() mutable {
      Status status = engine.Submit(std::move(request));
      EXPECT_TRUE(status.ok()) << status;
    });
  }
  loop.RunUntilIdle();
  EXPECT_FALSE(engine.busy());
  EXPECT_EQ(loop.pending(), 0);
  EXPECT_TRUE(engine.engine().CheckInvariants().ok());
  EXPECT_EQ(engine.gauges().num_finished_reqs, num_requests);
  EXPECT_EQ(static_cast<int64_t>(engine.completion_order().size()), num_requests);
  for (int64_t id = 0; id < num_requests; ++id) {
    const EngineRequestRecord* record = engine.FindRecord(RequestId(id));
    EXPECT_NE(record, nullptr);
    if (record == nullptr) continue;
    EXPECT_LE(record->arrival, record->first_token.value_or(TimeNs(-1)));
    EXPECT_LE(record->first_token.value_or(TimeNs(-1)), record->finished.value_or(TimeNs(-2)));
  }
  *preemptions = engine.gauges().num_preemptions;
  return finished;
}

TEST(EngineModelWorkloadTest, EveryRequestCompletesExactlyOnce) {
  constexpr int64_t kRequests = 200;
  std::map<int64_t, int> completions;
  int64_t preemptions = 0;
  const std::map<int64_t, TimeNs> finished = RunWorkload(kRequests, &completions, &preemptions);
  ASSERT_EQ(static_cast<int64_t>(completions.size()), kRequests);
  for (const auto& [id, count] : completions) EXPECT_EQ(count, 1) << "request " << id;
  EXPECT_GT(preemptions, 0) << "the workload should exercise preemption";
}

TEST(EngineModelWorkloadTest, SameInputsGiveIdenticalCompletionTimes) {
  std::map<int64_t, int> completions_a;
  std::map<int64_t, int> completions_b;
  int64_t preemptions_a = 0;
  int64_t preemptions_b = 0;
  const std::map<int64_t, TimeNs> a = RunWorkload(120, &completions_a, &preemptions_a);
  const std::map<int64_t, TimeNs> b = RunWorkload(120, &completions_b, &preemptions_b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(preemptions_a, preemptions_b);
}

// --- Miss split, first_scheduled, fixed step time, TTL pins and the kept event log. ---

TimeNs Micros(int64_t us) { return TimeNs(us * 1000); }

// Prompt keys of `blocks` full blocks of content `content` (equal content, equal prefix).
std::vector<kv::BlockKey> ContentKeys(uint64_t content, int64_t blocks) {
  return Keys(content, blocks);
}

// The device-resident leading blocks of `keys`.
int64_t DeviceBlocks(const EngineModel& engine, const std::vector<kv::BlockKey>& keys) {
  return engine.engine().cache().Match(keys).device_blocks;
}

void ExpectSplitAddsUp(const EngineRequestRecord& record) {
  EXPECT_GE(record.cold_tokens, 0) << "request " << record.id;
  EXPECT_GE(record.evicted_recompute_tokens, 0) << "request " << record.id;
  EXPECT_EQ(record.cold_tokens + record.evicted_recompute_tokens, record.report.uncached_tokens)
      << "request " << record.id;
}

TEST_F(EngineModelTest, FirstRequestIsAllCold) {
  Build(DefaultOptions(/*device_blocks=*/64));
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock + 5, 2, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* record = engine_->FindRecord(RequestId(1));
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->report.uncached_tokens, 8 * kTokensPerBlock + 5);
  EXPECT_EQ(record->cold_tokens, 8 * kTokensPerBlock + 5);
  EXPECT_EQ(record->evicted_recompute_tokens, 0);
}

TEST_F(EngineModelTest, RecomputedLastBlockOfAStillCachedPromptIsCold) {
  Build(DefaultOptions(/*device_blocks=*/64));
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  // Nothing was ever lost: the last block (recomputed for the last prompt token) is cold.
  EXPECT_EQ(second->report.uncached_tokens, kTokensPerBlock);
  EXPECT_EQ(second->cold_tokens, kTokensPerBlock);
  EXPECT_EQ(second->evicted_recompute_tokens, 0);
}

// A computes 8 blocks; B (disjoint, 12 blocks) evicts some of them from a 16-block device;
// C repeats A's 8 blocks and adds 2 new ones: the evicted ones are eviction regret, the 2 new
// ones cold.
TEST_F(EngineModelTest, MissSplitsIntoColdAndEvictedRecompute) {
  Build(DefaultOptions(/*device_blocks=*/16));
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_EQ(DeviceBlocks(*engine_, a_keys), 8);
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  const int64_t kept = DeviceBlocks(*engine_, a_keys);
  ASSERT_GT(kept, 0) << "the scenario needs a partial eviction of A";
  ASSERT_LT(kept, 8) << "the scenario needs B to evict some of A";
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 10 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();

  const EngineRequestRecord* a = engine_->FindRecord(RequestId(1));
  const EngineRequestRecord* b = engine_->FindRecord(RequestId(2));
  const EngineRequestRecord* c = engine_->FindRecord(RequestId(3));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a->cold_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(b->cold_tokens, 12 * kTokensPerBlock);
  EXPECT_EQ(b->evicted_recompute_tokens, 0);
  EXPECT_EQ(c->report.cached_device_tokens, kept * kTokensPerBlock);
  EXPECT_EQ(c->evicted_recompute_tokens, (8 - kept) * kTokensPerBlock);
  EXPECT_EQ(c->cold_tokens, 2 * kTokensPerBlock);
  for (const EngineRequestRecord* r : {a, b, c}) ExpectSplitAddsUp(*r);
}

TEST_F(EngineModelTest, BlocksOffloadedToTheHostAreNotLost) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
  options.config.kv_pool.hicache_tokens = 64 * kTokensPerBlock;
  Build(options);
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  ASSERT_LT(DeviceBlocks(*engine_, ContentKeys(1000, 8)), 8) << "B must push A off the device";
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 10 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* c = engine_->FindRecord(RequestId(3));
  ASSERT_NE(c, nullptr);
  EXPECT_GT(c->report.cached_host_tokens, 0) << "A's blocks came back from the host";
  EXPECT_EQ(c->cached_tokens(), 8 * kTokensPerBlock);
  EXPECT_EQ(c->evicted_recompute_tokens, 0);
  EXPECT_EQ(c->cold_tokens, 2 * kTokensPerBlock);
}

TEST_F(EngineModelTest, BlocksReleasedBySessionCloseCountAsEvictedRecompute) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/64);
  options.config.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  Build(options);
  engine::SchedulerRequest first = MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000);
  first.kv_options.session = SessionId(7);
  ASSERT_TRUE(engine_->Submit(std::move(first)).ok());
  loop_.RunUntilIdle();
  ASSERT_GT(engine_->CloseSession(SessionId(7)), 0);
  ASSERT_EQ(DeviceBlocks(*engine_, ContentKeys(1000, 8)), 0);
  // The close happened between steps: the next admission must still see its releases.
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->report.uncached_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(second->evicted_recompute_tokens, 8 * kTokensPerBlock);
  EXPECT_EQ(second->cold_tokens, 0);
}

TEST_F(EngineModelTest, FirstScheduledIsTheStartOfTheAdmittingStep) {
  EngineModelOptions options = DefaultOptions();
  options.config.scheduler.max_running_requests = 1;
  options.fixed_step_time = TimeNs::Millis(1);
  Build(options);
  SubmitAt(TimeNs(0), MakeRequest(1, 100, 3));
  SubmitAt(TimeNs(0), MakeRequest(2, 100, 2));
  loop_.RunUntilIdle();
  const EngineRequestRecord* first = engine_->FindRecord(RequestId(1));
  const EngineRequestRecord* second = engine_->FindRecord(RequestId(2));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  // Request 1 runs alone: admitted at 0, first token at 1 ms, done after 3 steps.
  EXPECT_EQ(first->first_scheduled, TimeNs(0));
  EXPECT_EQ(first->first_token, TimeNs::Millis(1));
  EXPECT_EQ(first->finished, TimeNs::Millis(3));
  // Request 2 waits for the only slot: admitted at a step start at or after request 1's
  // last step started, and its prefill (one step) emits the first token.
  ASSERT_TRUE(second->first_scheduled.has_value());
  EXPECT_GE(*second->first_scheduled, TimeNs::Millis(2));
  EXPECT_LE(*second->first_scheduled, TimeNs::Millis(3));
  EXPECT_EQ(second->first_scheduled->ns() % TimeNs::Millis(1).ns(), 0) << "a step boundary";
  EXPECT_EQ(second->first_token, *second->first_scheduled + TimeNs::Millis(1));
  EXPECT_EQ(second->finished, *second->first_token + TimeNs::Millis(1));
  EXPECT_EQ(second->report.queue_steps, second->first_scheduled->ns() / TimeNs::Millis(1).ns());
  for (const EngineRequestRecord* r : {first, second}) {
    ASSERT_TRUE(r->first_scheduled.has_value());
    EXPECT_LE(r->arrival, *r->first_scheduled);
    EXPECT_LT(*r->first_scheduled, r->first_token.value_or(TimeNs(-1)));
  }
}

TEST_F(EngineModelTest, FixedStepTimeMakesEveryStepLastExactlyThatLong) {
  EngineModelOptions options = DefaultOptions();
  options.fixed_step_time = Micros(250);
  Build(options);
  // A heavy prefill and a light one: with the cost model they would take very different times.
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8000, 5)).ok());
  loop_.RunUntilIdle();
  const EngineRequestRecord* record = engine_->FindRecord(RequestId(1));
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(engine_->num_steps(), 5) << "one prefill step and four decodes";
  EXPECT_EQ(record->first_token, Micros(250));
  EXPECT_EQ(*record->finished - record->arrival, Micros(250 * 5));
  EXPECT_EQ(engine_->busy_time(), Micros(250 * 5));
  EXPECT_NE(cost_.Estimate(Shape(8000, 0, 0, 1)), Micros(250));

  // Overlapping requests: the engine is busy from the first arrival to the last finish, so the
  // span is exactly steps x the fixed time.
  const TimeNs start = loop_.now() + TimeNs::Millis(10);
  const int64_t steps_before = engine_->num_steps();
  SubmitAt(start, MakeRequest(2, 3000, 7));
  SubmitAt(start + Micros(300), MakeRequest(3, 50, 2));
  loop_.RunUntilIdle();
  const int64_t steps = engine_->num_steps() - steps_before;
  EXPECT_EQ(loop_.now() - start, Micros(250 * steps));
  EXPECT_EQ(engine_->FindRecord(RequestId(3))->first_scheduled, start + Micros(500))
      << "joins at the step boundary after its arrival";
}

// --- Aborts (SGLang's /abort_request), applied at the next step boundary. ---

// Every step lasts 1 ms, so boundaries are whole milliseconds.
class EngineAbortTest : public EngineModelTest {
 protected:
  void SetUp() override {
    EngineModelOptions options = DefaultOptions(/*device_blocks=*/1024);
    options.fixed_step_time = TimeNs::Millis(1);
    options.config.scheduler.max_running_requests = 1;
    Build(options);
  }

  const EngineRequestRecord& Record(int64_t id) const {
    const EngineRequestRecord* record = engine_->FindRecord(RequestId(id));
    EXPECT_NE(record, nullptr) << "request " << id;
    return *record;
  }
};

TEST_F(EngineAbortTest, ARunningRequestEndsAtTheBoundaryWithItsTokensAndKeepsItsPromptCached) {
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 100)).ok());
  // Steps start at 0, 1 and 2 ms; the one in flight at 2.5 ms still emits its token.
  loop_.RunUntil(Micros(2500));
  EXPECT_TRUE(engine_->Abort(RequestId(1)));
  loop_.RunUntil(Micros(2999));
  EXPECT_EQ(completions_[1], 0) << "not before the step in flight ends";
  loop_.RunUntil(TimeNs::Millis(3));
  EXPECT_EQ(completions_[1], 1);
  const EngineRequestRecord& record = Record(1);
  EXPECT_TRUE(record.report.aborted);
  EXPECT_FALSE(record.report.rejected);
  EXPECT_EQ(record.finished, TimeNs::Millis(3));
  EXPECT_EQ(record.first_scheduled, TimeNs(0));
  EXPECT_EQ(record.first_token, TimeNs::Millis(1));
  EXPECT_EQ(record.report.output_tokens, 3) << "the prefill's token and two decodes";
  EXPECT_EQ(record.report.uncached_tokens, 4 * kTokensPerBlock);
  EXPECT_EQ(engine_->completion_order(), std::vector<RequestId>{RequestId(1)});
  // Nothing else to do: the engine went idle at the boundary without an empty step.
  EXPECT_FALSE(engine_->busy());
  EXPECT_EQ(engine_->num_steps(), 3);
  EXPECT_EQ(engine_->in_flight(), 0);
  EXPECT_EQ(engine_->engine().num_held(), 0);
  EXPECT_TRUE(engine_->engine().CheckInvariants().ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), TimeNs::Millis(3));

  // The committed prompt blocks stay cached, as a finished request's do (the last token is
  // always recomputed, so three of the four blocks match).
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/100000)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(Record(2).cached_tokens(), 3 * kTokensPerBlock);
  EXPECT_FALSE(Record(2).report.aborted);
}

TEST_F(EngineAbortTest, AWaitingRequestLeavesTheQueueHavingComputedNothing) {
  // One running request at a time: request 2 waits behind request 1.
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 10)).ok());
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 10)).ok());
  loop_.RunUntil(Micros(1500));
  ASSERT_EQ(engine_->gauges().num_queue_reqs, 1);
  EXPECT_TRUE(engine_->Abort(RequestId(2)));
  loop_.RunUntil(TimeNs::Millis(2));
  EXPECT_EQ(completions_[2], 1);
  const EngineRequestRecord& record = Record(2);
  EXPECT_TRUE(record.report.aborted);
  EXPECT_EQ(record.finished, TimeNs::Millis(2));
  EXPECT_FALSE(record.first_scheduled.has_value());
  EXPECT_FALSE(record.first_token.has_value());
  EXPECT_EQ(record.report.output_tokens, 0);
  EXPECT_EQ(record.report.uncached_tokens, 0);
  EXPECT_EQ(record.cold_tokens + record.evicted_recompute_tokens, 0);
  EXPECT_EQ(engine_->gauges().num_queue_reqs, 0);
  // Request 1 is untouched.
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[1], 1);
  EXPECT_FALSE(Record(1).report.aborted);
  EXPECT_EQ(Record(1).report.output_tokens, 10);
  EXPECT_EQ(Record(1).finished, TimeNs::Millis(10));
  EXPECT_EQ(engine_->completion_order(), (std::vector<RequestId>{RequestId(2), RequestId(1)}));
  EXPECT_TRUE(engine_->engine().CheckInvariants().ok());
}

TEST_F(EngineAbortTest, ARequestFinishingInTheStepInFlightFinishesNormally) {
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 3)).ok());
  // The step started at 2 ms produces the third and last token.
  loop_.RunUntil(Micros(2500));
  EXPECT_FALSE(engine_->Abort(RequestId(1)));
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[1], 1);
  EXPECT_FALSE(Record(1).report.aborted);
  EXPECT_EQ(Record(1).report.output_tokens, 3);
  EXPECT_EQ(Record(1).finished, TimeNs::Millis(3));
}

TEST_F(EngineAbortTest, UnknownFinishedAndRefusedRequestsAreIgnored) {
  EXPECT_FALSE(engine_->Abort(RequestId(7))) << "never received";
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 2)).ok());
  loop_.RunUntilIdle();
  EXPECT_FALSE(engine_->Abort(RequestId(1))) << "finished";
  // Refused (it could never fit): it completes as rejected, not aborted.
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1 << 20)).ok());
  EXPECT_FALSE(engine_->Abort(RequestId(2)));
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[2], 1);
  EXPECT_TRUE(Record(2).report.rejected);
  EXPECT_FALSE(Record(2).report.aborted);
  EXPECT_EQ(engine_->num_steps(), 2);
}

TEST_F(EngineAbortTest, ARepeatedAbortEndsTheRequestOnce) {
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 100)).ok());
  loop_.RunUntil(Micros(500));
  EXPECT_TRUE(engine_->Abort(RequestId(1)));
  EXPECT_TRUE(engine_->Abort(RequestId(1)));
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[1], 1);
  EXPECT_EQ(Record(1).finished, TimeNs::Millis(1));
  EXPECT_EQ(Record(1).report.output_tokens, 1);
  EXPECT_FALSE(engine_->Abort(RequestId(1))) << "finished";
}

// Submitted and aborted at the same instant, before the step that would admit it starts: it
// ends at that boundary and the engine never steps.
TEST_F(EngineAbortTest, AnAbortBeforeTheFirstStepEndsTheRequestWithoutAStep) {
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 100)).ok());
  EXPECT_TRUE(engine_->busy()) << "the first step is scheduled";
  EXPECT_TRUE(engine_->Abort(RequestId(1)));
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[1], 1);
  EXPECT_TRUE(Record(1).report.aborted);
  EXPECT_EQ(Record(1).finished, TimeNs(0));
  EXPECT_EQ(engine_->num_steps(), 0);
  EXPECT_FALSE(engine_->busy());
}

// A completion callback that submits on the same engine: after an abort that leaves nothing
// to do, the submit wakes the engine again; after one that leaves work, the request joins the
// step starting at the boundary.
TEST_F(EngineAbortTest, ACallbackOfAnAbortedRequestMaySubmit) {
  engine_->set_completion_callback([this](const EngineRequestRecord& record) {
    ++completions_[record.id.value()];
    if (record.id == RequestId(1)) {
      ASSERT_TRUE(engine_->Submit(MakeRequest(3, 4 * kTokensPerBlock, 2)).ok());
    }
  });
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 4 * kTokensPerBlock, 100)).ok());
  loop_.RunUntil(Micros(1500));
  EXPECT_TRUE(engine_->Abort(RequestId(1)));
  loop_.RunUntilIdle();
  EXPECT_EQ(completions_[1], 1);
  EXPECT_EQ(completions_[3], 1);
  EXPECT_EQ(Record(3).arrival, TimeNs::Millis(2));
  EXPECT_EQ(Record(3).first_scheduled, TimeNs::Millis(2));
  EXPECT_EQ(Record(3).finished, TimeNs::Millis(4));
  EXPECT_TRUE(engine_->engine().CheckInvariants().ok());
}

TEST(EngineModelOptionsTest, ValidatesFixedStepTime) {
  EngineModelOptions options = DefaultOptions();
  options.fixed_step_time = TimeNs(0);
  EXPECT_FALSE(options.Validate().ok());
  options.fixed_step_time = TimeNs::Millis(1001);
  EXPECT_FALSE(options.Validate().ok());
  options.fixed_step_time = TimeNs(1);
  EXPECT_TRUE(options.Validate().ok());
  options.fixed_step_time = TimeNs::Millis(1000);
  EXPECT_TRUE(options.Validate().ok());
}

TEST_F(EngineModelTest, KeptEventsRecordTheStoredPromptBlocks) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
  options.keep_events = true;
  Build(options);
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  std::vector<kv::BlockKey> stored;
  for (const kv::KvEvent& event : engine_->events()) {
    EXPECT_EQ(event.kind, kv::KvEventKind::kStored);
    stored.push_back(event.key);
  }
  EXPECT_EQ(stored, ContentKeys(1000, 8));

  // B evicts part of A: the kept log names exactly the blocks A no longer has.
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  const int64_t kept = DeviceBlocks(*engine_, a_keys);
  std::unordered_set<kv::BlockKey> lost;
  for (const kv::KvEvent& event : engine_->events()) {
    if (event.kind == kv::KvEventKind::kDropped) lost.insert(event.key);
  }
  EXPECT_EQ(static_cast<int64_t>(lost.size()), 8 - kept);
  for (int64_t i = kept; i < 8; ++i) {
    EXPECT_TRUE(lost.contains(a_keys[static_cast<size_t>(i)])) << "block " << i;
  }
}

TEST_F(EngineModelTest, EventsAreNotKeptByDefault) {
  Build(DefaultOptions(/*device_blocks=*/16));
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 12 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  EXPECT_TRUE(engine_->events().empty());
  // The miss split still works without the kept log.
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 8 * kTokensPerBlock, 1, /*content=*/1000)).ok());
  loop_.RunUntilIdle();
  EXPECT_GT(engine_->FindRecord(RequestId(3))->evicted_recompute_tokens, 0);
}

class EnginePinTest : public EngineModelTest {
 protected:
  // Runs a request of `content` (8 blocks) to completion; its blocks stay cached.
  void Warm(int64_t id, uint64_t content, std::optional<ConversationId> conversation = {}) {
    engine::SchedulerRequest request = MakeRequest(id, 8 * kTokensPerBlock, 1, content);
    request.kv_options.conversation = conversation;
    ASSERT_TRUE(engine_->Submit(std::move(request)).ok());
    loop_.RunUntilIdle();
  }
  kv::Priority PriorityOf(kv::BlockKey key) const {
    StatusOr<kv::Priority> priority = engine_->engine().cache().GetPriority(key);
    EXPECT_TRUE(priority.ok()) << priority.status();
    return priority.ok() ? *priority : -1;
  }
  // Every block of `keys` has `priority`.
  void ExpectPriority(const std::vector<kv::BlockKey>& keys, kv::Priority priority) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(PriorityOf(keys[i]), priority) << "block " << i << " at " << loop_.now();
    }
  }
};

TEST_F(EnginePinTest, PinHoldsTheMaxPriorityUntilTheTtlThenRestoresTheDefault) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  ExpectPriority(keys, kv::kDefaultPriority);
  const TimeNs pinned_at = loop_.now();
  EXPECT_EQ(engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10)), 8);
  ExpectPriority(keys, kv::kMaxPriority);
  EXPECT_EQ(engine_->pin_counters().pins, 1);
  loop_.RunUntil(pinned_at + TimeNs::Seconds(10) - TimeNs(1));
  ExpectPriority(keys, kv::kMaxPriority);
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), pinned_at + TimeNs::Seconds(10));
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->pin_counters().expired, 1);
  EXPECT_EQ(engine_->pin_counters().returned, 0);
}

TEST_F(EnginePinTest, PinCountsOnlyCachedBlocks) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  std::vector<kv::BlockKey> keys = ContentKeys(1000, 10);  // Two blocks were never computed.
  EXPECT_EQ(engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(1)), 8);
  EXPECT_EQ(engine_->PinPrefix(ConversationId(6), ContentKeys(9000, 4), TimeNs::Seconds(1)), 0);
  EXPECT_EQ(engine_->pin_counters().pins, 2);
}

TEST_F(EnginePinTest, ALaterPinOfTheConversationSupersedesTheEarlierExpiry) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  const TimeNs t0 = loop_.now();
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  loop_.RunUntil(t0 + TimeNs::Seconds(5));
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  loop_.RunUntil(t0 + TimeNs::Seconds(12));
  ExpectPriority(keys, kv::kMaxPriority);  // The first expiry did nothing.
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  loop_.RunUntilIdle();
  EXPECT_EQ(loop_.now(), t0 + TimeNs::Seconds(15));
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->pin_counters().pins, 2);
  EXPECT_EQ(engine_->pin_counters().expired, 1);
}

TEST_F(EnginePinTest, ConversationReturningBeforeExpiryCountsAsReturned) {
  Build(DefaultOptions(/*device_blocks=*/64));
  Warm(1, 1000, ConversationId(5));
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  const TimeNs t0 = loop_.now();
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(10));
  // Another conversation's request does not count; the pinned one's does, once.
  SubmitAt(t0 + TimeNs::Seconds(1), [] {
    engine::SchedulerRequest r = MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/3000);
    r.kv_options.conversation = ConversationId(6);
    return r;
  }());
  for (int64_t id : {3, 4}) {
    engine::SchedulerRequest r = MakeRequest(id, 9 * kTokensPerBlock, 1, /*content=*/1000);
    r.kv_options.conversation = ConversationId(5);
    SubmitAt(t0 + TimeNs::Millis(1000 * (id - 1)), std::move(r));
  }
  loop_.RunUntilIdle();
  EXPECT_EQ(engine_->pin_counters().pins, 1);
  EXPECT_EQ(engine_->pin_counters().returned, 1);
  EXPECT_EQ(engine_->pin_counters().expired, 0);
  EXPECT_EQ(engine_->FindRecord(RequestId(3))->report.cached_device_tokens, 8 * kTokensPerBlock);
  // The expiry still restores the default priority.
  EXPECT_EQ(loop_.now(), t0 + TimeNs::Seconds(10));
  ExpectPriority(keys, kv::kDefaultPriority);
}

// The point of a pin: under pressure the pinned prefix outlives a newer unpinned one.
TEST_F(EnginePinTest, PinnedPrefixSurvivesEvictionThatTakesANewerUnpinnedOne) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);  // A: 8 blocks, the oldest.
  engine::SchedulerRequest x = MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000);
  ASSERT_TRUE(engine_->Submit(std::move(x)).ok());
  loop_.RunUntilIdle();
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(10));
  // B needs 8 blocks with 4 free: 4 must go. LRU alone would take A's (older) blocks.
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 8 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 8);
  EXPECT_EQ(DeviceBlocks(*engine_, ContentKeys(2000, 4)), 0);
}

// Pinning re-queues a chain leaf first: the root stays the most recently used of the chain, so
// an eviction that reaches the pinned chain takes its leaf, not its root (which would drop the
// whole chain). B needs 9 blocks with 8 free: 1 of A's 8 goes, 7 stay.
TEST_F(EnginePinTest, PinnedChainLosesItsLeafNotItsRootUnderEviction) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(100));
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->report.output_tokens, 1);
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
}

// The same at expiry: the blocks return to the default priority leaf first.
TEST_F(EnginePinTest, ExpiredChainLosesItsLeafNotItsRootUnderEviction) {
  Build(DefaultOptions(/*device_blocks=*/16));
  Warm(1, 1000);
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(1));
  loop_.RunUntilIdle();
  ExpectPriority(a_keys, kv::kDefaultPriority);
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntilIdle();
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
}

// At expiry a pin returns its blocks to the most recently used end (leaf first), with or
// without continuum_pins: under LRU the program that outlived its TTL usually still returns.
// A is older than C; both idle; B's one eviction takes C's leaf.
TEST_F(EnginePinTest, ExpiryReturnsTheChainToTheMostRecentlyUsedEnd) {
  for (const bool continuum : {false, true}) {
    SCOPED_TRACE(continuum ? "continuum" : "fixed");
    EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
    options.config.continuum_pins = continuum;
    Build(options);
    Warm(1, 1000);
    ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000)).ok());
    loop_.RunUntilIdle();
    const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
    const std::vector<kv::BlockKey> c_keys = ContentKeys(2000, 4);
    engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(1));
    loop_.RunUntilIdle();
    // B needs 5 blocks with 4 free: one block goes.
    ASSERT_TRUE(engine_->Submit(MakeRequest(3, 5 * kTokensPerBlock, 1, /*content=*/3000)).ok());
    loop_.RunUntilIdle();
    EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 8);
    EXPECT_EQ(DeviceBlocks(*engine_, c_keys), 3);
  }
}

// continuum_pins: a returning request ends its conversation's pin when it is admitted.
TEST_F(EnginePinTest, ContinuumPinEndsWhenItsConversationIsAdmittedAgain) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/64);
  options.config.continuum_pins = true;
  Build(options);
  Warm(1, 1000, ConversationId(5));
  const std::vector<kv::BlockKey> keys = ContentKeys(1000, 8);
  engine_->PinPrefix(ConversationId(5), keys, TimeNs::Seconds(100));
  EXPECT_EQ(engine_->pinned_tokens(), 8 * kTokensPerBlock);
  engine::SchedulerRequest next = MakeRequest(2, 9 * kTokensPerBlock, 1, /*content=*/1000);
  next.kv_options.conversation = ConversationId(5);
  ASSERT_TRUE(engine_->Submit(std::move(next)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->pin_counters().returned, 1);
  EXPECT_EQ(engine_->pinned_tokens(), 0);
  ExpectPriority(keys, kv::kDefaultPriority);
  EXPECT_EQ(engine_->FindRecord(RequestId(2))->report.cached_device_tokens, 8 * kTokensPerBlock);
}

// continuum_pins: when waiting work would have to evict pinned blocks to get one prefill
// chunk, pins are released oldest first until it would not, and the released chain becomes
// the first victim (from its leaf), before older unpinned blocks.
TEST_F(EnginePinTest, ContinuumReleasesTheOldestPinUnderPressure) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/16);
  options.config.continuum_pins = true;
  options.config.scheduler.chunked_prefill_size = 8 * kTokensPerBlock;
  Build(options);
  ASSERT_TRUE(engine_->Submit(MakeRequest(4, 2 * kTokensPerBlock, 1, /*content=*/4000)).ok());
  loop_.RunUntilIdle();  // D: 2 unpinned blocks, the oldest.
  Warm(1, 1000, ConversationId(5));
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 4 * kTokensPerBlock, 1, /*content=*/2000)).ok());
  loop_.RunUntilIdle();
  const std::vector<kv::BlockKey> a_keys = ContentKeys(1000, 8);
  const std::vector<kv::BlockKey> c_keys = ContentKeys(2000, 4);
  const std::vector<kv::BlockKey> d_keys = ContentKeys(4000, 2);
  engine_->PinPrefix(ConversationId(5), a_keys, TimeNs::Seconds(100));
  engine_->PinPrefix(ConversationId(6), c_keys, TimeNs::Seconds(100));
  EXPECT_DOUBLE_EQ(engine_->kv_pressure(), 12.0 / 16.0);
  // 2 free blocks and 2 unpinned evictable ones: fewer than one chunk of 8 blocks. Releasing
  // A (the oldest pin) is enough. The request needs 3 blocks: one eviction, A's leaf.
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 3 * kTokensPerBlock, 1, /*content=*/3000)).ok());
  loop_.RunUntil(loop_.now() + TimeNs::Seconds(1));
  EXPECT_EQ(engine_->pin_counters().unpinned_under_pressure, 1);
  EXPECT_EQ(engine_->pinned_tokens(), 4 * kTokensPerBlock);
  ExpectPriority(c_keys, kv::kMaxPriority);
  EXPECT_EQ(DeviceBlocks(*engine_, a_keys), 7);
  EXPECT_EQ(DeviceBlocks(*engine_, d_keys), 2);
  ExpectPriority({a_keys.begin(), a_keys.begin() + 7}, kv::kDefaultPriority);
}

// Randomized: on a small cache with preemption and eviction, every request's split adds up,
// and its evicted-recompute blocks are exactly the uncached blocks of its prompt that the kept
// event log shows this engine stored and then lost by the step that admitted it.
TEST(EngineModelMissSplitTest, MatchesAReferenceOverTheKeptEventLog) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EventLoop loop;
    EngineModelOptions options = DefaultOptions(/*device_blocks=*/96);
    options.keep_events = true;
    options.config.scheduler.max_running_requests = 6;
    options.config.scheduler.chunked_prefill_size = 256;
    StatusOr<std::unique_ptr<EngineModel>> made = EngineModel::Create(&loop, options);
    ASSERT_TRUE(made.ok()) << made.status();
    EngineModel& engine = **made;
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> gap_us(0, 30'000);
    std::uniform_int_distribution<int64_t> prompt(16, 640);
    std::uniform_int_distribution<int64_t> output(1, 24);
    std::uniform_int_distribution<uint64_t> prefix(1, 5);
    constexpr int64_t kRequests = 150;
    std::unordered_map<int64_t, std::vector<kv::BlockKey>> keys_of;
    TimeNs at(0);
    for (int64_t id = 0; id < kRequests; ++id) {
      at += TimeNs(gap_us(rng) * 1000);
      engine::SchedulerRequest request =
          MakeRequest(id, prompt(rng), output(rng), /*content=*/prefix(rng) * 1'000'000);
      keys_of[id] = request.prompt_keys;
      loop.Schedule(at, [&engine, request = std::move(request)]() mutable {
        Status status = engine.Submit(std::move(request));
        EXPECT_TRUE(status.ok()) << status;
      });
    }
    loop.RunUntilIdle();
    ASSERT_EQ(engine.gauges().num_finished_reqs, kRequests);

    int64_t total_cold = 0;
    int64_t total_evicted = 0;
    for (int64_t id = 0; id < kRequests; ++id) {
      const EngineRequestRecord* record = engine.FindRecord(RequestId(id));
      ASSERT_NE(record, nullptr);
      ExpectSplitAddsUp(*record);
      ASSERT_TRUE(record->report.first_scheduled.has_value());
      ASSERT_TRUE(record->first_scheduled.has_value());
      EXPECT_LE(record->arrival, *record->first_scheduled);
      EXPECT_LT(*record->first_scheduled, record->first_token.value_or(TimeNs(-1)));
      const Step admitted = *record->report.first_scheduled;
      // Reference: keys stored, and keys lost, by the end of the admitting step.
      std::unordered_set<kv::BlockKey> stored;
      std::unordered_set<kv::BlockKey> lost;
      for (const kv::KvEvent& event : engine.events()) {
        if (event.step > admitted) break;
        if (event.kind == kv::KvEventKind::kStored) stored.insert(event.key);
        if (event.kind == kv::KvEventKind::kDropped || event.kind == kv::KvEventKind::kEvicted ||
            event.kind == kv::KvEventKind::kReleased) {
          lost.insert(event.key);
        }
      }
      const std::vector<kv::BlockKey>& keys = keys_of[id];
      const int64_t cached_blocks = record->cached_tokens() / kTokensPerBlock;
      int64_t expected_lost = 0;
      for (size_t i = static_cast<size_t>(cached_blocks); i < keys.size(); ++i) {
        if (!lost.contains(keys[i])) continue;
        EXPECT_TRUE(stored.contains(keys[i]))
            << "request " << id << " block " << i << " was lost without ever being computed";
        ++expected_lost;
      }
      EXPECT_EQ(record->evicted_recompute_tokens,
                std::min(record->report.uncached_tokens, expected_lost * kTokensPerBlock))
          << "request " << id;
      total_cold += record->cold_tokens;
      total_evicted += record->evicted_recompute_tokens;
    }
    EXPECT_GT(total_evicted, 0) << "the workload should make the engine recompute lost blocks";
    EXPECT_GT(total_cold, 0);
    EXPECT_TRUE(engine.engine().CheckInvariants().ok());
  }
}

}  // namespace
}  // namespace agentkv::sim
