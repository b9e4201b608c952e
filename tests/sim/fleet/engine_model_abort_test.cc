// Tests of EngineModel's aborts (SGLang's /abort_request), applied at the next step boundary.
#include <gtest/gtest.h>

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
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "engine_model_fixture.h"

namespace agentkv::sim {
namespace {

using namespace engine_model_testing;

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

}  // namespace
}  // namespace agentkv::sim
