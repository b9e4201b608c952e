// Tests of StepScheduler: step tables of arrivals and expected batch sizes, chunked prefill,
// the token budget, prefix reuse, preemption under KV exhaustion, gauges and options.
// Every step is followed by CheckInvariants().
#include "agentkv/engine/step_scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace agentkv::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kTokensPerBlock = 4;

// One row of a step table: requests submitted before the step, and the queue sizes after it.
struct StepRow {
  int64_t step;
  std::vector<int64_t> arrivals;
  int64_t expect_running;
  int64_t expect_waiting;
};

class StepSchedulerTest : public ::testing::Test {
 protected:
  void Build(int64_t device_blocks, StepSchedulerOptions options = {}) {
    kv::KvCacheOptions kv_options;
    kv_options.tokens_per_block = kTokensPerBlock;
    kv_options.device_blocks = device_blocks;
    kv_options.hash_seed = 7;
    StatusOr<kv::KvCacheManager> cache = kv::KvCacheManager::Create(kv_options);
    ASSERT_TRUE(cache.ok()) << cache.status();
    StatusOr<StepScheduler> scheduler = StepScheduler::Create(options, std::move(*cache));
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    scheduler_.emplace(std::move(*scheduler));
  }

  StepScheduler& sched() { return *scheduler_; }

  // Chained keys of `n` blocks whose ids start at `first_id` (equal ids, equal prefix).
  std::vector<kv::BlockKey> Keys(uint64_t first_id, int64_t n) {
    std::vector<kv::BlockKey> keys;
    kv::BlockKey parent = sched().cache().hasher().RootKey();
    for (int64_t i = 0; i < n; ++i) {
      parent = kv::BlockKeyHasher::IdBlockKey(parent, first_id + static_cast<uint64_t>(i));
      keys.push_back(parent);
    }
    return keys;
  }

  // Submits request `id` whose prompt has distinct content per id unless `prefix_id` is given.
  void Submit(int64_t id, int64_t prompt_tokens, int64_t max_new_tokens, uint64_t prefix_id = 0) {
    SchedulerRequest request;
    request.id = RequestId(id);
    const uint64_t content = prefix_id != 0 ? prefix_id : static_cast<uint64_t>(id) * 1000;
    request.prompt_keys = Keys(content, prompt_tokens / kTokensPerBlock);
    request.prompt_tokens = prompt_tokens;
    request.max_new_tokens = max_new_tokens;
    Status status = sched().Submit(std::move(request));
    ASSERT_TRUE(status.ok()) << status;
  }

  // Submits request `id` of `prompt_tokens` prompt tokens whose sequence (prompt + output) is
  // the chain Keys(content_id, ...): its full prompt blocks as prompt keys and the next
  // `output_blocks` blocks as output keys.
  void SubmitWithOutput(int64_t id, int64_t prompt_tokens, int64_t max_new_tokens,
                        uint64_t content_id, int64_t output_blocks) {
    const int64_t prompt_blocks = prompt_tokens / kTokensPerBlock;
    std::vector<kv::BlockKey> keys = Keys(content_id, prompt_blocks + output_blocks);
    SchedulerRequest request;
    request.id = RequestId(id);
    request.prompt_keys.assign(keys.begin(), keys.begin() + prompt_blocks);
    request.output_keys.assign(keys.begin() + prompt_blocks, keys.end());
    request.prompt_tokens = prompt_tokens;
    request.max_new_tokens = max_new_tokens;
    Status status = sched().Submit(std::move(request));
    ASSERT_TRUE(status.ok()) << status;
  }

  StepResult RunStep() {
    StepResult result = sched().Step();
    for (RequestId id : result.finished) ++finish_count_[id.value()];
    Status status = sched().CheckInvariants();
    EXPECT_TRUE(status.ok()) << status << " after " << result.step;
    return result;
  }

