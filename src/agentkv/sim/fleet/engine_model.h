// EngineModel: one simulated engine, an engine::Engine (the real StepScheduler over the real
// KvCacheManager, priced by the CostModel, all built from one engine::EngineConfig) paced on the
// simulator's EventLoop.
//
// Timing. The engine runs one scheduler step at a time. A step that starts at time t calls
// Engine::Step() (admission, prefill chunks, decodes, preemption happen at t) and lasts
// d = the step's cost-model estimate; its outputs appear at t + d: requests that
// emitted their first token get first_token = t + d, requests that finished get finished = t + d
// and their completion callback runs then. If work remains (running or waiting requests) the
// next step starts at once, at t + d; otherwise the engine goes idle and schedules nothing.
// Submit() while idle schedules a step at now(); while busy the request waits for the next
// step boundary (continuous batching). A step that computes no token (nothing could run) lasts
// `EngineModelOptions::empty_step_time`, so a stalled engine still advances simulated time.
//
// Aborts. Abort() is SGLang's /abort_request for one request. Like the engine emulator, which
// applies its commands between steps, the engine applies an abort at its next step boundary:
// the step in flight completes (its tokens count, and a request it finishes finishes
// normally), then, before the next step is computed, the request leaves the waiting queue or
// the running batch (its committed prompt blocks stay cached) and completes through the
// normal completion path: report.aborted, the output tokens produced until then,
// first_scheduled and first_token only if it got that far, finished at the boundary. A
// request the engine does not hold (never received, or finished) is ignored, as SGLang
// ignores an unknown rid.
//
// Each step costs one EventLoop event (its end), plus one start event when Submit() wakes an
// idle engine. Gauges are the scheduler's, readable at any time (between
// events they describe the state after the last step's start).
//
// Miss accounting. The engine drains its cache's event log after every step and remembers the
// key of every block that left the cache (dropped, evicted from the host, released by a
// close). At a request's first admission its uncached prompt tokens are split: full blocks
// whose key the engine had lost are `evicted_recompute_tokens` (eviction regret), the rest
// (never computed here, or the partial last block) `cold_tokens`. Keys no later request can
// name (RetireKeys: an ended conversation's own) are forgotten, and so are their blocks when they
// leave the cache afterwards, so what the engine remembers grows with the live conversations and
// the cache, not with every conversation the run has seen.
//
// Every call reaches the engine through engine::Engine's door; the model adds time.
//
// TTL pins (the fixed-ttl and continuum arms). PinPrefix() pins a request's prompt blocks in
// the engine (engine::PrefixPins: priority, supersession, leaf-first re-queueing) and ends the
// pin when its time-to-live elapses in simulated time (an EventLoop event). With
// config.continuum_pins the engine also ends a pin when its conversation's next request is
// admitted, and releases pins under memory pressure at each step start
// (engine::Engine::PrepareStep).
//
// Stall offload (config.stall_offload, the +stall-offload arm): the engine's
// engine::StallOffloadPolicy learns pause lengths from its requests' pause hints and arrival
// times (the engine feeds it at every submit and finish), and runs before every step and at
// its next prefetch time (a wake event, also while the engine is idle): paused sessions' KV
// moves to the host tier under pressure and back before their predicted return. The moves are free
// in step time (asynchronous copies over the host link, as HiCache's write-back); a prefetched
// block counts as on the device from the moment the prefetch is issued, which is its transfer time
// before the predicted return.
//
// Deterministic: a pure function of the options and the Submit() and Abort() calls with their
// times. Hash maps
// are looked up, never iterated. Single-threaded (the EventLoop's thread); not copyable or movable
// (pending events point at it). The engine must outlive every run of the loop while it has a step
// (busy()) or a refused request's completion pending.
#ifndef AGENTKV_SIM_FLEET_ENGINE_MODEL_H_
#define AGENTKV_SIM_FLEET_ENGINE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/kv/block_key_set.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/kv/next_use_ranking.h"
#include "agentkv/sim/fleet/event_loop.h"

namespace agentkv::sim {

struct EngineModelOptions {
  // The engine: presets, scheduler, KV pool (engine::SizeKvPool sizes the tiers) and KV cache
  // policies. The model raises config.cache.event_log_capacity to what it drains per step.
  engine::EngineConfig config;
  // Duration of a step that computes no token. Default: 1 ms. Range: [1 ns, 1 s].
  TimeNs empty_step_time = TimeNs::Millis(1);
  // When set, every step lasts exactly this long instead of the cost model's estimate (a tiny
  // value removes the compute limit). Default: unset. Range: [1 ns, 1 s] when set.
  std::optional<TimeNs> fixed_step_time;
  // Keep every KV cache event (for golden tests and debugging); see events(). Default: false.
  bool keep_events = false;
  // Keep a request's record (FindRecord) and its place in completion_order() once its
  // completion callback returned. Default: true. Off, the engine's memory follows the requests
  // in flight: the callback is the last sight of a record (the replay folds it then,
  // sim/replay/request_tally.h).
  bool keep_finished_records = true;

