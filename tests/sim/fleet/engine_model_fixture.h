// The fixture the EngineModel test files share (engine_model_test.cc and the suites split
// from it by topic: aborts, miss split, pins): requests, options and an engine on an event loop
// that counts each request's completions.
#ifndef AGENTKV_TESTS_SIM_ENGINE_MODEL_FIXTURE_H_
#define AGENTKV_TESTS_SIM_ENGINE_MODEL_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/event_loop.h"
#include "tests/sim/sim_test_support.h"

namespace agentkv::sim::engine_model_testing {

inline constexpr int32_t kTokensPerBlock = 16;

using testing_support::Keys;
using testing_support::Llama8bH100;

inline engine::SchedulerRequest MakeRequest(int64_t id, int64_t prompt_tokens,
                                            int64_t max_new_tokens, uint64_t content = 0) {
  engine::SchedulerRequest request;
  request.id = RequestId(id);
  request.prompt_keys = Keys(content != 0 ? content : static_cast<uint64_t>(id) * 100000,
                             prompt_tokens / kTokensPerBlock);
  request.prompt_tokens = prompt_tokens;
  request.max_new_tokens = max_new_tokens;
  return request;
}

// `device_blocks` = 0 sizes the device tier from the cost model.
inline EngineModelOptions DefaultOptions(int64_t device_blocks = 0) {
  EngineModelOptions options;
  options.config.kv_pool.tokens_per_block = kTokensPerBlock;
  options.config.kv_pool.max_total_tokens = device_blocks * kTokensPerBlock;
  return options;
}

inline TimeNs Micros(int64_t us) { return TimeNs(us * 1000); }

// Prompt keys of `blocks` full blocks of content `content` (equal content, equal prefix).
inline std::vector<kv::BlockKey> ContentKeys(uint64_t content, int64_t blocks) {
  return Keys(content, blocks);
}

// The device-resident leading blocks of `keys`.
inline int64_t DeviceBlocks(const EngineModel& engine, const std::vector<kv::BlockKey>& keys) {
  return engine.engine().cache().Match(keys).device_blocks;
}

inline void ExpectSplitAddsUp(const EngineRequestRecord& record) {
  EXPECT_GE(record.cold_tokens, 0) << "request " << record.id;
  EXPECT_GE(record.evicted_recompute_tokens, 0) << "request " << record.id;
  EXPECT_EQ(record.cold_tokens + record.evicted_recompute_tokens, record.report.uncached_tokens)
      << "request " << record.id;
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

  // Submits request `id` of `blocks` full blocks of `content` (one output token), runs the loop
  // until idle and returns its record (null, failing the test, when it has none).
  const EngineRequestRecord* RunAlone(int64_t id, int64_t blocks, uint64_t content) {
    const Status status = engine_->Submit(MakeRequest(id, blocks * kTokensPerBlock, 1, content));
    EXPECT_TRUE(status.ok()) << status;
    loop_.RunUntilIdle();
    const EngineRequestRecord* record = engine_->FindRecord(RequestId(id));
    EXPECT_NE(record, nullptr) << "request " << id;
    return record;
  }

  EventLoop loop_;
  engine::CostModel cost_ = Llama8bH100();
  std::unique_ptr<EngineModel> engine_;
  std::map<int64_t, int> completions_;
};

}  // namespace agentkv::sim::engine_model_testing

#endif  // AGENTKV_TESTS_SIM_ENGINE_MODEL_FIXTURE_H_