  // Plays `table`; every arrival has `prompt_tokens` and `max_new_tokens`.
  void Play(const std::vector<StepRow>& table, int64_t prompt_tokens, int64_t max_new_tokens) {
    for (const StepRow& row : table) {
      ASSERT_EQ(sched().current_step().value(), row.step);
      for (int64_t id : row.arrivals) Submit(id, prompt_tokens, max_new_tokens);
      RunStep();
      EXPECT_EQ(sched().num_running(), row.expect_running) << "step " << row.step;
      EXPECT_EQ(sched().num_waiting(), row.expect_waiting) << "step " << row.step;
    }
  }

  // Steps until nothing runs or waits; returns the steps taken.
  int64_t Drain(int64_t max_steps = 1000) {
    int64_t steps = 0;
    while ((sched().num_running() > 0 || sched().num_waiting() > 0) && steps < max_steps) {
      RunStep();
      ++steps;
    }
    EXPECT_LT(steps, max_steps) << "scheduler did not drain";
    return steps;
  }

  std::optional<StepScheduler> scheduler_;
  std::map<int64_t, int> finish_count_;
};

TEST_F(StepSchedulerTest, LoneRequestPrefillsThenDecodesToCompletion) {
  Build(/*device_blocks=*/16);
  // Prompt 8, 3 output tokens: the prefill emits token 1 (step 0), decodes emit 2 and 3.
  Play({{0, {1}, 1, 0}, {1, {}, 1, 0}, {2, {}, 0, 0}, {3, {}, 0, 0}}, 8, 3);
  const RequestReport* report = sched().FindReport(RequestId(1));
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->queue_steps, 0);
  EXPECT_EQ(report->first_token, Step(0));
  EXPECT_EQ(report->finished, Step(2));
  EXPECT_EQ(report->output_tokens, 3);
  EXPECT_EQ(report->uncached_tokens, 8);
  EXPECT_EQ(report->cached_device_tokens, 0);
  EXPECT_EQ(finish_count_[1], 1);
}

TEST_F(StepSchedulerTest, StepResultReportsPrefillAndDecodeShape) {
  Build(16);
  Submit(1, 8, 2);
  StepResult first = RunStep();
  EXPECT_EQ(first.prefill_tokens, 8);
  EXPECT_EQ(first.decode_tokens, 0);
  ASSERT_EQ(first.batch.size(), 1u);
  EXPECT_EQ(first.batch[0].context_tokens, 0);
  EXPECT_TRUE(first.batch[0].emitted_token);
  EXPECT_THAT(first.admitted, ElementsAre(RequestId(1)));
  StepResult second = RunStep();
  EXPECT_EQ(second.prefill_tokens, 0);
  EXPECT_EQ(second.decode_tokens, 1);
  ASSERT_EQ(second.batch.size(), 1u);
  EXPECT_EQ(second.batch[0].context_tokens, 8);
  EXPECT_THAT(second.finished, ElementsAre(RequestId(1)));
}

TEST_F(StepSchedulerTest, ChunkedPrefillSplitsALongPrompt) {
  StepSchedulerOptions options;
  options.chunked_prefill_size = 4;
  Build(16, options);
  Submit(1, 10, 2);
  std::vector<int64_t> prefill;
  for (int i = 0; i < 4; ++i) prefill.push_back(RunStep().prefill_tokens);
  EXPECT_THAT(prefill, ElementsAre(4, 4, 2, 0));
  const RequestReport* report = sched().FindReport(RequestId(1));
  EXPECT_EQ(report->first_token, Step(2));
  EXPECT_EQ(report->finished, Step(3));
}

TEST_F(StepSchedulerTest, TokenBudgetLimitsAdmission) {
  StepSchedulerOptions options;
  options.max_prefill_tokens = 8;
  options.chunked_prefill_size = 0;
  Build(32, options);
  // Two 8-token prompts arrive together: only one fits the 8-token budget per step.
  Play({{0, {1, 2}, 1, 1}, {1, {}, 2, 0}, {2, {}, 1, 0}, {3, {}, 0, 0}}, 8, 3);
  EXPECT_EQ(sched().FindReport(RequestId(1))->queue_steps, 0);
  EXPECT_EQ(sched().FindReport(RequestId(2))->queue_steps, 1);
  EXPECT_EQ(sched().FindReport(RequestId(2))->first_token, Step(1));
}

