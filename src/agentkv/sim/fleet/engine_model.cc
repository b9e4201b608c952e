#include "agentkv/sim/fleet/engine_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

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
      !engine_->CheckFits(request.prompt_tokens, request.max_new_tokens).ok()) {
    if (records_.contains(id)) return AlreadyExistsError("request already submitted");
    EngineRequestRecord record;
    record.id = id;
    record.arrival = loop_->now();
    record.report.id = id;
    record.report.submitted = engine_->current_step();
    record.report.rejected = true;
    records_.emplace(id, record);
    // In an event of its own: the caller finishes its bookkeeping of the submit first.
    loop_->Schedule(loop_->now(), [this, id] { CompleteRefused(id); });
    return Status::Ok();
  }
  std::vector<kv::BlockKey> keys = request.prompt_keys;
  // The gap-aware eviction order measures a session's pause up to this arrival.
  request.kv_options.arrival = loop_->now();
  AGENTKV_RETURN_IF_ERROR(engine_->Submit(std::move(request), loop_->now()));
  pending_keys_.emplace(id, std::move(keys));
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
  record.report.finished = engine_->current_step();
  Complete(id);
}

bool EngineModel::Abort(RequestId id) {
  const engine::RequestReport* report = engine_->FindReport(id);
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
  const engine::PinTicket ticket = engine_->PinPrefix(conversation, keys);
  loop_->ScheduleAfter(ttl, [this, conversation, generation = ticket.generation] {
    engine_->ExpirePin(conversation, generation);
  });
  return ticket.pinned_blocks;
}

void EngineModel::ScheduleStallWake(std::optional<TimeNs> wake) {
  if (!wake.has_value() || (stall_wake_at_.has_value() && *stall_wake_at_ <= *wake)) return;
  // One wake pending at a time, the earliest: a later one is scheduled when it runs.
  stall_wake_at_ = *wake;
  loop_->Schedule(*wake, [this, at = *wake] {
    if (stall_wake_at_ != at) return;  // Superseded by an earlier wake.
    stall_wake_at_.reset();
    ScheduleStallWake(engine_->RunStallOffload(loop_->now()));
    // Between steps: what moved is drained now, so the next admissions see it.
    DrainCacheEvents();
  });
}

void EngineModel::DrainCacheEvents() {
  for (const kv::KvEvent& event : engine_->TakeEvents()) {
    switch (event.kind) {
      case kv::KvEventKind::kDropped:
      case kv::KvEventKind::kEvicted:
      case kv::KvEventKind::kReleased:
        if (retired_cached_.size() == 0 || !retired_cached_.erase(event.key)) {
          lost_keys_.insert(event.key);
        }
        break;
      default:
        break;
    }
    if (options_.keep_events) events_.push_back(event);
  }
  AGENTKV_CHECK(engine_->cache().dropped_events() == 0)
      << "the KV event log overflowed; the miss split would be wrong";
}

void EngineModel::RetireKeys(std::span<const kv::BlockKey> keys) {
  // Losses already logged are recorded first, so that none lands after its key was forgotten.
  DrainCacheEvents();
  const kv::KvCacheManager& cache = engine_->cache();
  for (const kv::BlockKey key : keys) {
    lost_keys_.erase(key);
    if (cache.FindTier(key).has_value()) retired_cached_.insert(key);
  }
}

void EngineModel::RecordFirstAdmission(RequestId id) {
  EngineRequestRecord& record = records_.at(id);
  if (record.first_scheduled.has_value()) return;
  record.first_scheduled = loop_->now();
  auto keys = pending_keys_.find(id);
  AGENTKV_CHECK(keys != pending_keys_.end()) << "admitted request " << id << " has no keys";
  const engine::RequestReport* report = engine_->FindReport(id);
  AGENTKV_CHECK(report != nullptr);
  const int64_t block = engine_->tokens_per_block();
  const int64_t cached_blocks = (report->cached_device_tokens + report->cached_host_tokens) / block;
  int64_t lost = 0;
  for (size_t i = static_cast<size_t>(cached_blocks); i < keys->second.size(); ++i) {
    if (lost_keys_.contains(keys->second[i])) ++lost;
  }
  record.evicted_recompute_tokens = std::min(report->uncached_tokens, lost * block);
  record.cold_tokens = report->uncached_tokens - record.evicted_recompute_tokens;
  pending_keys_.erase(keys);
}

