// Invariants: every point of CalibrationPoints() has a positive published value and a
// tolerance in (0, 1); ModelValue evaluates each point with the step shapes the functions
// above build, never with constants of its own. The numbers and their sources are the
// validation table of docs/COST_MODEL.md.
#include "agentkv/engine/cost_model_calibration.h"

#include <algorithm>
#include <array>

#include "agentkv/base/check.h"

namespace agentkv::engine {
namespace {

using Kind = CalibrationPoint::Kind;

constexpr std::string_view kQuickStart =
    "SGLang docs, \"Quick Start: Sending Requests\" (docs.sglang.ai/start/send_request.html), "
    "server log of 2025-01-23: Meta-Llama-3.1-8B-Instruct, bf16, one H100 80GB, "
    "mem_fraction_static 0.88, chunked_prefill_size 8192, FlashInfer";
constexpr std::string_view kNotRelocated =
    "published figure, source not re-located: SGLang/vLLM benchmark of Llama-3.1-8B, bf16, one "
    "H100 SXM";
// Read off the charts of the vLLM blog post (Figs. 1 and 4); its setup: Llama-3.1-8B-Instruct,
// one H100 80GB HBM3, vLLM commit 2a1776b7, FlashAttention, GPU prefix caching off.
constexpr std::string_view kVllmTtft8k =
    "closest located measurement (original not re-located): vLLM blog, \"Inside vLLM's New KV "
    "Offloading Connector\" (blog.vllm.ai/2026/01/08/kv-offloading-connector.html), Fig. 1: "
    "Llama-3.1-8B-Instruct, one H100 80GB, vLLM 2a1776b7, one request, GPU-compute TTFT ~268 ms at "
    "10K tokens (chart), ~207-212 ms at 8,192 interpolated";
constexpr std::string_view kVllmTtft32k =
    "closest located measurement (original not re-located): vLLM blog, \"Inside vLLM's New KV "
    "Offloading Connector\" (blog.vllm.ai/2026/01/08/kv-offloading-connector.html), Fig. 1: "
    "Llama-3.1-8B-Instruct, one H100 80GB, vLLM 2a1776b7, one request, GPU-compute TTFT ~1,100 ms "
    "at 30K and ~1,650 ms at 40K tokens (chart), ~1,200-1,245 ms at 32,768 interpolated";
constexpr std::string_view kSglangPr2134 =
    "sgl-project/sglang PR 2134, \"Fix grid size in Triton decoding kernel\" (2024-11-23): "
    "bench_one_batch --batch-size 128 --input 128 --output 128, Llama-3.1-8B-Instruct, Triton "
    "attention (GPU not stated): prefill 0.373 s = 43,925 tokens/s; decode steps 10.15-10.28 ms, "
    "median 10.00 ms";
constexpr std::string_view kSglangIssue2271 =
    "sgl-project/sglang issue 2271, \"[Kernel] Optimize triton decoding kernels for long "
    "context\" (2024-11-30): bench_offline_throughput, Llama-3.1-8B-Instruct, one request, "
    "FlashInfer attention (GPU not stated): 144.17 tokens/s at 234 cached tokens = 6.94 ms a step";
constexpr std::string_view kVllmHostLoad =
    "closest located measurement (vLLM offloading connector, not SGLang HiCache): vLLM blog, "
    "\"Inside vLLM's New KV Offloading Connector\" "
    "(blog.vllm.ai/2026/01/08/kv-offloading-connector.html), one H100 80GB: CPU->GPU copy of 1000 "
    "blocks ~48 GB/s at 2 MB blocks, 50-51 GB/s at 4-16 MB (Fig. 4); Llama-3.1-8B load-from-CPU "
    "TTFT +2.97 ms per 1K tokens = ~44 GB/s (Fig. 1, chart)";

constexpr std::array<CalibrationPoint, 8> kPoints = {{
    {.quantity = "KV capacity, mem_fraction_static 0.88",
     .unit = "tokens",
     .published = 444'500,
     .source = kQuickStart,
     .kind = Kind::kKvCapacityTokens,
     .memory_fraction = 0.88},
    {.quantity = "TTFT, batch 1, 8,192-token prompt",
     .unit = "ms",
     .published = 215,
     .published_range = "~215",
     .source = kVllmTtft8k,
     .kind = Kind::kTtftMs,
     .prompt_tokens = 8192,
     .chunk_tokens = 8192},
    {.quantity = "TTFT, batch 1, 32,768-token prompt, 8,192-token chunks",
     .unit = "ms",
     .published = 1285,
     .published_range = "1,240-1,330",
     .source = kVllmTtft32k,
     .kind = Kind::kTtftMs,
     .prompt_tokens = 32768,
     .chunk_tokens = 8192},
    {.quantity = "prefill throughput, 128 x 128-token prompts in one step",
     .unit = "tokens/s",
     .published = 43'900,
     .source = kSglangPr2134,
     .kind = Kind::kPrefillTokensPerSecond,
     .batch = 128,
     .prompt_tokens = 128},
    {.quantity = "decode ITL, batch 1, short context (512 tokens)",
     .unit = "ms",
     .published = 6.94,
     .source = kSglangIssue2271,
     .kind = Kind::kDecodeItlMs,
     .batch = 1,
     .context_tokens = 512},
    {.quantity = "decode ITL, batch 8, ~21K-token context each",
     .unit = "ms",
     .published = 15.18,
     .source = kNotRelocated,
     .kind = Kind::kDecodeItlMs,
     .batch = 8,
     .context_tokens = 21'000},
    {.quantity = "decode ITL, batch 128, short context (128 prompt + 64 generated)",
     .unit = "ms",
     .published = 10.1,
     .published_range = "10.0-10.2",
     .source = kSglangPr2134,
     .kind = Kind::kDecodeItlMs,
     .batch = 128,
     .context_tokens = 192},
    {.quantity = "host-to-GPU KV load bandwidth, end to end",
     .unit = "GB/s",
     .published = 44,
     .published_range = "~44 (48-51 raw copy)",
     .source = kVllmHostLoad,
     .kind = Kind::kHostLoadGBps},
}};

}  // namespace

TimeNs TimeToFirstToken(const CostModel& cost, int64_t prompt_tokens, int64_t chunk_tokens) {
  AGENTKV_CHECK(prompt_tokens >= 1 && chunk_tokens >= 0)
      << "prompt " << prompt_tokens << " chunk " << chunk_tokens;
  const int64_t chunk = chunk_tokens == 0 ? prompt_tokens : chunk_tokens;
  TimeNs total(0);
  for (int64_t done = 0; done < prompt_tokens; done += chunk) {
    total += cost.Estimate({.prefill_tokens = std::min(chunk, prompt_tokens - done),
                            .context_tokens = done,
                            .num_requests = 1});
  }
  return total;
}

double PrefillTokensPerSecond(const CostModel& cost, int64_t batch, int64_t prompt_tokens) {
  AGENTKV_CHECK(batch >= 1 && prompt_tokens >= 1)
      << "batch " << batch << " prompt " << prompt_tokens;
  const int64_t tokens = batch * prompt_tokens;
  const TimeNs step = cost.Estimate({.prefill_tokens = tokens, .num_requests = batch});
  return static_cast<double>(tokens) / step.seconds();
}

TimeNs DecodeStepTime(const CostModel& cost, int64_t batch, int64_t context_tokens) {
  AGENTKV_CHECK(batch >= 1 && context_tokens >= 0)
      << "batch " << batch << " context " << context_tokens;
  return cost.Estimate(
      {.decode_tokens = batch, .context_tokens = batch * context_tokens, .num_requests = batch});
}

TimeNs HostReloadTime(const CostModel& cost, int64_t tokens) {
  AGENTKV_CHECK(tokens >= 0) << "tokens " << tokens;
  const double bytes = static_cast<double>(tokens) * static_cast<double>(cost.kv_bytes_per_token());
  return TimeNs::Seconds(bytes / (cost.tp() * cost.host_link_bytes_per_s()));
}

double RecomputeOverReload(const CostModel& cost, int64_t prefix_tokens, int64_t chunk_tokens) {
  AGENTKV_CHECK(prefix_tokens >= 1) << "prefix " << prefix_tokens;
  return TimeToFirstToken(cost, prefix_tokens, chunk_tokens).seconds() /
         HostReloadTime(cost, prefix_tokens).seconds();
}

std::span<const CalibrationPoint> CalibrationPoints() { return kPoints; }

double ModelValue(const CostModel& cost, const CalibrationPoint& point) {
  switch (point.kind) {
    case Kind::kKvCapacityTokens: {
      CostModelOptions options = cost.options();
      options.memory_fraction = point.memory_fraction;
      const StatusOr<CostModel> at_fraction =
          CostModel::Create(cost.model(), cost.gpu(), cost.tp(), options);
      AGENTKV_CHECK(at_fraction.ok()) << at_fraction.status();
      return static_cast<double>(at_fraction->kv_capacity_tokens());
    }
    case Kind::kTtftMs:
      return TimeToFirstToken(cost, point.prompt_tokens, point.chunk_tokens).seconds() * 1e3;
    case Kind::kPrefillTokensPerSecond:
      return PrefillTokensPerSecond(cost, point.batch, point.prompt_tokens);
    case Kind::kDecodeItlMs:
      return DecodeStepTime(cost, point.batch, point.context_tokens).seconds() * 1e3;
    case Kind::kHostLoadGBps:
      return cost.host_link_bytes_per_s() / 1e9;
  }
  AGENTKV_CHECK(false) << "unknown calibration point kind " << static_cast<int>(point.kind);
  return 0;
}

}  // namespace agentkv::engine
