// EngineConfig and SizeKvPool(config): one engine as every driver configures it.
//
// The simulator (sim::EngineModel on the event loop), the engine emulator
// (service::EngineRuntime on the wall clock) and the replay all describe an engine with this
// struct: the model and GPU presets and tensor parallelism the cost model prices, the step
// scheduler's options, the KV pool's sizing inputs and the KV cache's policy options. Engine
// (engine.h) builds the cost model, the KV cache manager and the scheduler from it. Library
// options hold typed presets; only the command line parses their names. A plain value type.
#ifndef AGENTKV_ENGINE_ENGINE_CONFIG_H_
#define AGENTKV_ENGINE_ENGINE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/engine/stall_offload_policy.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/kv_cache_options.h"

namespace agentkv::engine {

struct EngineConfig {
  // The cost model's presets and tensor parallel degree. Defaults: llama-3.1-8b on h100, tp 1.
  // tp is 1, 2, 4 or 8 and divides the model's KV heads; the model must fit (CostModel::Create).
  ModelPresetId model = ModelPresetId::kLlama31_8b;
  GpuPresetId gpu = GpuPresetId::kH100;
  int32_t tp = 1;
  // Utilization, memory fraction (SGLang --mem-fraction-static) and fixed costs.
  CostModelOptions cost;
  // SGLang --max-running-requests, --max-prefill-tokens, --chunked-prefill-size.
  StepSchedulerOptions scheduler;
  // Block size and the device and host tiers (SizeKvPool).
  KvPoolOptions kv_pool;
  // Every policy option of the engine's KV cache (session close mode, block reuse, retention,
  // event log). Its sizing fields are kv_pool's: device_blocks and host_blocks must stay 0 and
  // tokens_per_block is not read (Engine sets all three from SizeKvPool).
  kv::KvCacheOptions cache;
  // Stall offload (stall_offload_policy.h): paused sessions' KV to the host tier under
  // pressure, prefetched before their predicted return. Default: unset (off). Needs a host
  // tier (kv_pool.hicache_ratio or hicache_tokens > 0); valid per StallOffloadOptions.
  std::optional<StallOffloadOptions> stall_offload;
  // Continuum's pin lifecycle (prefix_pins.h): a prefix pin also ends when its conversation's
  // next request is admitted, and pins are released, oldest first, under memory pressure.
  // Default: false (a pin lasts until the driver expires it at its TTL).
  bool continuum_pins = false;

  // InvalidArgument naming the first bad field (scheduler, kv_pool and cost-model fields,
  // cache sizing fields set here, stall offload without a host tier), or the cost model's
  // error (tp, a model that does not fit).
  // The cache's policy fields are checked when Engine::Create builds the cache.
  [[nodiscard]] Status Validate() const;
};

// The KV pool of an engine of `config`: SizeKvPool(config.kv_pool) over the KV capacity the
// cost model of `config` leaves. Every driver sizes its engines through this function.
// Errors as Validate and SizeKvPool.
[[nodiscard]] StatusOr<KvPool> SizeKvPool(const EngineConfig& config);

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_ENGINE_CONFIG_H_