TEST_F(StepSchedulerTest, MaxRunningRequestsLimitsTheBatch) {
  StepSchedulerOptions options;
  options.max_running_requests = 2;
  Build(32, options);
  // Requests 1 and 2 finish in step 1 and free their slots, so request 3 is admitted then.
  Play({{0, {1, 2, 3}, 2, 1}, {1, {}, 1, 0}, {2, {}, 0, 0}}, 4, 2);
  EXPECT_EQ(sched().FindReport(RequestId(3))->queue_steps, 1);
}

TEST_F(StepSchedulerTest, SharedPrefixGivesCachedTokensToTheSecondRequest) {
  Build(16);
  Submit(1, 12, 1, /*prefix_id=*/500);
  RunStep();
  ASSERT_EQ(finish_count_[1], 1);
  // Same 3 prompt blocks plus one more token: all 12 prompt tokens are reused.
  Submit(2, 13, 1, /*prefix_id=*/500);
  StepResult result = RunStep();
  EXPECT_EQ(result.prefill_tokens, 1);
  const RequestReport* report = sched().FindReport(RequestId(2));
  EXPECT_EQ(report->cached_device_tokens, 12);
  EXPECT_EQ(report->cached_host_tokens, 0);
  EXPECT_EQ(report->uncached_tokens, 1);
}

TEST_F(StepSchedulerTest, FullyCachedPromptStillComputesItsLastBlock) {
  Build(16);
  Submit(1, 12, 1, 500);
  RunStep();
  Submit(2, 12, 1, 500);
  RunStep();
  // prompt[:-1] matches 2 blocks; the last block is recomputed to produce a token.
  EXPECT_EQ(sched().FindReport(RequestId(2))->cached_device_tokens, 8);
  EXPECT_EQ(sched().FindReport(RequestId(2))->uncached_tokens, 4);
}

TEST_F(StepSchedulerTest, SecondTurnReusesTheFirstTurnsOutputBlocks) {
  Build(16);
  // Turn 1: 8 prompt tokens and 9 output tokens; the KV covers 8 + 9 - 1 = 16 tokens, so the
  // output completes blocks 2 and 3 of the conversation.
  SubmitWithOutput(1, 8, 9, /*content_id=*/500, /*output_blocks=*/2);
  Drain();
  ASSERT_EQ(finish_count_[1], 1);
  EXPECT_EQ(sched().gauges().evictable_tokens, 16);
  // Turn 2 re-sends prompt + answer and 3 new tokens: prompt[:-1] (19 tokens) matches all 4
  // blocks, the answer's included.
  SubmitWithOutput(2, 20, 1, 500, 0);
  RunStep();
  const RequestReport* report = sched().FindReport(RequestId(2));
  EXPECT_EQ(report->cached_device_tokens, 16);
  EXPECT_EQ(report->uncached_tokens, 4);
}

TEST_F(StepSchedulerTest, WithoutOutputKeysTheNextTurnRecomputesTheAnswer) {
  Build(16);
  Submit(1, 8, 9, /*prefix_id=*/500);
  Drain();
  EXPECT_EQ(sched().gauges().evictable_tokens, 8);
  SubmitWithOutput(2, 20, 1, 500, 0);
  RunStep();
  EXPECT_EQ(sched().FindReport(RequestId(2))->cached_device_tokens, 8);
}

TEST_F(StepSchedulerTest, PartialOutputBlockIsNotCommitted) {
  Build(16);
  // 8 + 8 tokens fill 4 blocks, but the last output token has no KV: the KV covers 15 tokens,
  // so block 3 stays uncommitted (SGLang inserts prompt + output[:-1]).
  SubmitWithOutput(1, 8, 8, 500, /*output_blocks=*/2);
  Drain();
  EXPECT_EQ(sched().gauges().evictable_tokens, 12);
  SubmitWithOutput(2, 20, 1, 500, 0);
  RunStep();
  EXPECT_EQ(sched().FindReport(RequestId(2))->cached_device_tokens, 12);
}

