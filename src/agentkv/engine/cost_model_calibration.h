// Calibration of the cost model: the published measurements its constants reproduce, and the
// few derived quantities (time to first token, prefill throughput, decode latency, host-tier
// reload against recompute) they are compared on.
//
// The validation table of docs/COST_MODEL.md, the table-driven calibration test and the
// `agentkv cost-model` command all read CalibrationPoints(), so the table, the test and what a
// user sees cannot drift apart. Pure functions over a CostModel: no clocks, no I/O; the points
// are constexpr data. Thread-compatible.
#ifndef AGENTKV_ENGINE_COST_MODEL_CALIBRATION_H_
#define AGENTKV_ENGINE_COST_MODEL_CALIBRATION_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"

namespace agentkv::engine {

// Time to first token of one request alone on the engine: its `prompt_tokens` prefilled in
// chunks of at most `chunk_tokens` (SGLang --chunked-prefill-size; 0 = one chunk), each chunk
// one step that reads the chunks before it as cached context. Precondition: prompt_tokens >= 1,
// chunk_tokens >= 0.
TimeNs TimeToFirstToken(const CostModel& cost, int64_t prompt_tokens, int64_t chunk_tokens);

// Prompt tokens per second of one step prefilling `batch` requests of `prompt_tokens` each
// (SGLang bench_one_batch's prefill throughput). Preconditions: both >= 1.
double PrefillTokensPerSecond(const CostModel& cost, int64_t batch, int64_t prompt_tokens);

// Inter-token latency of a decode step of `batch` requests, each with `context_tokens` cached.
// Preconditions: batch >= 1, context_tokens >= 0.
TimeNs DecodeStepTime(const CostModel& cost, int64_t batch, int64_t context_tokens);

// Time to load `tokens` of KV from the host tier with nothing to overlap with:
// tokens * kv_bytes_per_token / (tp * host_link_bytes_per_s()). Precondition: tokens >= 0.
TimeNs HostReloadTime(const CostModel& cost, int64_t tokens);

// How many times longer recomputing a `prefix_tokens` prefix takes (TimeToFirstToken with
// `chunk_tokens`) than reloading it from the host tier (HostReloadTime). Precondition:
// prefix_tokens >= 1.
double RecomputeOverReload(const CostModel& cost, int64_t prefix_tokens, int64_t chunk_tokens);

// One published measurement and the model's value for the same setup.
struct CalibrationPoint {
  // What is measured, with its setup in the model's terms ("TTFT, batch 1, 8,192-token
  // prompt").
  std::string_view quantity = {};
  // The unit of `published` and of ModelValue ("ms", "tokens", "tokens/s", "GB/s").
  std::string_view unit = {};
  // The measured value (the midpoint where a range was published).
  double published = 0;
  // The published range as printed ("1,240-1,330"); empty when one value was published.
  std::string_view published_range = {};
  // Title, venue or URL, and setup of the measurement.
  std::string_view source = {};
  // The model's value must be within published * (1 +- tolerance).
  double tolerance = 0.15;
  // Which point this is; ModelValue dispatches on it.
  enum class Kind : uint8_t {
    kKvCapacityTokens,
    kTtftMs,
    kPrefillTokensPerSecond,
    kDecodeItlMs,
    kHostLoadGBps,
  } kind = Kind::kTtftMs;
  // The setup, as far as the kind reads it: requests in the batch (prefill, decode); tokens of
  // each prompt (TTFT, prefill); the prefill chunk (TTFT; 0 = one chunk); cached tokens per
  // decoding request (decode); the memory fraction of the capacity point.
  int64_t batch = 1;
  int64_t prompt_tokens = 0;
  int64_t chunk_tokens = 0;
  int64_t context_tokens = 0;
  double memory_fraction = 0;
};

// The calibration points of the built-in constants: Llama-3.1-8B (bf16) on one H100 SXM.
std::span<const CalibrationPoint> CalibrationPoints();

// The model's value of `point` in point.unit, for `cost` (whose presets should be the
// point's: llama-3.1-8b on h100 at tp 1 for the built-in points). A capacity point is
// evaluated at the point's memory fraction.
double ModelValue(const CostModel& cost, const CalibrationPoint& point);

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_COST_MODEL_CALIBRATION_H_
