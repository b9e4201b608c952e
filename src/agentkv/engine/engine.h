// Engine: one LLM serving engine's decision core, built from one EngineConfig, and the only
// door into it.
//
// It owns the cost model, the KV cache manager (inside the step scheduler), the step scheduler
// and the engine's policies: stall offload (EngineConfig::stall_offload) and prefix pins with
// Continuum's lifecycle (EngineConfig::continuum_pins). A driver submits, steps, aborts, takes
// reports, closes sessions, pins prefixes and delivers a parent's return through the calls
// below, named in the domain; the engine fires its own policies' hooks (stall offload learns
// turns at Submit and TakeReport; Continuum's pins end at admission and are released under
// pressure in PrepareStep). What drives the steps in time is the caller's: sim::EngineModel
// paces an Engine on the simulator's event loop, service::EngineRuntime on the wall clock, and
// both make the same calls. The engine itself has no clock, thread or I/O.
//
// Thread-compatible: const methods may run concurrently; mutation needs external
// synchronization. Movable, not copyable (it owns the cache).
#ifndef AGENTKV_ENGINE_ENGINE_H_
#define AGENTKV_ENGINE_ENGINE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/engine/prefix_pins.h"
#include "agentkv/engine/stall_offload_policy.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/next_use_ranking.h"

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
  // Its compute part (CostModel::Breakdown(shape).compute_time), priced with it.
  TimeNs compute_time;

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

  // ---- Requests --------------------------------------------------------------------------
  // Times (`now`) are the driver's clock, simulated or wall; the engine only records them.

  // Whether a request of these token counts could ever run here (StepScheduler::CheckFits).
  [[nodiscard]] Status CheckFits(int64_t prompt_tokens, int64_t max_new_tokens) const {
    return scheduler_.CheckFits(prompt_tokens, max_new_tokens);
  }
  // Enqueues `request` at `now` (StepScheduler::Submit; errors are its own, and then the
  // request is not held). Stall offload learns the turn it starts; a pending pin of its
  // conversation counts as returned (and, with Continuum's lifecycle, ends at its admission).
  [[nodiscard]] Status Submit(SchedulerRequest request, TimeNs now);
  // Runs StepScheduler::Step() once and prices it with the cost model. Continuum: the pins
  // the step's admitted requests returned to end (the requests hold the blocks now).
  EngineStep Step();
  // Ends request `id` where it is (StepScheduler::Abort): true when this call aborted it,
  // false when it already finished; NotFound for an id not held.
  [[nodiscard]] StatusOr<bool> Abort(RequestId id);
  // The report of a held request (partial while it runs), or nullptr.
  const RequestReport* FindReport(RequestId id) const { return scheduler_.FindReport(id); }
  // Takes the report of finished request `id` at `now` (StepScheduler::TakeReport; its
  // errors): the engine forgets the request. Stall offload learns that its turn ended
  // (completed unless aborted or rejected); Continuum ends a pin it returned to and never
  // took over.
  [[nodiscard]] StatusOr<RequestReport> TakeReport(RequestId id, TimeNs now);

  // ---- Sessions, programs, sub-agents ----------------------------------------------------
  // Closes `session` on the cache (KvCacheManager::CloseSession). Returns the tokens freed.
  int64_t CloseSession(SessionId session) {
    return scheduler_.mutable_cache().CloseSession(session);
  }
  // Program-level FCFS: program `program` ended (StepScheduler::ForgetProgram).
  void ForgetProgram(ConversationId program) { scheduler_.ForgetProgram(program); }
  // The parent conversation `parent` sent its next request: advances the cache's clock to
  // `now` and demotes the finished children of `parent` this cache registered
  // (KvCacheManager::DemoteFinishedSubagents). Returns the children demoted.
  int64_t DeliverParentReturn(ConversationId parent, TimeNs now);

  // ---- Prefix pins (prefix_pins.h; Continuum's lifecycle with EngineConfig::continuum_pins)
  // Pins the cached blocks of `keys` at the highest priority on behalf of `conversation`,
  // superseding its earlier pin. The driver calls ExpirePin(conversation,
  // ticket.generation) when the pin's time-to-live elapses.
  PinTicket PinPrefix(ConversationId conversation, std::span<const kv::BlockKey> keys);
  // Ends pin `generation` of `conversation` at its TTL (a no-op when it ended already).
  void ExpirePin(ConversationId conversation, uint64_t generation);
  const PinCounters& pin_counters() const { return pins_.counters(); }
  // Tokens the active pins named when they were taken (blocks evicted since included).
  int64_t pinned_tokens() const { return pins_.pinned_tokens(); }
  // The share of the device tier running requests and active pins hold, in [0, 1]: the KV
  // pressure a pin decision prices.
  double kv_pressure() const;

  // ---- Between steps ---------------------------------------------------------------------
  // What the engine does before each step at `now`: Continuum releases pins, oldest first,
  // while requests wait and the free plus unpinned evictable tokens are fewer than one
  // prefill chunk; then RunStallOffload(now). Returns RunStallOffload's next time.
  std::optional<TimeNs> PrepareStep(TimeNs now);
  // Stall offload (EngineConfig::stall_offload; a no-op returning nullopt without it): plans
  // the moves due at `now` and applies them to the cache (offloads until the plan's pressure
  // goal is met, prefetches as planned). Returns the next time it has a prefetch due, if
  // any: the driver calls again then even if no step runs.
  std::optional<TimeNs> RunStallOffload(TimeNs now);

  // ---- The cache's clock, events, contents -----------------------------------------------
  // KvCacheManager::SetClock (checked: `now` is not before the clock) and AdvanceClock
  // (never goes back).
  void SetCacheClock(TimeNs now) { scheduler_.mutable_cache().SetClock(now); }
  void AdvanceCacheClock(TimeNs now) { scheduler_.mutable_cache().AdvanceClock(now); }
  // The cache's events since the last call, oldest first (KvCacheManager::TakeEvents).
  std::vector<kv::KvEvent> TakeEvents() { return scheduler_.mutable_cache().TakeEvents(); }
  // Empties both tiers (KvCacheManager::Reset): FailedPrecondition while a request is active.
  [[nodiscard]] Status ResetCache() { return scheduler_.mutable_cache().Reset(); }
  // Offline-optimal eviction (KvCacheManager::SetNextUseRanking, its errors); RefreshNextUse
  // re-reads the ranking of the cached block `key`.
  [[nodiscard]] Status SetNextUseRanking(const kv::NextUseRanking* ranking) {
    return scheduler_.mutable_cache().SetNextUseRanking(ranking);
  }
  void RefreshNextUse(kv::BlockKey key) { scheduler_.mutable_cache().RefreshNextUse(key); }

  // ---- Const views -----------------------------------------------------------------------
  SchedulerGauges gauges() const { return scheduler_.gauges(); }
  int64_t num_running() const { return scheduler_.num_running(); }
  int64_t num_waiting() const { return scheduler_.num_waiting(); }
  // Requests the scheduler holds (running, waiting, or finished with the report not taken).
  int64_t num_held() const { return scheduler_.num_held(); }
  agentkv::Step current_step() const { return scheduler_.current_step(); }
  const StepSchedulerOptions& scheduler_options() const { return scheduler_.options(); }
  // The cache, read only (stats, matches, priorities, sessions).
  const kv::KvCacheManager& cache() const { return scheduler_.cache(); }
  const kv::BlockKeyHasher& hasher() const { return scheduler_.cache().hasher(); }
  int32_t tokens_per_block() const { return scheduler_.cache().tokens_per_block(); }
  // The scheduler's and the cache's invariants (StepScheduler::CheckInvariants).
  [[nodiscard]] Status CheckInvariants() const { return scheduler_.CheckInvariants(); }
  // The stall offload policy (null when stall offload is off).
  const StallOffloadPolicy* stall_offload() const {
    return stall_offload_.has_value() ? &*stall_offload_ : nullptr;
  }
  const EngineConfig& config() const { return config_; }
  const CostModel& cost_model() const { return cost_model_; }
  const KvPool& kv_pool() const { return kv_pool_; }
  // SGLang's max_total_num_tokens: the device tier in tokens.
  int64_t max_total_num_tokens() const { return kv_pool_.device_tokens(); }

 private:
  Engine(const EngineConfig& config, const CostModel& cost_model, const KvPool& kv_pool,
         StepScheduler scheduler, std::optional<StallOffloadPolicy> stall_offload);

  // Stall offload learns the turn `request` starts at `now` (before the scheduler moves it).
  void NoteStallSubmitted(const SchedulerRequest& request, TimeNs now);

  EngineConfig config_;
  CostModel cost_model_;
  KvPool kv_pool_;
  StepScheduler scheduler_;
  std::optional<StallOffloadPolicy> stall_offload_;
  PrefixPins pins_;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_ENGINE_H_