std::vector<RequestId> EngineModel::ApplyAborts() {
  std::vector<RequestId> aborted;
  aborted.swap(aborts_);
  for (RequestId id : aborted) {
    // Abort() queued only requests held and unfinished, and only a step's end or an abort
    // finishes one: the step that ended at this boundary was computed before the abort.
    StatusOr<bool> ended = engine_->Abort(id);
    AGENTKV_CHECK(ended.ok() && *ended)
        << "abort of request " << id << ": "
        << (ended.ok() ? "already finished" : ended.status().ToString());
    StatusOr<engine::RequestReport> report = engine_->TakeReport(id, loop_->now());
    AGENTKV_CHECK(report.ok()) << "aborted request " << id << ": " << report.status();
    // A request aborted while it waited was never admitted: it computed nothing.
    pending_keys_.erase(id);
    RecordFinished(id, *std::move(report));
  }
  return aborted;
}

int64_t EngineModel::DeliverParentReturn(ConversationId parent) {
  return engine_->DeliverParentReturn(parent, loop_->now());
}

int64_t EngineModel::CloseSession(SessionId session) { return engine_->CloseSession(session); }

void EngineModel::ForgetProgram(ConversationId program) { engine_->ForgetProgram(program); }

Status EngineModel::SetNextUseRanking(const kv::NextUseRanking* ranking) {
  return engine_->SetNextUseRanking(ranking);
}

void EngineModel::RecordFinished(RequestId id, engine::RequestReport report) {
  EngineRequestRecord& record = records_.at(id);
  record.finished = loop_->now();
  record.report = std::move(report);
}

void EngineModel::Complete(RequestId id) {
  if (options_.keep_finished_records) completion_order_.push_back(id);
  if (on_complete_) on_complete_(records_.at(id));
  if (!options_.keep_finished_records) records_.erase(id);
}

void EngineModel::StartStep() {
  AGENTKV_CHECK(busy_);
  // The requests this step finishes (or aborts) count as finished now in the gap-aware order.
  engine_->AdvanceCacheClock(loop_->now());
  if (!aborts_.empty()) {
    const std::vector<RequestId> aborted = ApplyAborts();
    // Decide before the callbacks run, as EndStep does: a callback's Submit() sees the engine
    // busy and relies on the step started below, or, idle, schedules one itself.
    const bool more = in_flight() > 0;
    if (!more) busy_ = false;
    for (RequestId id : aborted) Complete(id);
    if (!more) return;
  }
  // Continuum's release of pins under pressure, then stall offload.
  ScheduleStallWake(engine_->PrepareStep(loop_->now()));
  // Closes, pins and stall offloads between steps may have produced events; drain them before
  // the step so that the step's admissions see every block lost so far.
  DrainCacheEvents();
  // The cache's clock is the loop's (only time bounds read it).
  engine_->SetCacheClock(loop_->now());
  engine::EngineStep step = engine_->Step();
  DrainCacheEvents();
  for (RequestId id : step.result.admitted) RecordFirstAdmission(id);
  ++num_steps_;
  TimeNs duration = options_.empty_step_time;
  if (options_.fixed_step_time.has_value()) {
    duration = *options_.fixed_step_time;
  } else if (step.computed()) {
    duration = step.cost;
    compute_time_ += step.compute_time;
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
    StatusOr<engine::RequestReport> report = engine_->TakeReport(id, loop_->now());
    AGENTKV_CHECK(report.ok()) << "finished request " << id << ": " << report.status();
    RecordFinished(id, *std::move(report));
    EngineRequestRecord& record = records_.at(id);
    if (record.report.rejected) {
      // A rejected request never ran: it computed nothing (the replay counts it as refused).
      pending_keys_.erase(id);
      record.cold_tokens = 0;
    }
  }
  // Decide before the callbacks run: a callback's Submit() sees the engine busy and relies on
  // the step started below.
  const bool more = in_flight() > 0;
  if (!more) busy_ = false;
  for (RequestId id : result.finished) Complete(id);
  // When idle, a callback's Submit() has already scheduled the next step at now().
  if (more) StartStep();
}

}  // namespace agentkv::sim
