// Tests of EngineModel: step timing against the cost model, arrivals mid-step, idleness,
// conservation of requests and determinism.
#include "agentkv/sim/engine_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
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

EngineModelOptions DefaultOptions(int64_t device_blocks = 0) {
  EngineModelOptions options;
  options.cache.tokens_per_block = kTokensPerBlock;
  options.cache.device_blocks = device_blocks;
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
    StatusOr<std::unique_ptr<EngineModel>> engine = EngineModel::Create(&loop_, cost_, options);
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
  EXPECT_EQ(engine_->scheduler().cache().options().device_blocks,
            cost_.KvCapacityBlocks(kTokensPerBlock));
  EXPECT_EQ(engine_->gauges().max_total_num_tokens,
            cost_.KvCapacityBlocks(kTokensPerBlock) * kTokensPerBlock);
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

TEST(EngineModelOptionsTest, ValidatesEmptyStepTime) {
  EngineModelOptions options = DefaultOptions();
  options.empty_step_time = TimeNs(0);
  EXPECT_FALSE(options.Validate().ok());
  EventLoop loop;
  EXPECT_FALSE(EngineModel::Create(&loop, Llama8bH100(), options).ok());
}

// A seeded workload on a small cache (preemption and eviction happen); returns each request's
// finish time by id.
std::map<int64_t, TimeNs> RunWorkload(int64_t num_requests, std::map<int64_t, int>* completions,
                                      int64_t* preemptions) {
  EventLoop loop;
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/256);
  options.scheduler.max_running_requests = 16;
  options.scheduler.chunked_prefill_size = 512;
  StatusOr<std::unique_ptr<EngineModel>> made = EngineModel::Create(&loop, Llama8bH100(), options);
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
  EXPECT_TRUE(engine.scheduler().CheckInvariants().ok());
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

}  // namespace
}  // namespace agentkv::sim
