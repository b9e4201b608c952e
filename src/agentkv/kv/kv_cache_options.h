// Options of the engine-side KV cache manager, validated once by KvCacheManager::Create.
#ifndef AGENTKV_KV_KV_CACHE_OPTIONS_H_
#define AGENTKV_KV_KV_CACHE_OPTIONS_H_

#include <cstdint>

#include "agentkv/base/status.h"
#include "agentkv/kv/retention.h"

namespace agentkv::kv {

struct KvCacheOptions {
  // Tokens per KV block (page). Default: 32. Range: [1, 1 << 20].
  int32_t tokens_per_block = 32;
  // Blocks of the device (GPU, hot) tier. Default: 0. Range: [0, 1 << 30]; together with
  // host_blocks at most 2^31 - 2.
  int64_t device_blocks = 0;
  // Blocks of the host (cold) tier; 0 disables offloading. Default: 0. Range: [0, 1 << 30].
  int64_t host_blocks = 0;
  // A block evicted from the device is offloaded to the host when its priority is at least
  // this (TensorRT-LLM's secondary_offload_min_priority), else dropped.
  // Default: 30. Range: [0, 101] (101 = never offload).
  Priority offload_threshold = 30;
  // Priority of blocks no retention config covers, and the one durations revert to.
  // Default: 35. Range: [0, 100].
  Priority default_priority = kDefaultPriority;
  // Seed of the block key chain; ranks that must agree use the same seed. Default: 0.
  uint64_t hash_seed = 0;
  // Capacity of the bounded event log; 0 disables it. Default: 0. Range: [0, 1 << 26].
  int64_t event_log_capacity = 0;

  // InvalidArgument naming the first field out of range and its value.
  Status Validate() const;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_KV_KV_CACHE_OPTIONS_H_