  // InvalidArgument naming the first bad field (the engine config's included).
  Status Validate() const;
};

// What the engine recorded for one request, in simulated time.
struct EngineRequestRecord {
  RequestId id;
  // Submit() time.
  TimeNs arrival;
  // Start of the step that first admitted it into the running batch; unset for a rejected
  // request.
  std::optional<TimeNs> first_scheduled;
  // End of the step whose prefill emitted the first output token; unset for a rejected request.
  std::optional<TimeNs> first_token;
  // End of the step that produced the last token (or rejected the request).
  std::optional<TimeNs> finished;
  // The scheduler's account of the request (cached and uncached tokens, preemptions, output
  // tokens, rejection), taken from it once the request finished (the scheduler then forgets
  // the request; this record is the engine's history); step numbers are the scheduler's.
  engine::RequestReport report;
  // The report's uncached_tokens split at first admission (see the header comment):
  // cold_tokens + evicted_recompute_tokens == report.uncached_tokens.
  int64_t cold_tokens = 0;
  int64_t evicted_recompute_tokens = 0;

  int64_t cached_tokens() const { return report.cached_device_tokens + report.cached_host_tokens; }
};

class EngineModel {
 public:
  // Runs at a request's finish time, inside the loop's event, once per request. It may call
  // Submit() (closed-loop agents) on this or another engine.
  using CompletionCallback = std::function<void(const EngineRequestRecord&)>;

  // Validates `options` and builds the engine (engine::Engine::Create). `loop` must outlive
  // the engine model.
  static StatusOr<std::unique_ptr<EngineModel>> Create(EventLoop* loop,
                                                       const EngineModelOptions& options);

  EngineModel(const EngineModel&) = delete;
  EngineModel& operator=(const EngineModel&) = delete;

  // Replaces the completion callback (none by default).
  void set_completion_callback(CompletionCallback callback) { on_complete_ = std::move(callback); }

  // Enqueues `request` at loop->now() and, when the engine is idle, schedules a step at now().
  // A well-formed request (prompt and output of at least one token) that could never run here
  // (StepScheduler::CheckFits refuses its token counts) is accepted and refused: it completes
  // at now(), in an event of its own, as rejected (report.rejected, no first_scheduled or
  // first_token), so that conservation holds. Errors are the scheduler's for a malformed
  // request (no prompt or output, more prompt keys than blocks, AlreadyExists for a reused
  // id); nothing is recorded then.
  Status Submit(engine::SchedulerRequest request);

  // Asks the engine to abort request `id` (SGLang's /abort_request): it ends, aborted, at the
  // next step boundary (see the header comment). Returns true when the request will end so
  // (this call or an earlier one asked for it); false, doing nothing, for an id this engine
  // does not hold: never received, already finished, finishing at the end of the step in
  // flight, or refused (it completes as rejected).
  bool Abort(RequestId id);

  // Pins the cached blocks of `keys` at the highest priority for `ttl` of simulated time on
  // behalf of `conversation` (engine::Engine::PinPrefix), superseding its earlier pin (whose
  // expiry then does nothing). At expiry, the blocks still pinned return to the cache's
  // default priority. Returns the blocks pinned. Precondition: ttl > 0.
  int64_t PinPrefix(ConversationId conversation, std::span<const kv::BlockKey> keys, TimeNs ttl);

  // The parent conversation `parent` sent its next request (delivered by the gateway to every
  // engine): engine::Engine::DeliverParentReturn at now(). Returns the children demoted.
  int64_t DeliverParentReturn(ConversationId parent);
  // Closes `session` on the engine's cache (engine::Engine::CloseSession); the tokens freed.
  int64_t CloseSession(SessionId session);
  // Program-level FCFS: program `program` ended (engine::Engine::ForgetProgram).
  void ForgetProgram(ConversationId program);
  // No later request will name any of `keys` (an ended conversation's own; AgentTarget::
  // RetireKeys): the miss accounting forgets them, at once for those lost already, as they leave
  // the cache for the others. The split of every later request is unchanged.
  void RetireKeys(std::span<const kv::BlockKey> keys);
  // Keys the miss accounting holds: those lost and not retired, and those retired whose blocks
  // are still cached.
  size_t remembered_keys() const { return lost_keys_.size() + retired_cached_.size(); }
  // Offline-optimal eviction (engine::Engine::SetNextUseRanking, its errors) and the re-read
  // of one block's rank.
  [[nodiscard]] Status SetNextUseRanking(const kv::NextUseRanking* ranking);
  void RefreshNextUse(kv::BlockKey key) { engine_->RefreshNextUse(key); }

