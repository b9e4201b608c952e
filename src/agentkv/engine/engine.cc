// Invariants: the scheduler's cache has exactly kv_pool_'s tiers and block size, and the cost
// model is the one config_ describes (both fixed at Create). stall_offload_ is set exactly
// when config_.stall_offload is, and then the cache has a host tier.
#include "agentkv/engine/engine.h"

#include <utility>
#include <vector>

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
  std::optional<StallOffloadPolicy> stall_offload;
  if (config.stall_offload.has_value()) {
    AGENTKV_ASSIGN_OR_RETURN(StallOffloadPolicy policy,
                             StallOffloadPolicy::Create(*config.stall_offload));
    stall_offload.emplace(std::move(policy));
  }
  return Engine(config, cost_model, pool, std::move(scheduler), std::move(stall_offload));
}

Engine::Engine(const EngineConfig& config, const CostModel& cost_model, const KvPool& kv_pool,
               StepScheduler scheduler, std::optional<StallOffloadPolicy> stall_offload)
    : config_(config),
      cost_model_(cost_model),
      kv_pool_(kv_pool),
      scheduler_(std::move(scheduler)),
      stall_offload_(std::move(stall_offload)) {}

void Engine::NoteSubmitted(const SchedulerRequest& request, TimeNs now) {
  if (!stall_offload_.has_value()) return;
  std::vector<kv::BlockKey> keys;
  if (IsReturningPause(request.next_pause)) {
    keys.reserve(request.prompt_keys.size() + request.output_keys.size());
    keys.insert(keys.end(), request.prompt_keys.begin(), request.prompt_keys.end());
    keys.insert(keys.end(), request.output_keys.begin(), request.output_keys.end());
  }
  stall_offload_->OnSubmit(request.id, request.kv_options, request.next_pause, std::move(keys),
                           now);
}

void Engine::NoteFinished(RequestId id, bool completed, TimeNs now) {
  if (stall_offload_.has_value()) stall_offload_->OnFinish(id, completed, now);
}

std::optional<TimeNs> Engine::RunStallOffload(TimeNs now) {
  if (!stall_offload_.has_value()) return std::nullopt;
  kv::KvCacheManager& cache = scheduler_.mutable_cache();
  const StallPlan plan = stall_offload_->Plan(now, cache, scheduler_.num_waiting(), cost_model_);
  for (const StallMove& move : plan.prefetches) {
    const int64_t loaded =
        cache.PrefetchChain(stall_offload_->KeysOf(move.conversation), move.max_blocks);
    stall_offload_->OnPrefetched(move, loaded);
  }
  int64_t freed = 0;
  for (const StallMove& move : plan.offloads) {
    if (freed >= plan.blocks_to_free) break;
    const int64_t moved = cache.OffloadChain(stall_offload_->KeysOf(move.conversation));
    stall_offload_->OnOffloaded(move, moved,
                                cost_model_.HostTransferTime(moved * kv_pool_.tokens_per_block));
    freed += moved;
  }
  return stall_offload_->NextWake(now);
}

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
