#include "agentkv/engine/cost_model_calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/engine/cost_model.h"

namespace agentkv::engine {
namespace {

CostModel Llama8bOnH100(const CostModelOptions& options = {}) {
  StatusOr<CostModel> cost =
      CostModel::Create(ModelPresetId::kLlama31_8b, GpuPresetId::kH100, 1, options);
  AGENTKV_CHECK(cost.ok()) << cost.status();
  return *std::move(cost);
}

// The table-driven calibration check: every published measurement the built-in constants are
// calibrated on is reproduced within its stated tolerance.
TEST(CostModelCalibrationTest, EveryPointIsWithinItsTolerance) {
  const CostModel cost = Llama8bOnH100();
  ASSERT_FALSE(CalibrationPoints().empty());
  for (const CalibrationPoint& point : CalibrationPoints()) {
    ASSERT_GT(point.published, 0) << point.quantity;
    ASSERT_GT(point.tolerance, 0) << point.quantity;
    ASSERT_LE(point.tolerance, 0.15) << point.quantity;
    EXPECT_FALSE(point.source.empty()) << point.quantity;
    const double model = ModelValue(cost, point);
    const double ratio = model / point.published;
    EXPECT_NEAR(ratio, 1.0, point.tolerance)
        << point.quantity << ": model " << model << " " << point.unit << ", published "
        << point.published << " (" << point.source << ")";
  }
}

// The uncalibrated constants (mfu 0.5, no decode efficiency, the raw PCIe link) miss the
// prefill and host points by more than the tolerance: the test above can fail.
TEST(CostModelCalibrationTest, TheUncalibratedConstantsMissThePrefillAndHostPoints) {
  CostModelOptions raw;
  raw.mfu = 0.5;
  raw.decode_mfu = 1.0;
  raw.host_link_efficiency = 1.0;
  const CostModel cost = Llama8bOnH100(raw);
  int missed = 0;
  for (const CalibrationPoint& point : CalibrationPoints()) {
    const double ratio = ModelValue(cost, point) / point.published;
    if (std::abs(ratio - 1.0) > point.tolerance) ++missed;
  }
  // TTFT at 8K, TTFT at 32K, prefill throughput, ITL at batch 128 and the host link.
  EXPECT_EQ(missed, 5);
}

TEST(CostModelCalibrationTest, TimeToFirstTokenSumsItsChunks) {
  const CostModel cost = Llama8bOnH100();
  const TimeNs chunked = TimeToFirstToken(cost, 20'000, 8192);
  const TimeNs expected =
      cost.Estimate({.prefill_tokens = 8192, .num_requests = 1}) +
      cost.Estimate({.prefill_tokens = 8192, .context_tokens = 8192, .num_requests = 1}) +
      cost.Estimate(
          {.prefill_tokens = 20'000 - 16'384, .context_tokens = 16'384, .num_requests = 1});
  EXPECT_EQ(chunked, expected);
  // Chunk 0 is one step; chunking adds one step overhead per extra chunk and little else.
  const TimeNs whole = TimeToFirstToken(cost, 20'000, 0);
  EXPECT_EQ(whole, cost.Estimate({.prefill_tokens = 20'000, .num_requests = 1}));
  EXPECT_GT(chunked, whole);
  EXPECT_LT(chunked, whole + TimeNs(3 * cost.options().step_overhead.ns() + 10));
}

TEST(CostModelCalibrationTest, HostReloadTimeUsesTheEffectiveLink) {
  const CostModel cost = Llama8bOnH100();
  // 10,000 tokens x 131,072 B over 64e9 x 0.69 B/s.
  EXPECT_NEAR(HostReloadTime(cost, 10'000).seconds(), 10'000 * 131'072.0 / (64e9 * 0.69), 1e-9);
  EXPECT_EQ(HostReloadTime(cost, 0), TimeNs(0));
}

TEST(CostModelCalibrationTest, RecomputeGrowsFasterThanReloadWithThePrefix) {
  const CostModel cost = Llama8bOnH100();
  // Recompute is linear plus a quadratic attention term; a reload is linear.
  const double r10k = RecomputeOverReload(cost, 10'000, 8192);
  const double r30k = RecomputeOverReload(cost, 30'000, 8192);
  const double r100k = RecomputeOverReload(cost, 100'000, 8192);
  EXPECT_GT(r10k, 1.0);
  EXPECT_LT(r10k, r30k);
  EXPECT_LT(r30k, r100k);
}

}  // namespace
}  // namespace agentkv::engine