  using PinCounters = engine::PinCounters;
  const PinCounters& pin_counters() const { return engine_->pin_counters(); }
  // Tokens the active pins named when they were taken (blocks evicted since included).
  int64_t pinned_tokens() const { return engine_->pinned_tokens(); }
  // The share of the device tier running requests and active pins hold, in [0, 1]: the KV
  // pressure a pin decision prices (engine::Engine::kv_pressure).
  double kv_pressure() const { return engine_->kv_pressure(); }

  // Every KV cache event so far, in order (empty unless EngineModelOptions::keep_events).
  const std::vector<kv::KvEvent>& events() const { return events_; }

  // Whether a step is in flight (an event pending for this engine).
  bool busy() const { return busy_; }
  engine::SchedulerGauges gauges() const { return engine_->gauges(); }
  // Requests running plus waiting: the load a router sees.
  int64_t in_flight() const { return engine_->num_running() + engine_->num_waiting(); }

  // The record of a submitted request (partial while it runs), or nullptr for an unknown id
  // (and, without keep_finished_records, for a request whose completion callback returned).
  const EngineRequestRecord* FindRecord(RequestId id) const;
  // Finished requests, in finishing order (ties: the scheduler's order within a step); empty
  // without keep_finished_records.
  const std::vector<RequestId>& completion_order() const { return completion_order_; }
  int64_t num_steps() const { return num_steps_; }
  // Sum of every step's duration (the engine's busy time).
  TimeNs busy_time() const { return busy_time_; }
  // Sum over the steps that computed a token of the cost model's compute time
  // (CostModel::Breakdown(shape).compute_time); 0 with a fixed step time.
  TimeNs compute_time() const { return compute_time_; }

  // The engine, read only (its const views: cache, hasher, invariants, stall offload).
  const engine::Engine& engine() const { return *engine_; }
  const engine::CostModel& cost_model() const { return engine_->cost_model(); }

 private:
  EngineModel(EventLoop* loop, const EngineModelOptions& options, engine::Engine engine);

  // Completes refused request `id` at now() (see Submit).
  void CompleteRefused(RequestId id);
  // At a step boundary: applies the aborts asked for since the last one, then, unless no
  // work remains (the engine goes idle), runs one scheduler step at now() and schedules its
  // end. The aborted requests' callbacks run between the two, so that what they do (a submit,
  // a session close) is seen by the step.
  void StartStep();
  // Ends every request in aborts_ at now() (scheduler Abort and TakeReport, record finished).
  // Returns them in the order the aborts were asked for.
  std::vector<RequestId> ApplyAborts();
  // Records `id` finished at now() with `report`, taken from the scheduler.
  void RecordFinished(RequestId id, engine::RequestReport report);
  // Runs the completion callback of finished request `id`, then forgets its record unless
  // options_.keep_finished_records.
  void Complete(RequestId id);
  // Applies the outputs of `result` at now() and starts the next step when work remains.
  void EndStep(const engine::StepResult& result);
  // Drains the cache's events into lost_keys_ (and events_ when kept).
  void DrainCacheEvents();
  // Records the first admission of `id` at now(): its time and its miss split.
  void RecordFirstAdmission(RequestId id);
  // Stall offload (config.stall_offload): keeps one wake scheduled at `wake`, the engine's
  // next prefetch, so that prefetches happen while the engine is idle; an earlier pending
  // wake stays.
  void ScheduleStallWake(std::optional<TimeNs> wake);

  EventLoop* loop_;
  EngineModelOptions options_;
  std::optional<engine::Engine> engine_;
  CompletionCallback on_complete_;
  bool busy_ = false;
  int64_t num_steps_ = 0;
  TimeNs busy_time_;
  TimeNs compute_time_;
  // Looked up by id only.
  std::unordered_map<RequestId, EngineRequestRecord> records_;
  std::vector<RequestId> completion_order_;
  // Prompt keys of requests not yet admitted, for the miss split; erased at first admission.
  std::unordered_map<RequestId, std::vector<kv::BlockKey>> pending_keys_;
  // Requests to abort at the next step boundary, in the order asked; each held by the
  // scheduler, not finished, and listed once.
  std::vector<RequestId> aborts_;
  // Keys of blocks that left this engine's cache at some point, less the retired ones. Looked
  // up, never iterated.
  kv::BlockKeySet lost_keys_;
  // Retired keys whose blocks are still cached here: their loss is not recorded (bounded by the
  // cache's blocks).
  kv::BlockKeySet retired_cached_;
  std::vector<kv::KvEvent> events_;
  // The stall offload wake pending, if any.
  std::optional<TimeNs> stall_wake_at_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_ENGINE_MODEL_H_
