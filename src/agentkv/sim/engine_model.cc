#include "agentkv/sim/engine_model.h"

#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::sim {

Status EngineModelOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(scheduler.Validate());
  AGENTKV_RETURN_IF_ERROR(cache.Validate());
  if (empty_step_time < TimeNs(1) || empty_step_time > TimeNs::Millis(1000)) {
    return InvalidArgumentError("empty_step_time must be in [1 ns, 1 s], got " +
                                std::to_string(empty_step_time.ns()) + " ns");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<EngineModel>> EngineModel::Create(EventLoop* loop,
                                                           const engine::CostModel& cost_model,
                                                           const EngineModelOptions& options) {
  AGENTKV_CHECK(loop != nullptr);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  kv::KvCacheOptions cache_options = options.cache;
  if (cache_options.device_blocks == 0) {
    cache_options.device_blocks = cost_model.KvCapacityBlocks(cache_options.tokens_per_block);
  }
  AGENTKV_ASSIGN_OR_RETURN(kv::KvCacheManager cache, kv::KvCacheManager::Create(cache_options));
  AGENTKV_ASSIGN_OR_RETURN(engine::StepScheduler scheduler,
                           engine::StepScheduler::Create(options.scheduler, std::move(cache)));
  return std::unique_ptr<EngineModel>(
      new EngineModel(loop, cost_model, options, std::move(scheduler)));
}

EngineModel::EngineModel(EventLoop* loop, const engine::CostModel& cost_model,
                         const EngineModelOptions& options, engine::StepScheduler scheduler)
    : loop_(loop), cost_model_(cost_model), options_(options) {
  scheduler_.emplace(std::move(scheduler));
}

Status EngineModel::Submit(engine::SchedulerRequest request) {
  const RequestId id = request.id;
  AGENTKV_RETURN_IF_ERROR(scheduler_->Submit(std::move(request)));
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

const EngineRequestRecord* EngineModel::FindRecord(RequestId id) const {
  auto it = records_.find(id);
  return it == records_.end() ? nullptr : &it->second;
}

void EngineModel::StartStep() {
  AGENTKV_CHECK(busy_);
  engine::StepResult result = scheduler_->Step();
  ++num_steps_;
  engine::StepShape shape;
  shape.prefill_tokens = result.prefill_tokens;
  shape.decode_tokens = result.decode_tokens;
  shape.num_requests = static_cast<int64_t>(result.batch.size());
  for (const engine::ScheduledWork& work : result.batch)
    shape.context_tokens += work.context_tokens;
  TimeNs duration = options_.empty_step_time;
  if (shape.prefill_tokens + shape.decode_tokens > 0) {
    duration = cost_model_.Estimate(shape);
  }
  busy_time_ += duration;
  loop_->ScheduleAfter(duration, [this, result = std::move(result)] { EndStep(result); });
}

void EngineModel::EndStep(const engine::StepResult& result) {
  const TimeNs now = loop_->now();
  for (const engine::ScheduledWork& work : result.batch) {
    if (!work.emitted_token) continue;
    EngineRequestRecord& record = records_.at(work.id);
    if (!record.first_token.has_value()) record.first_token = now;
  }
  for (RequestId id : result.finished) {
    EngineRequestRecord& record = records_.at(id);
    const engine::RequestReport* report = scheduler_->FindReport(id);
    AGENTKV_CHECK(report != nullptr) << "finished request " << id << " has no report";
    record.finished = now;
    record.report = *report;
    completion_order_.push_back(id);
  }
  // Decide before the callbacks run: a callback's Submit() sees the engine busy and relies on
  // the step started below.
  const bool more = scheduler_->num_running() + scheduler_->num_waiting() > 0;
  if (!more) busy_ = false;
  for (RequestId id : result.finished) {
    if (on_complete_) on_complete_(records_.at(id));
  }
  // When idle, a callback's Submit() has already scheduled the next step at now().
  if (more) StartStep();
}

}  // namespace agentkv::sim