TEST_F(StepSchedulerTest, OutputBlocksAreCommittedAtFinishNotDuringDecode) {
  Build(16);
  SubmitWithOutput(1, 8, 12, 500, 2);
  for (int i = 0; i < 8; ++i) RunStep();  // Prefill and 7 decodes: KV of 15 tokens.
  ASSERT_EQ(sched().num_running(), 1);
  // Only the prompt's blocks are committed while the request decodes.
  EXPECT_EQ(sched().cache().Match(Keys(500, 4)).device_blocks, 2);
  Drain();
  EXPECT_EQ(sched().cache().Match(Keys(500, 4)).device_blocks, 4);
}

TEST_F(StepSchedulerTest, AbortMidDecodeCommitsTheComputedOutputBlocks) {
  Build(16);
  SubmitWithOutput(1, 8, 20, 500, /*output_blocks=*/3);
  for (int i = 0; i < 6; ++i) RunStep();  // Prefill and 5 decodes: 6 tokens, KV of 13.
  ASSERT_EQ(sched().FindReport(RequestId(1))->output_tokens, 6);
  ASSERT_TRUE(*sched().Abort(RequestId(1)));
  ASSERT_TRUE(sched().CheckInvariants().ok());
  // Blocks 0-2 are covered and committed; block 3 (one token of KV) is freed.
  EXPECT_EQ(sched().gauges().evictable_tokens, 12);
  EXPECT_EQ(sched().cache().Match(Keys(500, 5)).device_blocks, 3);
  SubmitWithOutput(2, 16, 1, 500, 0);
  RunStep();
  EXPECT_EQ(sched().FindReport(RequestId(2))->cached_device_tokens, 12);
}

TEST_F(StepSchedulerTest, RetractedRequestCommitsItsOutputOnlyWhenItFinishes) {
  // Two requests that cannot both hold their KV: the newer one is retracted mid-decode.
  Build(/*device_blocks=*/6);
  SubmitWithOutput(1, 8, 10, 100, 2);
  SubmitWithOutput(2, 8, 10, 200, 2);
  bool saw_retraction = false;
  while (sched().num_running() + sched().num_waiting() > 0) {
    const StepResult result = RunStep();
    if (!result.preempted.empty()) {
      saw_retraction = true;
      // Retraction commits nothing the decode computed: only the prompt blocks are cached.
      for (RequestId id : result.preempted) {
        const uint64_t content = id == RequestId(1) ? 100 : 200;
        EXPECT_LE(sched().cache().Match(Keys(content, 4)).total_blocks(), 2);
      }
    }
  }
  ASSERT_TRUE(saw_retraction);
  EXPECT_GT(sched().FindReport(RequestId(2))->preemptions, 0);
  // Request 2 finished after its recomputation and committed its output blocks then.
  EXPECT_EQ(sched().cache().Match(Keys(200, 4)).device_blocks, 4);
}

TEST_F(StepSchedulerTest, KvExhaustionPreemptsTheNewestAndItCompletesLater) {
  Build(/*device_blocks=*/6);
  Submit(1, 8, 10);
  Submit(2, 8, 10);
  bool preempted_two = false;
  for (int64_t step = 0; step < 200 && sched().num_finished() < 2; ++step) {
    StepResult result = RunStep();
    for (RequestId id : result.preempted) {
      EXPECT_EQ(id, RequestId(2)) << "the newest running request is retracted first";
      preempted_two = true;
    }
  }
  EXPECT_TRUE(preempted_two);
  EXPECT_GE(sched().num_preemptions(), 1);
  EXPECT_EQ(finish_count_[1], 1);
  EXPECT_EQ(finish_count_[2], 1);
  const RequestReport* two = sched().FindReport(RequestId(2));
  EXPECT_GE(two->preemptions, 1);
  EXPECT_GT(two->recomputed_tokens, 0);
  EXPECT_EQ(two->output_tokens, 10);
  EXPECT_EQ(sched().FindReport(RequestId(1))->preemptions, 0);
}

