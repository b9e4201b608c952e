// The Prometheus series of the emulated sgl-router: sgl-router's metric names and labels
// (sgl-router/src/metrics.rs) for what the emulator does, so that dashboards and alerts written
// for the real router read it. The real router serves them on a separate listener
// (--prometheus-port, default 29000); the emulator serves them at GET /metrics of its own port.
//
//   sgl_router_requests_total{route}                counter, every request to a data route
//   sgl_router_request_errors_total{route,error_type} counter: "no_workers", "invalid_request",
//                                                   "upstream_timeout", "upstream_error"
//   sgl_router_request_duration_seconds{route}      histogram, sgl-router's buckets
//   sgl_router_processed_requests_total{worker}     counter, requests sent to each worker
//   sgl_router_active_workers                       gauge, healthy workers
//   sgl_router_worker_health{worker}                gauge, 1 healthy / 0 not
//   sgl_router_worker_load{worker}                  gauge, requests in flight (the policy's load)
//
// Thread-safe (one mutex); the counters only grow and their label sets are bounded by the
// router's routes and workers.
#ifndef AGENTKV_SERVICE_EMULATOR_ROUTER_METRICS_H_
#define AGENTKV_SERVICE_EMULATOR_ROUTER_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/protocol/workers.h"
#include "agentkv/service/emulator/engine_runtime.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

class RouterMetrics {
 public:
  RouterMetrics();

  void CountRequest(const std::string& route);
  void CountError(const std::string& route, const std::string& error_type);
  void CountProcessed(const std::string& worker);
  void ObserveDuration(const std::string& route, double seconds);

  // The exposition text, with the worker gauges of `workers`.
  std::string Text(const std::vector<protocol::WorkerInfo>& workers) const;

 private:
  mutable sync::Mutex mu_;
  std::map<std::string, int64_t> requests_ AGENTKV_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int64_t> errors_ AGENTKV_GUARDED_BY(mu_);
  std::map<std::string, int64_t> processed_ AGENTKV_GUARDED_BY(mu_);
  std::map<std::string, LatencyHistogram> durations_ AGENTKV_GUARDED_BY(mu_);
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_ROUTER_METRICS_H_
