#include "agentkv/engine/cost_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

CostModel MustCreate(std::string_view model, std::string_view gpu, int32_t tp,
                     const CostModelOptions& options = {}) {
  StatusOr<CostModel> cost = CostModel::CreateByName(model, gpu, tp, options);
  AGENTKV_CHECK(cost.ok()) << cost.status();
  return *std::move(cost);
}

TEST(CostModelTest, OptionDefaultsAreAsDocumented) {
  const CostModelOptions o;
  EXPECT_DOUBLE_EQ(o.memory_fraction, 0.90);
  EXPECT_EQ(o.activation_reserve_bytes_per_gpu, 2 * kGiB);
  EXPECT_DOUBLE_EQ(o.mfu, 0.68);
  EXPECT_DOUBLE_EQ(o.decode_mfu, 0.23);
  EXPECT_DOUBLE_EQ(o.mbu, 0.8);
  EXPECT_DOUBLE_EQ(o.host_link_efficiency, 0.69);
  EXPECT_TRUE(o.overlap_host_load);
  EXPECT_EQ(o.step_overhead, TimeNs(1'000'000));
  EXPECT_EQ(o.allreduce_latency, TimeNs(5'000));
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(CostModelTest, PresetsHoldTheDocumentedShapes) {
  const ModelPreset llama8 = *FindModelPreset("llama-3.1-8b");
  EXPECT_EQ(llama8.num_layers, 32);
  EXPECT_EQ(llama8.hidden_size, 4096);
  EXPECT_EQ(llama8.num_query_heads, 32);
  EXPECT_EQ(llama8.num_kv_heads, 8);
  EXPECT_EQ(llama8.head_dim, 128);
  EXPECT_DOUBLE_EQ(llama8.num_params, 8.03e9);
  EXPECT_EQ(llama8.dtype_bytes, 2);
  const ModelPreset qwen32 = *FindModelPreset("qwen2.5-32b");
  EXPECT_EQ(qwen32.num_layers, 64);
  EXPECT_EQ(qwen32.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(qwen32.num_params, 32.8e9);
  const ModelPreset llama70 = *FindModelPreset("llama-3.1-70b");
  EXPECT_EQ(llama70.num_layers, 80);
  EXPECT_EQ(llama70.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(llama70.num_params, 70.6e9);

  const GpuPreset h100 = *FindGpuPreset("h100");
  EXPECT_DOUBLE_EQ(h100.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bytes_per_s, 3.35e12);
  EXPECT_EQ(h100.memory_bytes, 80 * kGiB);
  const GpuPreset h200 = *FindGpuPreset("h200");
  EXPECT_DOUBLE_EQ(h200.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200.memory_bytes, 141 * kGiB);
}

TEST(CostModelTest, UnknownPresetNamesAreNotFoundListingKnownNames) {
  const StatusOr<ModelPreset> model = FindModelPreset("gpt-5");
  ASSERT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(model.status().message(),
              AllOf(HasSubstr("gpt-5"), HasSubstr("llama-3.1-8b"), HasSubstr("qwen2.5-32b"),
                    HasSubstr("llama-3.1-70b")));
  const StatusOr<GpuPreset> gpu = FindGpuPreset("H100");  // Names are exact, lower case.
  ASSERT_EQ(gpu.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(gpu.status().message(), AllOf(HasSubstr("H100"), HasSubstr("h100 h200")));
  EXPECT_EQ(CostModel::CreateByName("llama-3.1-8b", "a100", 1).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(CostModel::CreateByName("nope", "h100", 1).status().code(), StatusCode::kNotFound);
}

TEST(CostModelTest, KvBytesPerTokenOfLlama8bIs128KiB) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  EXPECT_EQ(cost.kv_bytes_per_token(), 2 * 32 * 8 * 128 * 2);
  EXPECT_EQ(cost.kv_bytes_per_token(), 131072);
  // KV heads are split across GPUs, so the aggregate per-token size does not depend on tp.
  EXPECT_EQ(MustCreate("llama-3.1-8b", "h100", 8).kv_bytes_per_token(), 131072);
  EXPECT_EQ(MustCreate("llama-3.1-70b", "h100", 4).kv_bytes_per_token(), 2 * 80 * 8 * 128 * 2);
}

TEST(CostModelTest, CapacityOfLlama8bOnOneH100MatchesHandComputation) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  // 80 GiB = 85'899'345'920 B; x 0.90 = 77'309'411'328 B; weights 8.03e9 x 2 = 16'060'000'000 B;
  // reserve 2 GiB = 2'147'483'648 B; KV bytes = 59'101'927'680; / 131'072 = 450'911.9...
  EXPECT_DOUBLE_EQ(cost.weight_bytes(), 16'060'000'000.0);
  EXPECT_EQ(cost.kv_capacity_tokens(), 450'911);

  // Without the reserve and at memory_fraction 1: (85'899'345'920 - 16'060'000'000) / 131'072
  // = 532'831.9...
  CostModelOptions all_memory;
  all_memory.memory_fraction = 1.0;
  all_memory.activation_reserve_bytes_per_gpu = 0;
  EXPECT_EQ(MustCreate("llama-3.1-8b", "h100", 1, all_memory).kv_capacity_tokens(), 532'831);
}

TEST(CostModelTest, CapacityGrowsWithTpAndOnH200) {
  const int64_t h100_tp1 = MustCreate("llama-3.1-8b", "h100", 1).kv_capacity_tokens();
  const int64_t h100_tp2 = MustCreate("llama-3.1-8b", "h100", 2).kv_capacity_tokens();
  const int64_t h200_tp1 = MustCreate("llama-3.1-8b", "h200", 1).kv_capacity_tokens();
  // tp 2 doubles memory and reserve but not the weights:
  // (2 x 80 GiB x 0.9 - 16.06e9 - 4 GiB) / 131'072 = 1'024'351.9...
  EXPECT_EQ(h100_tp2, 1'024'351);
  EXPECT_GT(h100_tp2, 2 * h100_tp1);
  EXPECT_GT(h200_tp1, h100_tp1);
}

TEST(CostModelTest, Llama70bDoesNotFitOnOneH100ButFitsAtTp4) {
  const StatusOr<CostModel> one = CostModel::CreateByName("llama-3.1-70b", "h100", 1);
  ASSERT_EQ(one.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(one.status().message(), AllOf(HasSubstr("llama-3.1-70b"), HasSubstr("h100"),
                                            HasSubstr("tp 1"), HasSubstr("does not fit")));
  EXPECT_EQ(CostModel::CreateByName("llama-3.1-70b", "h100", 2).status().code(),
            StatusCode::kOk);  // 144 GiB usable > 141.2 GB weights + reserve, barely.
  const CostModel four = MustCreate("llama-3.1-70b", "h100", 4);
  // (4 x 80 GiB x 0.9 - 141.2e9 - 8 GiB) / 327'680 = 486'595.8...
  EXPECT_EQ(four.kv_capacity_tokens(), 486'595);
  EXPECT_EQ(MustCreate("qwen2.5-32b", "h100", 1).kv_bytes_per_token(), 2 * 64 * 8 * 128 * 2);
}

TEST(CostModelTest, CreateRejectsBadTpNamingFieldAndValue) {
  for (int32_t tp : {0, -1, 3, 6, 16}) {
    const StatusOr<CostModel> cost = CostModel::CreateByName("llama-3.1-8b", "h100", tp);
    ASSERT_EQ(cost.status().code(), StatusCode::kInvalidArgument) << tp;
    EXPECT_THAT(cost.status().message(), HasSubstr("tp = " + std::to_string(tp)));
  }
  ModelPreset four_kv_heads = *FindModelPreset("llama-3.1-8b");
  four_kv_heads.num_kv_heads = 4;
  const StatusOr<CostModel> cost = CostModel::Create(four_kv_heads, *FindGpuPreset("h100"), 8);
  ASSERT_EQ(cost.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(cost.status().message(), AllOf(HasSubstr("tp = 8"), HasSubstr("num_kv_heads")));
}

struct BadOption {
  std::string field;
  std::string value;
  std::function<void(CostModelOptions&)> apply;
};

TEST(CostModelTest, CreateRejectsEachOutOfRangeOptionNamingFieldAndValue) {
  const std::vector<BadOption> bad = {
      {"memory_fraction", "0", [](CostModelOptions& o) { o.memory_fraction = 0; }},
      {"memory_fraction", "1.5", [](CostModelOptions& o) { o.memory_fraction = 1.5; }},
      {"memory_fraction", "-0.1", [](CostModelOptions& o) { o.memory_fraction = -0.1; }},
      {"mfu", "0", [](CostModelOptions& o) { o.mfu = 0; }},
      {"mfu", "1.01", [](CostModelOptions& o) { o.mfu = 1.01; }},
      {"mbu", "0", [](CostModelOptions& o) { o.mbu = 0; }},
      {"mbu", "2", [](CostModelOptions& o) { o.mbu = 2; }},
      {"decode_mfu", "0", [](CostModelOptions& o) { o.decode_mfu = 0; }},
      {"decode_mfu", "1.5", [](CostModelOptions& o) { o.decode_mfu = 1.5; }},
      {"host_link_efficiency", "0", [](CostModelOptions& o) { o.host_link_efficiency = 0; }},
      {"host_link_efficiency", "1.2", [](CostModelOptions& o) { o.host_link_efficiency = 1.2; }},
      {"activation_reserve_bytes_per_gpu", "-1",
       [](CostModelOptions& o) { o.activation_reserve_bytes_per_gpu = -1; }},
      {"step_overhead", "-1", [](CostModelOptions& o) { o.step_overhead = TimeNs(-1); }},
      {"allreduce_latency", "-5", [](CostModelOptions& o) { o.allreduce_latency = TimeNs(-5); }},
  };
  for (const BadOption& b : bad) {
    CostModelOptions options;
    b.apply(options);
    const StatusOr<CostModel> cost = CostModel::CreateByName("llama-3.1-8b", "h100", 1, options);
    ASSERT_EQ(cost.status().code(), StatusCode::kInvalidArgument) << b.field;
    EXPECT_THAT(cost.status().message(), AllOf(HasSubstr(b.field), HasSubstr(b.value)))
        << cost.status();
  }
  // The upper bounds are inclusive.
  CostModelOptions ones;
  ones.memory_fraction = ones.mfu = ones.mbu = ones.decode_mfu = ones.host_link_efficiency = 1.0;
  EXPECT_TRUE(CostModel::CreateByName("llama-3.1-8b", "h100", 1, ones).ok());
}

TEST(CostModelTest, CreateRejectsNonPositivePresetFields) {
  ModelPreset model = *FindModelPreset("llama-3.1-8b");
  model.head_dim = 0;
  EXPECT_THAT(CostModel::Create(model, *FindGpuPreset("h100"), 1).status().message(),
              HasSubstr("model.head_dim = 0"));
  GpuPreset gpu = *FindGpuPreset("h100");
  gpu.hbm_bytes_per_s = 0;
  EXPECT_THAT(CostModel::Create(*FindModelPreset("llama-3.1-8b"), gpu, 1).status().message(),
              HasSubstr("gpu.hbm_bytes_per_s = 0"));
  gpu = *FindGpuPreset("h100");
  gpu.host_link_bytes_per_s = 0;
  EXPECT_THAT(CostModel::Create(*FindModelPreset("llama-3.1-8b"), gpu, 1).status().message(),
              HasSubstr("gpu.host_link_bytes_per_s = 0"));
}

TEST(CostModelTest, HostTransferTimeIsTheHostLoadFormula) {
  const CostModel tp1 = MustCreate("llama-3.1-8b", "h100", 1, {});
  const CostModel tp2 = MustCreate("llama-3.1-8b", "h100", 2, {});
  EXPECT_EQ(tp1.HostTransferTime(0), TimeNs(0));
  EXPECT_NEAR(tp1.HostTransferTime(500'000).seconds(), 65.536e9 / (64e9 * 0.69), 1e-9);
  // Each tensor-parallel GPU moves its shard over its own link.
  EXPECT_NEAR(tp2.HostTransferTime(500'000).seconds(), tp1.HostTransferTime(500'000).seconds() / 2,
              1e-9);
  const StepShape load{.prefill_tokens = 100,
                       .decode_tokens = 0,
                       .context_tokens = 0,
                       .num_requests = 1,
                       .host_load_tokens = 12'345};
  EXPECT_EQ(tp1.Breakdown(load).host_load_time, tp1.HostTransferTime(12'345));
}

TEST(CostModelTest, HostLoadWithoutOverlapAddsTransferTimeOverEachGpusLink) {
  // 8B: 131,072 KV bytes per token; 500,000 tokens = 65.536e9 bytes over 64e9 x 0.69 bytes/s.
  const StepShape load{.prefill_tokens = 100,
                       .decode_tokens = 0,
                       .context_tokens = 500'000,
                       .num_requests = 1,
                       .host_load_tokens = 500'000};
  StepShape no_load = load;
  no_load.host_load_tokens = 0;
  CostModelOptions serial;
  serial.overlap_host_load = false;
  const CostModel tp1 = MustCreate("llama-3.1-8b", "h100", 1, serial);
  EXPECT_DOUBLE_EQ(tp1.host_link_bytes_per_s(), 64e9 * 0.69);
  const StepCost with = tp1.Breakdown(load);
  EXPECT_NEAR(with.host_load_time.seconds(), 65.536e9 / (64e9 * 0.69), 1e-9);
  EXPECT_EQ(with.exposed_host_load_time, with.host_load_time);
  EXPECT_EQ(with.total, tp1.Breakdown(no_load).total + with.host_load_time);
  EXPECT_EQ(tp1.Breakdown(no_load).host_load_time, TimeNs(0));
  // Two GPUs load their halves in parallel.
  const CostModel tp2 = MustCreate("llama-3.1-8b", "h100", 2, serial);
  EXPECT_NEAR(tp2.Breakdown(load).host_load_time.seconds(), 65.536e9 / (2 * 64e9 * 0.69), 1e-9);
}

TEST(CostModelTest, HostLoadOverlapsComputeLayerByLayer) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  ASSERT_TRUE(cost.options().overlap_host_load);
  // A partial hit: 4,000 tokens reloaded (11.9 ms of transfer) under an 8,000-token prefill
  // (~200 ms of compute). Only one layer's share of the load is exposed: the first layer's KV
  // must arrive before that layer computes.
  const StepShape partial{.prefill_tokens = 8'000,
                          .context_tokens = 4'000,
                          .num_requests = 1,
                          .host_load_tokens = 4'000};
  const StepCost hit = cost.Breakdown(partial);
  const TimeNs busy = std::max(hit.compute_time, hit.memory_time);
  ASSERT_LT(hit.host_load_time, busy);
  EXPECT_EQ(hit.exposed_host_load_time, TimeNs((hit.host_load_time.ns() + 31) / 32));
  EXPECT_EQ(hit.total, busy + hit.overhead + hit.exposed_host_load_time);
  // A nearly full hit: 100,000 tokens reloaded (430 ms) before a 16-token prefill: the compute
  // hides behind the load, which is exposed less one layer's worth of the compute.
  const StepShape full{.prefill_tokens = 16,
                       .context_tokens = 100'000,
                       .num_requests = 1,
                       .host_load_tokens = 100'000};
  const StepCost reload = cost.Breakdown(full);
  const TimeNs reload_busy = std::max(reload.compute_time, reload.memory_time);
  ASSERT_GT(reload.host_load_time, reload_busy);
  EXPECT_EQ(reload.total,
            reload.host_load_time + TimeNs((reload_busy.ns() + 31) / 32) + reload.overhead);
  // Overlap never costs more than loading first, and a step without a load is unchanged.
  CostModelOptions serial;
  serial.overlap_host_load = false;
  const CostModel no_overlap = MustCreate("llama-3.1-8b", "h100", 1, serial);
  EXPECT_LT(hit.total, no_overlap.Estimate(partial));
  EXPECT_LT(reload.total, no_overlap.Estimate(full));
  StepShape no_load = partial;
  no_load.host_load_tokens = 0;
  EXPECT_EQ(cost.Estimate(no_load), no_overlap.Estimate(no_load));
  EXPECT_EQ(cost.Breakdown(no_load).exposed_host_load_time, TimeNs(0));
}

TEST(CostModelTest, OverlappedEstimateIsMonotonicInHostLoadAndPrefill) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  for (int64_t load = 0; load <= 200'000; load += 5'000) {
    TimeNs previous_prefill(0);
    for (int64_t prefill = 1; prefill <= 65'536; prefill *= 2) {
      const StepShape shape{.prefill_tokens = prefill,
                            .context_tokens = load,
                            .num_requests = 1,
                            .host_load_tokens = load};
      const TimeNs t = cost.Estimate(shape);
      EXPECT_GE(t, previous_prefill) << "load " << load << " prefill " << prefill;
      previous_prefill = t;
      if (load > 0) {
        StepShape less = shape;
        less.host_load_tokens = load - 5'000;
        EXPECT_GE(t, cost.Estimate(less)) << "load " << load << " prefill " << prefill;
      }
    }
  }
}

TEST(CostModelTest, DecodeFlopsRunAtTheDecodeUtilization) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  // 128 decodes over 192-token contexts: compute bound at decode_mfu 0.23 (about 9.1 ms)
  // although the weights and KV read in 7.2 ms.
  const StepShape decode{.decode_tokens = 128, .context_tokens = 128 * 192, .num_requests = 128};
  const StepCost step = cost.Breakdown(decode);
  EXPECT_DOUBLE_EQ(step.decode_flops, step.flops);
  EXPECT_NEAR(step.compute_time.seconds(), step.flops / (989e12 * 0.23), 1e-9);
  EXPECT_TRUE(step.compute_bound());
  // A single decode stays memory bound: the batch dependence of decode latency.
  EXPECT_FALSE(cost.Breakdown({.decode_tokens = 1, .context_tokens = 512, .num_requests = 1})
                   .compute_bound());
  // In a mixed step, prefill FLOPs run at mfu and decode FLOPs at decode_mfu.
  const StepCost mixed = cost.Breakdown(
      {.prefill_tokens = 1000, .decode_tokens = 10, .context_tokens = 10'000, .num_requests = 11});
  EXPECT_GT(mixed.decode_flops, 0);
  EXPECT_LT(mixed.decode_flops, mixed.flops);
  EXPECT_NEAR(
      mixed.compute_time.seconds(),
      (mixed.flops - mixed.decode_flops) / (989e12 * 0.68) + mixed.decode_flops / (989e12 * 0.23),
      2e-9);
}

TEST(CostModelTest, DecodeStepIsMemoryBoundWithHandComputedTime) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  // 32 decoding requests with 2000 cached tokens each.
  const StepShape decode{
      .prefill_tokens = 0, .decode_tokens = 32, .context_tokens = 32 * 2000, .num_requests = 32};
  const StepCost step = cost.Breakdown(decode);
  EXPECT_FALSE(step.compute_bound());
  // Bytes: weights 16.06e9 + (64'000 + 32) x 131'072 = 24'452'802'304; / (3.35e12 x 0.8).
  EXPECT_DOUBLE_EQ(step.memory_bytes, 16.06e9 + 64'032.0 * 131'072);
  EXPECT_NEAR(step.memory_time.seconds(), 24'452'802'304.0 / 2.68e12, 1e-9);
  // FLOPs: 2 x 8.03e9 x 32 + 4 x 32 x 32 x 128 x 64'000 (each token sees its 2000 tokens).
  EXPECT_DOUBLE_EQ(step.flops, 2 * 8.03e9 * 32 + 4.0 * 32 * 32 * 128 * 64'000);
  EXPECT_EQ(step.overhead, TimeNs::Millis(1));
  EXPECT_EQ(step.communication_time, TimeNs(0));
  EXPECT_EQ(step.total, step.memory_time + TimeNs::Millis(1));
  EXPECT_EQ(cost.Estimate(decode), step.total);
}

TEST(CostModelTest, PrefillHeavyStepIsComputeBound) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  const StepShape prefill{.prefill_tokens = 8192, .num_requests = 1};
  const StepCost step = cost.Breakdown(prefill);
  EXPECT_TRUE(step.compute_bound());
  // 2 x 8.03e9 x 8192 + 4 x 32 x 32 x 128 x 8192^2 / 2 (causal).
  EXPECT_DOUBLE_EQ(step.flops, 2 * 8.03e9 * 8192 + 4.0 * 32 * 32 * 128 * 8192.0 * 8192 / 2);
  EXPECT_NEAR(step.compute_time.seconds(), step.flops / (989e12 * 0.68), 1e-9);
  EXPECT_EQ(step.total, step.compute_time + TimeNs::Millis(1));
  // A mixed step with a 2048-token chunk beside 64 decodes is still compute bound.
  EXPECT_TRUE(cost.Breakdown({.prefill_tokens = 2048,
                              .decode_tokens = 64,
                              .context_tokens = 64 * 1000,
                              .num_requests = 65})
                  .compute_bound());
}

TEST(CostModelTest, EmptyStepCostsNothing) {
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  EXPECT_EQ(cost.Estimate({}), TimeNs(0));
  EXPECT_EQ(cost.Estimate({.context_tokens = 100, .num_requests = 3}), TimeNs(0));
}

TEST(CostModelTest, EstimateIsMonotonicInTokensAndContext) {
  for (const char* model : {"llama-3.1-8b", "qwen2.5-32b"}) {
    const CostModel cost = MustCreate(model, "h100", model == std::string("llama-3.1-8b") ? 1 : 2);
    for (int64_t requests : {1, 8, 64}) {
      TimeNs previous_decode(0);
      for (int64_t decode = 1; decode <= 4096; decode *= 2) {
        TimeNs previous_context(0);
        for (int64_t context = 0; context <= 1'000'000; context += 50'000) {
          TimeNs previous_prefill(0);
          for (int64_t prefill = 0; prefill <= 16'384; prefill += 1024) {
            const StepShape shape{.prefill_tokens = prefill,
                                  .decode_tokens = decode,
                                  .context_tokens = context,
                                  .num_requests = requests};
            const TimeNs t = cost.Estimate(shape);
            EXPECT_GE(t, previous_prefill) << model << " prefill " << prefill;
            previous_prefill = t;
            if (prefill == 0) {
              EXPECT_GE(t, previous_context) << model << " context " << context;
              previous_context = t;
              if (context == 0) {
                EXPECT_GE(t, previous_decode) << model << " decode " << decode;
                previous_decode = t;
              }
            }
          }
        }
      }
    }
  }
  // Strictly: more context means more KV read in a memory-bound decode step.
  const CostModel cost = MustCreate("llama-3.1-8b", "h100", 1);
  EXPECT_LT(cost.Estimate({.decode_tokens = 8, .context_tokens = 8'000, .num_requests = 8}),
            cost.Estimate({.decode_tokens = 8, .context_tokens = 80'000, .num_requests = 8}));
}

TEST(CostModelTest, TensorParallelismSplitsWorkAndAddsAllReduces) {
  const StepShape prefill{.prefill_tokens = 8192, .num_requests = 1};
  const StepCost tp1 = MustCreate("llama-3.1-8b", "h100", 1).Breakdown(prefill);
  const StepCost tp4 = MustCreate("llama-3.1-8b", "h100", 4).Breakdown(prefill);
  EXPECT_DOUBLE_EQ(tp4.flops, tp1.flops);
  EXPECT_NEAR(tp4.compute_time.seconds(), tp1.compute_time.seconds() / 4, 1e-9);
  EXPECT_EQ(tp4.communication_time, TimeNs(2 * 32 * 5'000));
  EXPECT_LT(tp4.total, tp1.total);
}

TEST(CostModelTest, H200DecodesFasterThanH100) {
  const StepShape decode{.decode_tokens = 16, .context_tokens = 16 * 4000, .num_requests = 16};
  EXPECT_LT(MustCreate("llama-3.1-8b", "h200", 1).Estimate(decode),
            MustCreate("llama-3.1-8b", "h100", 1).Estimate(decode));
}

}  // namespace
}  // namespace agentkv::engine
