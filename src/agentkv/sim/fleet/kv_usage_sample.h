// KvUsageSample: the fleet's KV occupancy at one gauge poll, as the gateway model records it
// (every 2 s of simulated time while the fleet has work) and the replay result reports it. A
// plain value; thread-compatible.
#ifndef AGENTKV_SIM_FLEET_KV_USAGE_SAMPLE_H_
#define AGENTKV_SIM_FLEET_KV_USAGE_SAMPLE_H_

#include <cstdint>

#include "agentkv/base/time.h"

namespace agentkv::sim {

// The fleet's KV occupancy at one gauge poll, summed over engines.
struct KvUsageSample {
  // Simulated time since the start of the replay.
  TimeNs time;
  // Tokens of KV held by running requests (SGLang's num_used_tokens).
  int64_t used_tokens = 0;
  // Cached tokens no request holds (reusable, evictable).
  int64_t evictable_tokens = 0;
  // Device KV capacity (max_total_num_tokens).
  int64_t capacity_tokens = 0;
  // Requests waiting: in the admission FIFO plus in the engines' queues.
  int64_t waiting_requests = 0;

  friend bool operator==(const KvUsageSample&, const KvUsageSample&) = default;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_KV_USAGE_SAMPLE_H_