TEST_F(StepSchedulerTest, ManyRequestsUnderPressureEachFinishExactlyOnce) {
  StepSchedulerOptions options;
  options.chunked_prefill_size = 8;
  options.max_prefill_tokens = 16;
  Build(/*device_blocks=*/12, options);
  for (int64_t id = 1; id <= 12; ++id) {
    Submit(id, 6 + (id % 5) * 3, 2 + id % 7, id % 3 == 0 ? 900 : 0);
    RunStep();
  }
  Drain();
  EXPECT_EQ(sched().num_finished(), 12);
  for (int64_t id = 1; id <= 12; ++id) EXPECT_EQ(finish_count_[id], 1) << "request " << id;
}

TEST_F(StepSchedulerTest, GaugesFollowSglangDefinitions) {
  Build(10);
  Submit(1, 8, 2);
  RunStep();
  SchedulerGauges g = sched().gauges();
  EXPECT_EQ(g.max_total_num_tokens, 40);
  EXPECT_EQ(g.num_used_tokens, 8);
  EXPECT_DOUBLE_EQ(g.token_usage, 0.2);
  EXPECT_EQ(g.available_tokens, 32);
  EXPECT_EQ(g.evictable_tokens, 0);
  EXPECT_EQ(g.num_running_reqs, 1);
  EXPECT_EQ(g.num_queue_reqs, 0);
  RunStep();
  g = sched().gauges();
  // The finished request's two committed prompt blocks stay cached and evictable.
  EXPECT_EQ(g.num_used_tokens, 0);
  EXPECT_EQ(g.evictable_tokens, 8);
  EXPECT_EQ(g.available_tokens, 32);
  EXPECT_DOUBLE_EQ(g.token_usage, 0.0);
  EXPECT_EQ(g.num_running_reqs, 0);
  EXPECT_EQ(g.num_finished_reqs, 1);
}

TEST_F(StepSchedulerTest, SubmitRejectsBadRequests) {
  Build(4);
  SchedulerRequest request;
  request.id = RequestId(1);
  request.prompt_tokens = 0;
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("prompt_tokens"));
  request.prompt_tokens = 4;
  request.max_new_tokens = 0;
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("max_new_tokens"));
  request.max_new_tokens = 100;
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("capacity"));
  request.max_new_tokens = 1;
  request.prompt_keys = Keys(1, 2);
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("prompt_keys"));
  // Prompt 4 + output 4 has 2 full blocks: 1 prompt key and 2 output keys are one too many.
  request.max_new_tokens = 4;
  std::vector<kv::BlockKey> keys = Keys(1, 3);
  request.prompt_keys.assign(keys.begin(), keys.begin() + 1);
  request.output_keys.assign(keys.begin() + 1, keys.end());
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("output_keys"));
  request.output_keys.pop_back();
  ASSERT_TRUE(sched().Submit(request).ok());
  EXPECT_EQ(sched().Submit(request).code(), StatusCode::kAlreadyExists);
}

// A request of 2^63-1 output tokens used to pass the capacity check (prompt + output wrapped
// around to a negative total) and was then retracted forever without an answer.
TEST_F(StepSchedulerTest, SubmitRefusesTokenCountsThatCouldOverflowOrNeverFit) {
  Build(/*device_blocks=*/8);
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  SchedulerRequest request;
  request.id = RequestId(1);
  request.prompt_tokens = 4;
  request.max_new_tokens = kInt64Max;
  Status status = sched().Submit(request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("max_new_tokens"));
  request.prompt_tokens = kInt64Max;
  request.max_new_tokens = 1;
  status = sched().Submit(request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("prompt_tokens"));
  // One token past the device tier (8 blocks of 4 tokens) can never run either.
  request.prompt_tokens = 30;
  request.max_new_tokens = 3;
  EXPECT_THAT(sched().Submit(request).message(), HasSubstr("capacity"));
  EXPECT_EQ(sched().num_waiting(), 0);
  // Exactly the device tier fits, runs alone and finishes.
  request.max_new_tokens = 2;
  ASSERT_TRUE(sched().Submit(request).ok());
  Drain();
  EXPECT_EQ(finish_count_[1], 1);
}

