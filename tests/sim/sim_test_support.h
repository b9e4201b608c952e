// Helpers shared by the simulator's engine, fleet and agent tests: the 8B/H100 cost model
// they price steps with, and chained block keys from block ids.
#ifndef AGENTKV_TESTS_SIM_SIM_TEST_SUPPORT_H_
#define AGENTKV_TESTS_SIM_SIM_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/block_key.h"

namespace agentkv::sim::testing_support {

inline engine::CostModel Llama8bH100() {
  StatusOr<engine::CostModel> model = engine::CostModel::CreateByName("llama-3.1-8b", "h100", 1);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// Chained keys (hash seed 0) of `n` blocks whose ids start at `first_id`: equal ids give an
// equal prefix.
inline std::vector<kv::BlockKey> Keys(uint64_t first_id, int64_t n) {
  std::vector<uint64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first_id + static_cast<uint64_t>(i));
  return kv::BlockKeyHasher(0).KeysFromBlockIds(ids);
}

}  // namespace agentkv::sim::testing_support

#endif  // AGENTKV_TESTS_SIM_SIM_TEST_SUPPORT_H_
