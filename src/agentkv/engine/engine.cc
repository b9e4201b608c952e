// Invariants: the scheduler's cache has exactly kv_pool_'s tiers and block size, and the cost
// model is the one config_ describes (both fixed at Create). stall_offload_ is set exactly
// when config_.stall_offload is, and then the cache has a host tier. pins_ follows
// config_.continuum_pins. Every request the scheduler took (Submit) reached stall offload's
// OnSubmit, and every report taken (TakeReport) its OnFinish.
#include "agentkv/engine/engine.h"

#include <algorithm>
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
      stall_offload_(std::move(stall_offload)),
      pins_(config.continuum_pins) {}

Status Engine::Submit(SchedulerRequest request, TimeNs now) {
  const RequestId id = request.id;
  const std::optional<ConversationId> conversation = request.kv_options.conversation;
  // Before the scheduler moves the request; a request it refuses as malformed ends the turn
  // it would have started at once.
  NoteStallSubmitted(request, now);
  if (Status submitted = scheduler_.Submit(std::move(request)); !submitted.ok()) {
    if (stall_offload_.has_value()) stall_offload_->OnFinish(id, /*completed=*/false, now);
    return submitted;
  }
  if (conversation.has_value()) pins_.NoteSubmitted(id, *conversation);
  return Status::Ok();
}

StatusOr<bool> Engine::Abort(RequestId id) { return scheduler_.Abort(id); }

StatusOr<RequestReport> Engine::TakeReport(RequestId id, TimeNs now) {
  StatusOr<RequestReport> report = scheduler_.TakeReport(id);
  if (!report.ok()) return report;
  if (stall_offload_.has_value()) {
    stall_offload_->OnFinish(id, !report->aborted && !report->rejected, now);
  }
  // A request that never ran (aborted while waiting, rejected) ends its pin here.
  pins_.EndReturned(id, scheduler_.mutable_cache());
  return report;
}

int64_t Engine::DeliverParentReturn(ConversationId parent, TimeNs now) {
  kv::KvCacheManager& cache = scheduler_.mutable_cache();
  cache.AdvanceClock(now);
  return cache.DemoteFinishedSubagents(parent);
}

PinTicket Engine::PinPrefix(ConversationId conversation, std::span<const kv::BlockKey> keys) {
  return pins_.Pin(conversation, keys, scheduler_.mutable_cache());
}

void Engine::ExpirePin(ConversationId conversation, uint64_t generation) {
  pins_.Expire(conversation, generation, scheduler_.mutable_cache());
}

double Engine::kv_pressure() const {
  const SchedulerGauges g = gauges();
  if (g.max_total_num_tokens <= 0) return 1.0;
  const double held = static_cast<double>(g.num_used_tokens + pins_.pinned_tokens());
  return std::clamp(held / static_cast<double>(g.max_total_num_tokens), 0.0, 1.0);
}

std::optional<TimeNs> Engine::PrepareStep(TimeNs now) {
  if (pins_.continuum() && !pins_.empty() && scheduler_.num_waiting() > 0) {
    const StepSchedulerOptions& sched = scheduler_.options();
    const int64_t chunk = sched.chunked_prefill_size > 0
                              ? std::min(sched.chunked_prefill_size, sched.max_prefill_tokens)
                              : sched.max_prefill_tokens;
    const SchedulerGauges g = gauges();
    pins_.ReleaseUnderPressure(g.available_tokens + g.evictable_tokens, chunk,
                               scheduler_.mutable_cache());
  }
  return RunStallOffload(now);
}

void Engine::NoteStallSubmitted(const SchedulerRequest& request, TimeNs now) {
  if (!stall_offload_.has_value()) return;
  std::vector<kv::BlockKey> keys;
  if (IsReturningPause(request.kv_options.next_pause)) {
    keys.reserve(request.prompt_keys.size() + request.output_keys.size());
    keys.insert(keys.end(), request.prompt_keys.begin(), request.prompt_keys.end());
    keys.insert(keys.end(), request.output_keys.begin(), request.output_keys.end());
  }
  stall_offload_->OnSubmit(request.id, request.kv_options, std::move(keys), now);
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
  const kv::KvCacheManager& cache = scheduler_.cache();
  const int64_t evictions_before = cache.device_evictions();
  const int64_t onboards_before = cache.onboards();
  EngineStep step;
  step.result = scheduler_.Step();
  step.evicted_blocks = cache.device_evictions() - evictions_before;
  step.shape.prefill_tokens = step.result.prefill_tokens;
  step.shape.decode_tokens = step.result.decode_tokens;
  step.shape.num_requests = static_cast<int64_t>(step.result.batch.size());
  for (const ScheduledWork& work : step.result.batch) {
    step.shape.context_tokens += work.context_tokens;
  }
  step.shape.host_load_tokens = (cache.onboards() - onboards_before) * kv_pool_.tokens_per_block;
  const StepCost cost = cost_model_.Breakdown(step.shape);
  step.cost = cost.total;
  step.compute_time = cost.compute_time;
  for (RequestId id : step.result.admitted) pins_.EndReturned(id, scheduler_.mutable_cache());
  return step;
}

}  // namespace agentkv::engine