TEST_F(StepSchedulerTest, TakeReportRetiresAFinishedRequestAndFreesItsId) {
  Build(/*device_blocks=*/16);
  Submit(1, 8, 2);
  RunStep();
  EXPECT_EQ(sched().TakeReport(RequestId(1)).status().code(), StatusCode::kFailedPrecondition);
  RunStep();
  ASSERT_EQ(finish_count_[1], 1);
  EXPECT_EQ(sched().num_held(), 1);
  StatusOr<RequestReport> report = sched().TakeReport(RequestId(1));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->id, RequestId(1));
  EXPECT_EQ(report->output_tokens, 2);
  EXPECT_EQ(sched().num_held(), 0);
  EXPECT_EQ(sched().FindReport(RequestId(1)), nullptr);
  EXPECT_EQ(sched().TakeReport(RequestId(1)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(sched().Abort(RequestId(1)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(sched().num_submitted(), 1);
  EXPECT_EQ(sched().num_finished(), 1);
  ASSERT_TRUE(sched().CheckInvariants().ok());
  // A retired id may come back (the scheduler holds only what is in flight).
  Submit(1, 8, 1);
  Drain();
  EXPECT_EQ(finish_count_[1], 2);
  EXPECT_EQ(sched().num_submitted(), 2);
}

// Model-based: random requests (some that can never fit) against the obvious rule for what
// fits; every accepted request finishes exactly once within a bound of steps, however the
// batch retracts, and the scheduler holds only requests in flight once reports are taken.
TEST_F(StepSchedulerTest, RandomWorkloadsFinishEveryAcceptedRequestAndHoldOnlyInFlight) {
  int64_t preemptions = 0;
  int64_t refused = 0;
  int64_t stored_in_finishing_steps = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    StepSchedulerOptions options;
    options.max_running_requests = 1 + static_cast<int64_t>(rng() % 6);
    options.chunked_prefill_size = static_cast<int64_t>(rng() % 3) * 8;
    options.max_prefill_tokens = 8 + static_cast<int64_t>(rng() % 24);
    const int64_t device_blocks = 4 + static_cast<int64_t>(rng() % 12);
    Build(device_blocks, options);
    finish_count_.clear();
    std::map<int64_t, bool> accepted;
    int64_t next_id = 1;
    int64_t work_bound = 0;
    for (int64_t step = 0; step < 400; ++step) {
      if (step < 200 && rng() % 3 == 0) {
        const int64_t id = next_id++;
        const int64_t prompt = 1 + static_cast<int64_t>(rng() % (device_blocks * 4 + 2));
        const int64_t output = rng() % 20 == 0 ? std::numeric_limits<int64_t>::max()
                                               : 1 + static_cast<int64_t>(rng() % 24);
        SchedulerRequest request;
        request.id = RequestId(id);
        // Prompts and answers drawn from four conversations, so that outputs are shared and
        // collide with other requests' blocks; half the requests carry output keys.
        const uint64_t content = static_cast<uint64_t>(rng() % 4) * 100;
        const bool with_output = rng() % 2 == 0 && output < 1000;
        std::vector<kv::BlockKey> keys =
            Keys(content, (prompt + (with_output ? output : 0)) / kTokensPerBlock);
        const auto prompt_blocks = static_cast<ptrdiff_t>(prompt / kTokensPerBlock);
        request.prompt_keys.assign(keys.begin(), keys.begin() + prompt_blocks);
        request.output_keys.assign(keys.begin() + prompt_blocks, keys.end());
        request.prompt_tokens = prompt;
        request.max_new_tokens = output;
        const bool fits =
            output < (int64_t{1} << 40) &&
            (prompt + output + kTokensPerBlock - 1) / kTokensPerBlock <= device_blocks;
        const Status status = sched().Submit(std::move(request));
        ASSERT_EQ(status.ok(), fits) << "seed " << seed << " request " << id << ": " << status;
        accepted[id] = fits;
        if (!fits) ++refused;
        // Each accepted request, run alone, finishes in at most prompt + output steps.
        if (fits) work_bound += prompt + output;
      }
      const int64_t stored_before = sched().cache().stats().stored_blocks;
      const StepResult result = RunStep();
      for (RequestId id : result.finished) {
        ASSERT_TRUE(sched().TakeReport(id).ok()) << "seed " << seed;
      }
      if (!result.finished.empty()) {
        stored_in_finishing_steps += sched().cache().stats().stored_blocks - stored_before;
      }
      ASSERT_EQ(sched().num_held(), sched().num_running() + sched().num_waiting())
          << "seed " << seed;
    }
    // Retraction recomputes, so allow each request its work a few times over.
    Drain(4 * work_bound + 100);
    for (const auto& [id, fits] : accepted) {
      EXPECT_EQ(finish_count_[id], fits ? 1 : 0) << "seed " << seed << " request " << id;
    }
    EXPECT_EQ(sched().num_running() + sched().num_waiting(), 0) << "seed " << seed;
    preemptions += sched().num_preemptions();
  }
  // The workloads do exercise retraction and refusal, and store blocks as requests finish.
  EXPECT_GT(preemptions, 30);
  EXPECT_GT(refused, 30);
  EXPECT_GT(stored_in_finishing_steps, 30);
}

TEST(StepSchedulerOptionsTest, ValidateNamesTheField) {
  StepSchedulerOptions options;
  options.max_running_requests = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("max_running_requests"));
  options = {};
  options.max_prefill_tokens = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("max_prefill_tokens"));
  options = {};
  options.chunked_prefill_size = -1;
  EXPECT_THAT(options.Validate().message(), HasSubstr("chunked_prefill_size"));
  EXPECT_TRUE(StepSchedulerOptions{}.Validate().ok());
}

