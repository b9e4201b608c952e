// Engine: one LLM serving engine's decision core, built from one EngineConfig.
//
// It owns the cost model, the KV cache manager (inside the step scheduler) and the step
// scheduler, with the cache's tiers sized by SizeKvPool(config). Step() runs one scheduler
// iteration and prices it; what drives the steps in time is the caller's: sim::EngineModel
// paces an Engine on the simulator's event loop, service::EngineRuntime on the wall clock. The
// engine itself has no clock, thread or I/O.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Movable, not copyable (it owns the cache).
#ifndef AGENTKV_ENGINE_ENGINE_H_
#define AGENTKV_ENGINE_ENGINE_H_

#include <cstdint>
#include <optional>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/engine/stall_offload_policy.h"
#include "agentkv/engine/step_scheduler.h"

namespace agentkv::engine {

// One priced scheduler iteration.
struct EngineStep {
  StepResult result;
  // The batch as the cost model sees it; host_load_tokens are the tokens onboarded from the
  // host tier during the step.
  StepShape shape;
  // Device blocks the cache evicted during the step.
  int64_t evicted_blocks = 0;
  // CostModel::Estimate(shape): 0 for a step that computed no token.
  TimeNs cost;

  // Whether the step computed any token (prefill or decode).
  bool computed() const { return shape.prefill_tokens + shape.decode_tokens > 0; }
};

class Engine {
 public:
  // Validates `config` (EngineConfig::Validate), sizes the pool (SizeKvPool) and builds the
  // cost model, the KV cache and the scheduler. InvalidArgument naming the bad field.
  [[nodiscard]] static StatusOr<Engine> Create(const EngineConfig& config);

  Engine(Engine&&) = default;
  Engine& operator=(Engine&&) = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs StepScheduler::Step() once and prices it with the cost model.
  EngineStep Step();

  // ---- Stall offload (EngineConfig::stall_offload; every call a no-op without it) --------
  // The driver tells the engine, in its own time (simulated or wall), when requests arrive and
  // end, and runs the policy at every step start and at the time RunStallOffload returns.

  // `request` is about to be submitted at `now` (call before StepScheduler::Submit moves it).
  void NoteSubmitted(const SchedulerRequest& request, TimeNs now);
  // Request `id` ended at `now`: completed normally, or not (aborted, rejected).
  void NoteFinished(RequestId id, bool completed, TimeNs now);
  // Plans the stall offload moves due at `now` and applies them to the cache (offloads until
  // the plan's pressure goal is met, prefetches as planned). Returns the next time it has a
  // prefetch due, if any: the driver calls again then even if no step runs.
  std::optional<TimeNs> RunStallOffload(TimeNs now);
  // The policy (null when stall offload is off).
  const StallOffloadPolicy* stall_offload() const {
    return stall_offload_.has_value() ? &*stall_offload_ : nullptr;
  }

  const EngineConfig& config() const { return config_; }
  const CostModel& cost_model() const { return cost_model_; }
  const KvPool& kv_pool() const { return kv_pool_; }
  // SGLang's max_total_num_tokens: the device tier in tokens.
  int64_t max_total_num_tokens() const { return kv_pool_.device_tokens(); }
  const StepScheduler& scheduler() const { return scheduler_; }
  // For submits, aborts, session closes and priority changes (StepScheduler::mutable_cache).
  StepScheduler& mutable_scheduler() { return scheduler_; }

 private:
  Engine(const EngineConfig& config, const CostModel& cost_model, const KvPool& kv_pool,
         StepScheduler scheduler, std::optional<StallOffloadPolicy> stall_offload);

  EngineConfig config_;
  CostModel cost_model_;
  KvPool kv_pool_;
  StepScheduler scheduler_;
  std::optional<StallOffloadPolicy> stall_offload_;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_ENGINE_H_
