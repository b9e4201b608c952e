#include "agentkv/engine/engine_config.h"

#include <string>

namespace agentkv::engine {
namespace {

// Every check of Validate but the cost model's (which building the cost model makes).
Status ValidateWithoutCostModel(const EngineConfig& config) {
  AGENTKV_RETURN_IF_ERROR(config.scheduler.Validate());
  AGENTKV_RETURN_IF_ERROR(config.kv_pool.Validate());
  if (config.cache.device_blocks != 0 || config.cache.host_blocks != 0) {
    return InvalidArgumentError(
        "EngineConfig.cache.device_blocks and host_blocks must be 0 (kv_pool sizes the tiers), "
        "got " +
        std::to_string(config.cache.device_blocks) + " and " +
        std::to_string(config.cache.host_blocks));
  }
  if (config.stall_offload.has_value()) {
    AGENTKV_RETURN_IF_ERROR(config.stall_offload->Validate());
    if (config.kv_pool.hicache_ratio <= 0.0 && config.kv_pool.hicache_tokens <= 0) {
      return InvalidArgumentError(
          "EngineConfig.stall_offload needs a host tier (kv_pool.hicache_ratio or "
          "hicache_tokens > 0): stall offload moves paused sessions' KV to host memory");
    }
  }
  return Status::Ok();
}

}  // namespace

Status EngineConfig::Validate() const {
  AGENTKV_RETURN_IF_ERROR(ValidateWithoutCostModel(*this));
  return CostModel::Create(model, gpu, tp, cost).status();
}

StatusOr<KvPool> SizeKvPool(const EngineConfig& config) {
  AGENTKV_RETURN_IF_ERROR(ValidateWithoutCostModel(config));
  AGENTKV_ASSIGN_OR_RETURN(const CostModel cost_model,
                           CostModel::Create(config.model, config.gpu, config.tp, config.cost));
  return SizeKvPool(config.kv_pool, cost_model.kv_capacity_tokens());
}

}  // namespace agentkv::engine
