// FleetModel: N simulated engines (EngineModel) sharing one EventLoop behind a routing::Router.
//
// Submit() refreshes the router's view of every engine's load (its running plus queued
// requests, read live from the schedulers), routes the request (the routing key for
// consistent_hashing, the prompt's block keys for cache_aware) and submits it to the chosen
// engine at the loop's now(). The live load stands in for sgl-router's view; the coordinator
// that polls gauges every 2 s of simulated time sits in front of this class, not in it.
//
// Engines are EngineId 0 .. num_engines-1, all built from the same options (one
// engine::EngineConfig).
// CloseSessionOnEveryEngine() closes a session on each engine's KV cache,
// DemoteFinishedSubagentsOnEveryEngine() delivers a parent's return to each, and
// AbortOnEveryEngine() posts an abort to every engine, as the gateway does when a session
// ends (the router proxies neither).
//
// Deterministic: a pure function of the options and the call sequence with its times.
// Single-threaded; not copyable or movable (engines' pending events point into it). Must
// outlive every run of the loop while an engine is busy.
#ifndef AGENTKV_SIM_FLEET_FLEET_MODEL_H_
#define AGENTKV_SIM_FLEET_FLEET_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/engine/step_scheduler.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/routing/router.h"
#include "agentkv/sim/fleet/engine_model.h"
#include "agentkv/sim/fleet/event_loop.h"

namespace agentkv::sim {

struct FleetModelOptions {
  // Engines in the fleet. Default: 1. Range: [1, 65536].
  int32_t num_engines = 1;
  // The router; its num_engines is ignored (num_engines above is used).
  routing::RouterOptions router;
  // Every engine's options.
  EngineModelOptions engine;

  // InvalidArgument naming the first bad field.
  Status Validate() const;
};

class FleetModel {
 public:
  // Runs at a request's finish time with the engine that served it.
  using CompletionCallback = std::function<void(EngineId, const EngineRequestRecord&)>;

  // Validates `options` and builds the router and the engines. `loop` must outlive the fleet.
  static StatusOr<std::unique_ptr<FleetModel>> Create(EventLoop* loop,
                                                      const FleetModelOptions& options);

  FleetModel(const FleetModel&) = delete;
  FleetModel& operator=(const FleetModel&) = delete;

  void set_completion_callback(CompletionCallback callback) { on_complete_ = std::move(callback); }

  // Routes `request` and submits it to the chosen engine at loop->now(). Returns the engine,
  // or the engine's Submit error (the router's cache_aware tree has recorded the keys then).
  StatusOr<EngineId> Submit(engine::SchedulerRequest request, uint64_t routing_key);

  // Closes `session` on every engine's KV cache (KvCacheManager::CloseSession), in EngineId
  // order. Returns the tokens freed on each engine, indexed by EngineId.
  std::vector<int64_t> CloseSessionOnEveryEngine(SessionId session);

  // Delivers the return of the parent conversation `parent` to every engine, in EngineId order
  // (EngineModel::DeliverParentReturn): each demotes the finished children of `parent` it
  // holds. Returns the children demoted on each engine, indexed by EngineId.
  std::vector<int64_t> DemoteFinishedSubagentsOnEveryEngine(ConversationId parent);

  // SGLang's /abort_request for `id` posted to every engine, in EngineId order: the engine
  // that holds the request aborts it at its next step boundary (EngineModel::Abort), the
  // others ignore it. Returns the engines that will end it: 0 when it already finished or was
  // never submitted, 1 when the caller keeps request ids unique across the fleet (as the
  // gateway does).
  int32_t AbortOnEveryEngine(RequestId id);

  // No later request names any of `keys`: every engine's miss accounting forgets them
  // (EngineModel::RetireKeys).
  void RetireKeysOnEveryEngine(std::span<const kv::BlockKey> keys);

  int32_t num_engines() const { return static_cast<int32_t>(engines_.size()); }
  const EngineModel& engine(EngineId id) const;
  EngineModel& mutable_engine(EngineId id);
  engine::SchedulerGauges gauges(EngineId id) const { return engine(id).gauges(); }
  // Every engine's gauges, indexed by EngineId.
  std::vector<engine::SchedulerGauges> AllGauges() const;
  const routing::Router& router() const { return *router_; }
  // Requests submitted through Submit(), and those finished, fleet-wide.
  int64_t num_submitted() const { return num_submitted_; }
  int64_t num_completed() const { return num_completed_; }

 private:
  FleetModel(std::unique_ptr<routing::Router> router,
             std::vector<std::unique_ptr<EngineModel>> engines);

  std::unique_ptr<routing::Router> router_;
  std::vector<std::unique_ptr<EngineModel>> engines_;
  CompletionCallback on_complete_;
  int64_t num_submitted_ = 0;
  int64_t num_completed_ = 0;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_FLEET_MODEL_H_
