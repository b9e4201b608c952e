// The Prometheus series of an emulated SGLang engine: SGLang's metric names, types and labels
// (docs/PROTOCOL.md section 11) computed from an EngineRuntime snapshot.
//
// Scheduler gauges are written once per TP rank with identical values, as SGLang's
// multiprocess "mostrecent" gauges are; counters and histograms only for tp_rank 0. Every
// series carries model_name, engine_type ("unified"), tp_rank, pp_rank and moe_ep_rank.
// Accounting: kv_available_tokens + kv_evictable_tokens + kv_used_tokens ==
// max_total_num_tokens (the emulator protects nothing else). Pure functions; thread-safe.
#ifndef AGENTKV_SERVICE_EMULATOR_ENGINE_METRICS_H_
#define AGENTKV_SERVICE_EMULATOR_ENGINE_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "agentkv/protocol/prometheus.h"
#include "agentkv/service/emulator/engine_runtime.h"

namespace agentkv::service {

// The families of `snapshot` for a server of `tp_ranks` ranks (>= 1) serving `model_name`
// with KV pages of `page_size` tokens. The host tier's series (hicache_host_*, load_back_*,
// eviction_duration_seconds) are written only when the snapshot's host tier has capacity.
std::vector<protocol::MetricFamily> EngineMetricFamilies(const RuntimeSnapshot& snapshot,
                                                         const std::string& model_name,
                                                         int32_t tp_ranks, int32_t page_size);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_ENGINE_METRICS_H_