TEST_F(StepSchedulerTest, AbortEndsARunningRequestKeepingItsTokensAndCachedPrompt) {
  Build(/*device_blocks=*/16);
  Submit(1, 8, 10);
  RunStep();  // Prefill: first token.
  RunStep();  // Decode: second token.
  const int64_t available_before = sched().gauges().available_tokens;
  StatusOr<bool> aborted = sched().Abort(RequestId(1));
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_TRUE(*aborted);
  ASSERT_TRUE(sched().CheckInvariants().ok());
  const RequestReport* report = sched().FindReport(RequestId(1));
  ASSERT_NE(report, nullptr);
  EXPECT_TRUE(report->aborted);
  EXPECT_EQ(report->output_tokens, 2);
  EXPECT_EQ(sched().num_running(), 0);
  EXPECT_EQ(sched().num_finished(), 1);
  // Its uncommitted output block is freed; its two prompt blocks stay cached and reusable.
  EXPECT_GT(sched().gauges().available_tokens, available_before);
  EXPECT_EQ(sched().gauges().evictable_tokens, 8);
  // Idempotent: a second abort and an abort of a finished request change nothing.
  EXPECT_FALSE(*sched().Abort(RequestId(1)));
  EXPECT_EQ(sched().Abort(RequestId(99)).status().code(), StatusCode::kNotFound);
  // The next request with the same prompt reuses it.
  Submit(2, 9, 1, /*prefix_id=*/1000);
  RunStep();
  EXPECT_EQ(sched().FindReport(RequestId(2))->cached_device_tokens, 8);
}

TEST_F(StepSchedulerTest, AbortRemovesAWaitingRequestFromTheQueue) {
  StepSchedulerOptions options;
  options.max_running_requests = 1;
  Build(/*device_blocks=*/16, options);
  Submit(1, 4, 5);
  Submit(2, 4, 5);
  Submit(3, 4, 5);
  RunStep();
  ASSERT_EQ(sched().num_waiting(), 2);
  ASSERT_TRUE(*sched().Abort(RequestId(2)));
  EXPECT_EQ(sched().num_waiting(), 1);
  EXPECT_TRUE(sched().FindReport(RequestId(2))->aborted);
  EXPECT_EQ(sched().FindReport(RequestId(2))->output_tokens, 0);
  Drain();
  EXPECT_EQ(sched().num_finished(), 3);
  EXPECT_FALSE(sched().FindReport(RequestId(3))->aborted);
  EXPECT_EQ(sched().FindReport(RequestId(3))->output_tokens, 5);
}

