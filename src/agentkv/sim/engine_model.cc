#include "agentkv/sim/engine_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/kv/retention.h"

namespace agentkv::sim {
namespace {

constexpr int64_t kMaxEventLogCapacity = int64_t{1} << 26;

}  // namespace

Status EngineModelOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(config.Validate());
  if (empty_step_time < TimeNs(1) || empty_step_time > TimeNs::Millis(1000)) {
    return InvalidArgumentError("empty_step_time must be in [1 ns, 1 s], got " +
                                std::to_string(empty_step_time.ns()) + " ns");
  }
  if (fixed_step_time.has_value() &&
      (*fixed_step_time < TimeNs(1) || *fixed_step_time > TimeNs::Millis(1000))) {
    return InvalidArgumentError("fixed_step_time must be in [1 ns, 1 s], got " +
                                std::to_string(fixed_step_time->ns()) + " ns");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<EngineModel>> EngineModel::Create(EventLoop* loop,
                                                           const EngineModelOptions& options) {
  AGENTKV_CHECK(loop != nullptr);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  engine::EngineConfig config = options.config;
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool, engine::SizeKvPool(config));
  // The engine drains the log around every step and every close; one step (or close) moves
  // each block at most a few times, so twice the blocks of both tiers never overflows.
  config.cache.event_log_capacity =
      std::max(config.cache.event_log_capacity,
               std::min(kMaxEventLogCapacity, 2 * (pool.device_blocks + pool.host_blocks) + 4096));
  AGENTKV_ASSIGN_OR_RETURN(engine::Engine engine, engine::Engine::Create(config));
  return std::unique_ptr<EngineModel>(new EngineModel(loop, options, std::move(engine)));
}

EngineModel::EngineModel(EventLoop* loop, const EngineModelOptions& options, engine::Engine engine)
    : loop_(loop), options_(options) {
  engine_.emplace(std::move(engine));
}

Status EngineModel::Submit(engine::SchedulerRequest request) {
  const RequestId id = request.id;
  // A request of no prompt or no output is malformed (the scheduler's error below); one that
  // is well formed but too large for this engine is refused.
  if (request.prompt_tokens >= 1 && request.max_new_tokens >= 1 &&
      !engine_->scheduler().CheckFits(request.prompt_tokens, request.max_new_tokens).ok()) {
    if (records_.contains(id)) return AlreadyExistsError("request already submitted");
    EngineRequestRecord record;
    record.id = id;
    record.arrival = loop_->now();
    record.report.id = id;
    record.report.submitted = engine_->scheduler().current_step();
    record.report.rejected = true;
    records_.emplace(id, record);
    // In an event of its own: the caller finishes its bookkeeping of the submit first.
    loop_->Schedule(loop_->now(), [this, id] { CompleteRefused(id); });
    return Status::Ok();
  }
  std::vector<kv::BlockKey> keys = request.prompt_keys;
  const std::optional<ConversationId> conversation = request.kv_options.conversation;
  // The gap-aware eviction order measures a session's pause up to this arrival.
  request.kv_options.arrival = loop_->now();
  // Before the scheduler moves the request; a request it refuses as malformed ends the turn
  // it would have started at once.
  engine_->NoteSubmitted(request, loop_->now());
  if (Status submitted = engine_->mutable_scheduler().Submit(std::move(request)); !submitted.ok()) {
    engine_->NoteFinished(id, /*completed=*/false, loop_->now());
    return submitted;
  }
  pending_keys_.emplace(id, std::move(keys));
  if (conversation.has_value()) {
    auto pin = pins_.find(*conversation);
    if (pin != pins_.end() && pin->second.active && !pin->second.returned) {
      pin->second.returned = true;
      ++pin_counters_.returned;
      // Continuum: the returning request takes the blocks over at its admission; the pin
      // protects them until then.
      if (options_.continuum_pins) returning_.emplace(id, pin->second.generation);
    }
  }
  EngineRequestRecord record;
  record.id = id;
  record.arrival = loop_->now();
  records_.emplace(id, record);
  if (!busy_) {
    busy_ = true;
    loop_->Schedule(loop_->now(), [this] { StartStep(); });
  }
  return Status::Ok();
}

void EngineModel::CompleteRefused(RequestId id) {
  EngineRequestRecord& record = records_.at(id);
  record.finished = loop_->now();
  record.report.finished = engine_->scheduler().current_step();
  completion_order_.push_back(id);
  if (on_complete_) on_complete_(record);
}

bool EngineModel::Abort(RequestId id) {
  const engine::RequestReport* report = engine_->scheduler().FindReport(id);
  // Not held (never received, refused, or finished and taken), or finished by the step in
  // flight (its report is taken at the step's end): SGLang ignores the abort.
  if (report == nullptr || report->finished.has_value()) return false;
  if (std::find(aborts_.begin(), aborts_.end(), id) == aborts_.end()) aborts_.push_back(id);
  return true;
}

const EngineRequestRecord* EngineModel::FindRecord(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

int64_t EngineModel::PinPrefix(ConversationId conversation, std::span<const kv::BlockKey> keys,
                               TimeNs ttl) {
  AGENTKV_CHECK(ttl > TimeNs(0)) << "pin ttl must be positive";
  if (pins_.contains(conversation)) {
    // Superseded: the earlier pin's expiry finds another generation and does nothing.
    Pin& old = pins_.at(conversation);
    pin_order_.erase(old.generation);
    pinned_tokens_ -=
        static_cast<int64_t>(old.keys.size()) * engine_->scheduler().cache().tokens_per_block();
  }
  kv::KvCacheManager& cache = engine_->mutable_scheduler().mutable_cache();
  Pin& pin = pins_[conversation];
  pin.generation = next_pin_generation_++;
  pin.keys.assign(keys.begin(), keys.end());
  pin.returned = false;
  pin.active = true;
  pin_order_.emplace(pin.generation, conversation);
  pinned_tokens_ += static_cast<int64_t>(keys.size()) * cache.tokens_per_block();
  ++pin_counters_.pins;
  int64_t pinned = 0;
  // Leaf first: each block goes to the most recently used end of the top bucket, so the root
  // ends the most recent and an eviction takes the chain from its leaf.
  for (auto key = keys.rbegin(); key != keys.rend(); ++key) {
    if (cache.SetPriority(*key, kv::kMaxPriority).ok()) ++pinned;
  }
  const uint64_t generation = pin.generation;
  loop_->ScheduleAfter(ttl,
                       [this, conversation, generation] { ExpirePin(conversation, generation); });
  return pinned;
}

double EngineModel::kv_pressure() const {
  const engine::SchedulerGauges g = gauges();
  if (g.max_total_num_tokens <= 0) return 1.0;
  const double held = static_cast<double>(g.num_used_tokens + pinned_tokens_);
  return std::clamp(held / static_cast<double>(g.max_total_num_tokens), 0.0, 1.0);
}

void EngineModel::ExpirePin(ConversationId conversation, uint64_t generation) {
  auto it = pins_.find(conversation);
  if (it == pins_.end() || it->second.generation != generation) return;
  if (!it->second.returned) ++pin_counters_.expired;
  // Back to the most recently used end: under SGLang's LRU the program that outlived its TTL
  // usually still comes back, and its KV is as recent as its last turn.
  Unpin(conversation, /*evict_first=*/false);
}

void EngineModel::Unpin(ConversationId conversation, bool evict_first) {
  auto it = pins_.find(conversation);
  AGENTKV_CHECK(it != pins_.end());
  Pin& pin = it->second;
  kv::KvCacheManager& cache = engine_->mutable_scheduler().mutable_cache();
  const kv::Priority fallback = cache.options().default_priority;
  auto unpin = [&](kv::BlockKey key) {
    StatusOr<kv::Priority> priority = cache.GetPriority(key);
    if (priority.ok() && *priority == kv::kMaxPriority) {
      AGENTKV_CHECK(cache.SetPriority(key, fallback, std::nullopt, evict_first).ok());
    }
  };
  // Either way the root ends the most recently used of the chain, so an eviction takes the
  // chain from its leaf: to the most recently used end leaf first, to the least recently used
  // end (evict_first) root first.
  if (evict_first) {
    for (const kv::BlockKey key : pin.keys) unpin(key);
  } else {
    for (auto key = pin.keys.rbegin(); key != pin.keys.rend(); ++key) unpin(*key);
  }
  pin_order_.erase(pin.generation);
  pinned_tokens_ -= static_cast<int64_t>(pin.keys.size()) * cache.tokens_per_block();
  AGENTKV_CHECK_GE(pinned_tokens_, 0);
  pins_.erase(it);
}

void EngineModel::EndReturnedPin(RequestId id) {
  auto it = returning_.find(id);
  if (it == returning_.end()) return;
  const uint64_t generation = it->second;
  returning_.erase(it);
  auto order = pin_order_.find(generation);
  // Expired, superseded or released under pressure meanwhile: nothing left to end.
  if (order != pin_order_.end()) Unpin(order->second, /*evict_first=*/false);
}

void EngineModel::UnpinUnderPressure() {
  if (!options_.continuum_pins || pin_order_.empty() || engine_->scheduler().num_waiting() == 0) {
    return;
  }
  const engine::StepSchedulerOptions& sched = engine_->scheduler().options();
  const int64_t chunk = sched.chunked_prefill_size > 0
                            ? std::min(sched.chunked_prefill_size, sched.max_prefill_tokens)
                            : sched.max_prefill_tokens;
  const engine::SchedulerGauges g = gauges();
  while (!pin_order_.empty() && g.available_tokens + g.evictable_tokens - pinned_tokens_ < chunk) {
    const ConversationId oldest = pin_order_.begin()->second;
    // A pin whose program already returned counts as returned, not as released.
    if (!pins_.at(oldest).returned) ++pin_counters_.unpinned_under_pressure;
    Unpin(oldest, /*evict_first=*/true);
  }
}

void EngineModel::RunStallOffload() {
  const std::optional<TimeNs> wake = engine_->RunStallOffload(loop_->now());
  if (!wake.has_value() || (stall_wake_at_.has_value() && *stall_wake_at_ <= *wake)) return;
  // One wake pending at a time, the earliest: a later one is scheduled when it runs.
  stall_wake_at_ = *wake;
  loop_->Schedule(*wake, [this, at = *wake] {
    if (stall_wake_at_ != at) return;  // Superseded by an earlier wake.
    stall_wake_at_.reset();
    RunStallOffload();
    // Between steps: what moved is drained now, so the next admissions see it.
    DrainCacheEvents();
  });
}

void EngineModel::DrainCacheEvents() {
  for (const kv::KvEvent& event : engine_->mutable_scheduler().mutable_cache().TakeEvents()) {
    switch (event.kind) {
      case kv::KvEventKind::kDropped:
      case kv::KvEventKind::kEvicted:
      case kv::KvEventKind::kReleased:
        lost_keys_.insert(event.key);
        break;
      default:
        break;
    }
    if (options_.keep_events) events_.push_back(event);
  }
  AGENTKV_CHECK(engine_->scheduler().cache().dropped_events() == 0)
      << "the KV event log overflowed; the miss split would be wrong";
}

void EngineModel::RecordFirstAdmission(RequestId id) {
  EngineRequestRecord& record = records_.at(id);
  if (record.first_scheduled.has_value()) return;
  record.first_scheduled = loop_->now();
  auto keys = pending_keys_.find(id);
  AGENTKV_CHECK(keys != pending_keys_.end()) << "admitted request " << id << " has no keys";
  const engine::RequestReport* report = engine_->scheduler().FindReport(id);
  AGENTKV_CHECK(report != nullptr);
  const int64_t block = engine_->scheduler().cache().tokens_per_block();
  const int64_t cached_blocks = (report->cached_device_tokens + report->cached_host_tokens) / block;
  int64_t lost = 0;
  for (size_t i = static_cast<size_t>(cached_blocks); i < keys->second.size(); ++i) {
    if (lost_keys_.contains(keys->second[i])) ++lost;
  }
  record.evicted_recompute_tokens = std::min(report->uncached_tokens, lost * block);
  record.cold_tokens = report->uncached_tokens - record.evicted_recompute_tokens;
  pending_keys_.erase(keys);
  EndReturnedPin(id);
}

std::vector<RequestId> EngineModel::ApplyAborts() {
  std::vector<RequestId> aborted;
  aborted.swap(aborts_);
  for (RequestId id : aborted) {
    // Abort() queued only requests held and unfinished, and only a step's end or an abort
    // finishes one: the step that ended at this boundary was computed before the abort.
    StatusOr<bool> ended = engine_->mutable_scheduler().Abort(id);
    AGENTKV_CHECK(ended.ok() && *ended)
        << "abort of request " << id << ": "
        << (ended.ok() ? "already finished" : ended.status().ToString());
    StatusOr<engine::RequestReport> report = engine_->mutable_scheduler().TakeReport(id);
    AGENTKV_CHECK(report.ok()) << "aborted request " << id << ": " << report.status();
    // A request aborted while it waited was never admitted: it computed nothing.
    pending_keys_.erase(id);
    EndReturnedPin(id);
    RecordFinished(id, *std::move(report));
  }
  return aborted;
}

int64_t EngineModel::DemoteFinishedSubagents(ConversationId parent) {
  kv::KvCacheManager& cache = engine_->mutable_scheduler().mutable_cache();
  cache.SetClock(loop_->now());
  return cache.DemoteFinishedSubagents(parent);
}

void EngineModel::RecordFinished(RequestId id, engine::RequestReport report) {
  engine_->NoteFinished(id, !report.aborted && !report.rejected, loop_->now());
  EngineRequestRecord& record = records_.at(id);
  record.finished = loop_->now();
  record.report = std::move(report);
  completion_order_.push_back(id);
}

void EngineModel::StartStep() {
  AGENTKV_CHECK(busy_);
  // The requests this step finishes (or aborts) count as finished now in the gap-aware order.
  engine_->mutable_scheduler().mutable_cache().AdvanceClock(loop_->now());
  if (!aborts_.empty()) {
    const std::vector<RequestId> aborted = ApplyAborts();
    // Decide before the callbacks run, as EndStep does: a callback's Submit() sees the engine
    // busy and relies on the step started below, or, idle, schedules one itself.
    const bool more = engine_->scheduler().num_running() + engine_->scheduler().num_waiting() > 0;
    if (!more) busy_ = false;
    for (RequestId id : aborted) {
      if (on_complete_) on_complete_(records_.at(id));
    }
    if (!more) return;
  }
  UnpinUnderPressure();
  RunStallOffload();
  // Closes, pins and stall offloads between steps may have produced events; drain them before
  // the step so that the step's admissions see every block lost so far.
  DrainCacheEvents();
  // The cache's clock is the loop's (only time bounds read it).
  engine_->mutable_scheduler().mutable_cache().SetClock(loop_->now());
  engine::EngineStep step = engine_->Step();
  DrainCacheEvents();
  for (RequestId id : step.result.admitted) RecordFirstAdmission(id);
  ++num_steps_;
  TimeNs duration = options_.empty_step_time;
  if (options_.fixed_step_time.has_value()) {
    duration = *options_.fixed_step_time;
  } else if (step.computed()) {
    duration = step.cost;
    compute_time_ += engine_->cost_model().Breakdown(step.shape).compute_time;
  }
  busy_time_ += duration;
  loop_->ScheduleAfter(duration, [this, result = std::move(step.result)] { EndStep(result); });
}

void EngineModel::EndStep(const engine::StepResult& result) {
  const TimeNs now = loop_->now();
  for (const engine::ScheduledWork& work : result.batch) {
    if (!work.emitted_token) continue;
    EngineRequestRecord& record = records_.at(work.id);
    if (!record.first_token.has_value()) record.first_token = now;
  }
  for (RequestId id : result.finished) {
    StatusOr<engine::RequestReport> report = engine_->mutable_scheduler().TakeReport(id);
    AGENTKV_CHECK(report.ok()) << "finished request " << id << ": " << report.status();
    RecordFinished(id, *std::move(report));
    EngineRequestRecord& record = records_.at(id);
    if (record.report.rejected) {
      // A rejected request never ran: it computed nothing (the replay counts it as refused).
      pending_keys_.erase(id);
      EndReturnedPin(id);
      record.cold_tokens = 0;
    }
  }
  // Decide before the callbacks run: a callback's Submit() sees the engine busy and relies on
  // the step started below.
  const bool more = engine_->scheduler().num_running() + engine_->scheduler().num_waiting() > 0;
  if (!more) busy_ = false;
  for (RequestId id : result.finished) {
    if (on_complete_) on_complete_(records_.at(id));
  }
  // When idle, a callback's Submit() has already scheduled the next step at now().
  if (more) StartStep();
}

}  // namespace agentkv::sim
