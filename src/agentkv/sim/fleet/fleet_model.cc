#include "agentkv/sim/fleet/fleet_model.h"

#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::sim {
Status FleetModelOptions::Validate() const {
  if (num_engines < 1 || num_engines > 65536) {
    return InvalidArgumentError("num_engines must be in [1, 65536], got " +
                                std::to_string(num_engines));
  }
  routing::RouterOptions router_options = router;
  router_options.num_engines = num_engines;
  AGENTKV_RETURN_IF_ERROR(router_options.Validate());
  return engine.Validate();
}

StatusOr<std::unique_ptr<FleetModel>> FleetModel::Create(EventLoop* loop,
                                                         const FleetModelOptions& options) {
  AGENTKV_CHECK(loop != nullptr);
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  routing::RouterOptions router_options = options.router;
  router_options.num_engines = options.num_engines;
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<routing::Router> router,
                           routing::Router::Create(router_options));
  std::vector<std::unique_ptr<EngineModel>> engines;
  engines.reserve(static_cast<size_t>(options.num_engines));
  for (int32_t i = 0; i < options.num_engines; ++i) {
    AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<EngineModel> engine,
                             EngineModel::Create(loop, options.engine));
    engines.push_back(std::move(engine));
  }
  return std::unique_ptr<FleetModel>(new FleetModel(std::move(router), std::move(engines)));
}

FleetModel::FleetModel(std::unique_ptr<routing::Router> router,
                       std::vector<std::unique_ptr<EngineModel>> engines)
    : router_(std::move(router)), engines_(std::move(engines)) {
  for (size_t i = 0; i < engines_.size(); ++i) {
    const EngineId id(static_cast<int32_t>(i));
    engines_[i]->set_completion_callback([this, id](const EngineRequestRecord& record) {
      ++num_completed_;
      router_->SetLoad(id, engines_[static_cast<size_t>(id.value())]->in_flight());
      if (on_complete_) on_complete_(id, record);
    });
  }
}

StatusOr<EngineId> FleetModel::Submit(engine::SchedulerRequest request, uint64_t routing_key) {
  for (size_t i = 0; i < engines_.size(); ++i) {
    router_->SetLoad(EngineId(static_cast<int32_t>(i)), engines_[i]->in_flight());
  }
  std::vector<uint64_t> block_keys;
  block_keys.reserve(request.prompt_keys.size());
  for (kv::BlockKey key : request.prompt_keys) block_keys.push_back(key.value());
  const EngineId target =
      router_->Route(routing::RouteRequest{.routing_key = routing_key, .block_keys = block_keys});
  EngineModel& engine = mutable_engine(target);
  AGENTKV_RETURN_IF_ERROR(engine.Submit(std::move(request)));
  ++num_submitted_;
  router_->SetLoad(target, engine.in_flight());
  return target;
}

std::vector<int64_t> FleetModel::CloseSessionOnEveryEngine(SessionId session) {
  std::vector<int64_t> freed;
  freed.reserve(engines_.size());
  for (const std::unique_ptr<EngineModel>& engine : engines_) {
    freed.push_back(engine->CloseSession(session));
  }
  return freed;
}

void FleetModel::RetireKeysOnEveryEngine(std::span<const kv::BlockKey> keys) {
  for (const std::unique_ptr<EngineModel>& engine : engines_) engine->RetireKeys(keys);
}

std::vector<int64_t> FleetModel::DemoteFinishedSubagentsOnEveryEngine(ConversationId parent) {
  std::vector<int64_t> demoted;
  demoted.reserve(engines_.size());
  for (const std::unique_ptr<EngineModel>& engine : engines_) {
    demoted.push_back(engine->DeliverParentReturn(parent));
  }
  return demoted;
}

int32_t FleetModel::AbortOnEveryEngine(RequestId id) {
  int32_t aborting = 0;
  for (const std::unique_ptr<EngineModel>& engine : engines_) {
    if (engine->Abort(id)) ++aborting;
  }
  return aborting;
}

const EngineModel& FleetModel::engine(EngineId id) const {
  AGENTKV_CHECK(id.value() >= 0 && id.value() < num_engines()) << "unknown engine " << id;
  return *engines_[static_cast<size_t>(id.value())];
}

EngineModel& FleetModel::mutable_engine(EngineId id) {
  AGENTKV_CHECK(id.value() >= 0 && id.value() < num_engines()) << "unknown engine " << id;
  return *engines_[static_cast<size_t>(id.value())];
}

std::vector<engine::SchedulerGauges> FleetModel::AllGauges() const {
  std::vector<engine::SchedulerGauges> gauges;
  gauges.reserve(engines_.size());
  for (const std::unique_ptr<EngineModel>& engine : engines_) gauges.push_back(engine->gauges());
  return gauges;
}

}  // namespace agentkv::sim