// Submits request `id` of conversation `conversation` (a sub-agent of `parent` when set).
void SubmitTurn(StepScheduler& scheduler, int64_t id, int64_t conversation,
                std::optional<int64_t> parent = std::nullopt) {
  SchedulerRequest request;
  request.id = RequestId(id);
  request.prompt_tokens = 4;
  request.max_new_tokens = 2;
  request.kv_options.conversation = ConversationId(conversation);
  if (parent.has_value()) request.kv_options.parent_conversation = ConversationId(*parent);
  ASSERT_TRUE(scheduler.Submit(std::move(request)).ok());
}

// Program-level FCFS: a continuing program's turn (and its sub-agent's) goes before a newer
// program's request that arrived earlier; without the option the queue is FIFO.
TEST_F(StepSchedulerTest, ProgramFcfsPutsAContinuingProgramBeforeANewOne) {
  for (const bool program_fcfs : {false, true}) {
    SCOPED_TRACE(program_fcfs ? "program_fcfs" : "fifo");
    StepSchedulerOptions options;
    options.max_running_requests = 1;
    options.program_fcfs = program_fcfs;
    Build(/*device_blocks=*/16, options);
    SubmitTurn(sched(), 1, /*conversation=*/1);  // Program 1's first turn.
    Drain();
    SubmitTurn(sched(), 10, /*conversation=*/10);  // Occupies the batch.
    RunStep();
    SubmitTurn(sched(), 2, /*conversation=*/2);                // A new program.
    SubmitTurn(sched(), 3, /*conversation=*/1);                // Program 1 continues.
    SubmitTurn(sched(), 4, /*conversation=*/5, /*parent=*/1);  // Its sub-agent.
    std::vector<int64_t> admitted;
    while (sched().num_running() + sched().num_waiting() > 0) {
      for (RequestId id : RunStep().admitted) admitted.push_back(id.value());
    }
    if (program_fcfs) {
      EXPECT_THAT(admitted, ElementsAre(3, 4, 2));
      EXPECT_EQ(sched().num_programs(), 3);
      sched().ForgetProgram(ConversationId(1));
      EXPECT_EQ(sched().num_programs(), 2);
    } else {
      EXPECT_THAT(admitted, ElementsAre(2, 3, 4));
      EXPECT_EQ(sched().num_programs(), 0);
    }
  }
}

// A caller may name the program apart from the cache's conversations (the engine emulator
// does): SchedulerRequest::program wins over kv_options.
TEST_F(StepSchedulerTest, ProgramFcfsOrdersByTheNamedProgram) {
  StepSchedulerOptions options;
  options.max_running_requests = 1;
  options.program_fcfs = true;
  Build(/*device_blocks=*/16, options);
  const auto submit = [this](int64_t id, int64_t program) {
    SchedulerRequest request;
    request.id = RequestId(id);
    request.prompt_tokens = 4;
    request.max_new_tokens = 2;
    request.program = ConversationId(program);
    ASSERT_TRUE(sched().Submit(std::move(request)).ok());
  };
  submit(1, /*program=*/7);  // Program 7 arrives first.
  Drain();
  submit(10, /*program=*/8);  // Occupies the batch.
  RunStep();
  submit(2, /*program=*/9);  // A new program.
  submit(3, /*program=*/7);  // Program 7 continues: it goes first.
  std::vector<int64_t> admitted;
  while (sched().num_running() + sched().num_waiting() > 0) {
    for (RequestId id : RunStep().admitted) admitted.push_back(id.value());
  }
  EXPECT_THAT(admitted, ElementsAre(3, 2));
  EXPECT_EQ(sched().num_programs(), 3);
}

}  // namespace
}  // namespace agentkv::engine
