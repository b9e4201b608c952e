// Invariants: the scheduler's cache has exactly kv_pool_'s tiers and block size, and the cost
// model is the one config_ describes (both fixed at Create).
#include "agentkv/engine/engine.h"

#include <utility>

#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/kv_cache_stats.h"

namespace agentkv::engine {

StatusOr<Engine> Engine::Create(const EngineConfig& config) {
  AGENTKV_ASSIGN_OR_RETURN(const KvPool pool, SizeKvPool(config));
  AGENTKV_ASSIGN_OR_RETURN(const CostModel cost_model,
                           CostModel::Create(config.model, config.gpu, config.tp, config.cost));
  kv::KvCacheOptions cache = config.cache;
  cache.tokens_per_block = pool.tokens_per_block;
  cache.device_blocks = pool.device_blocks;
  cache.host_blocks = pool.host_blocks;
  AGENTKV_ASSIGN_OR_RETURN(kv::KvCacheManager manager, kv::KvCacheManager::Create(cache));
  AGENTKV_ASSIGN_OR_RETURN(StepScheduler scheduler,
                           StepScheduler::Create(config.scheduler, std::move(manager)));
  return Engine(config, cost_model, pool, std::move(scheduler));
}

Engine::Engine(const EngineConfig& config, const CostModel& cost_model, const KvPool& kv_pool,
               StepScheduler scheduler)
    : config_(config),
      cost_model_(cost_model),
      kv_pool_(kv_pool),
      scheduler_(std::move(scheduler)) {}

EngineStep Engine::Step() {
  const kv::KvCacheStats before = scheduler_.cache().stats();
  EngineStep step;
  step.result = scheduler_.Step();
  const kv::KvCacheStats after = scheduler_.cache().stats();
  step.evicted_blocks = after.device_evictions - before.device_evictions;
  step.shape.prefill_tokens = step.result.prefill_tokens;
  step.shape.decode_tokens = step.result.decode_tokens;
  step.shape.num_requests = static_cast<int64_t>(step.result.batch.size());
  for (const ScheduledWork& work : step.result.batch) {
    step.shape.context_tokens += work.context_tokens;
  }
  step.shape.host_load_tokens = (after.onboards - before.onboards) * kv_pool_.tokens_per_block;
  step.cost = cost_model_.Estimate(step.shape);
  return step;
}

}  // namespace agentkv::engine
