// Tests of EngineModel: step timing against the cost model, arrivals mid-step, idleness,
// conservation of requests and determinism, first_scheduled, fixed step time and the kept event
// log. Aborts, the miss split and TTL pins have suites of their own (engine_model_*_test.cc).
#include "agentkv/sim/fleet/engine_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/retention.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "engine_model_fixture.h"

namespace agentkv::sim {
namespace {

using namespace engine_model_testing;

engine::StepShape Shape(int64_t prefill, int64_t decode, int64_t context, int64_t requests) {
  return engine::StepShape{.prefill_tokens = prefill,
                           .decode_tokens = decode,
                           .context_tokens = context,
                           .num_requests = requests};
}

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

TEST_F(EngineModelTest, WithoutKeptRecordsARequestIsForgottenOnceItsCallbackReturned) {
  EngineModelOptions options = DefaultOptions(/*device_blocks=*/64);
  options.keep_finished_records = false;
  Build(options);
  std::vector<int64_t> seen;
  engine_->set_completion_callback([&](const EngineRequestRecord& record) {
    // The callback is the record's last sight: it is still there, finished.
    const EngineRequestRecord* found = engine_->FindRecord(record.id);
    ASSERT_NE(found, nullptr) << "request " << record.id;
    EXPECT_TRUE(found->finished.has_value());
    seen.push_back(record.id.value());
  });
  // Every way a request ends: served (1), refused as larger than the engine (2), aborted while
  // it runs (3).
  ASSERT_TRUE(engine_->Submit(MakeRequest(1, 160, 2)).ok());
  ASSERT_TRUE(engine_->Submit(MakeRequest(2, 64 * kTokensPerBlock, 1)).ok());
  ASSERT_TRUE(engine_->Submit(MakeRequest(3, 160, 500)).ok());
  loop_.Schedule(TimeNs::Millis(50), [&] { EXPECT_TRUE(engine_->Abort(RequestId(3))); });
  loop_.RunUntilIdle();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3}));
  for (const int64_t id : seen) EXPECT_EQ(engine_->FindRecord(RequestId(id)), nullptr) << id;
  EXPECT_TRUE(engine_->completion_order().empty());
  EXPECT_EQ(engine_->in_flight(), 0);
}

}  // namespace
}  // namespace agentkv::sim
