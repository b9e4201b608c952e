#include "agentkv/service/emulator/router_metrics.h"

#include "agentkv/protocol/prometheus.h"

namespace agentkv::service {
namespace {

// sgl-router's buckets for histograms ending in duration_seconds.
std::vector<double> DurationBuckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
          5,     10,    15,   30,    45,   60,  90,   120, 180, 240};
}

double D(int64_t v) { return static_cast<double>(v); }

}  // namespace

RouterMetrics::RouterMetrics() = default;

void RouterMetrics::CountRequest(const std::string& route) {
  sync::MutexLock lock(&mu_);
  ++requests_[route];
}

void RouterMetrics::CountError(const std::string& route, const std::string& error_type) {
  sync::MutexLock lock(&mu_);
  ++errors_[{route, error_type}];
}

void RouterMetrics::CountProcessed(const std::string& worker) {
  sync::MutexLock lock(&mu_);
  ++processed_[worker];
}

void RouterMetrics::ObserveDuration(const std::string& route, double seconds) {
  sync::MutexLock lock(&mu_);
  auto it = durations_.find(route);
  if (it == durations_.end())
    it = durations_.emplace(route, LatencyHistogram(DurationBuckets())).first;
  it->second.Observe(seconds);
}

std::string RouterMetrics::Text(const std::vector<protocol::WorkerInfo>& workers) const {
  using protocol::Label;
  using protocol::MetricFamily;
  using protocol::Sample;
  std::vector<MetricFamily> families;
  sync::MutexLock lock(&mu_);
  MetricFamily requests{
      "sgl_router_requests_total", "Total number of requests by route", "counter", {}};
  for (const auto& [route, n] : requests_) {
    requests.samples.push_back(Sample{"", {{"route", route}}, D(n), {}});
  }
  families.push_back(std::move(requests));
  MetricFamily errors{"sgl_router_request_errors_total",
                      "Total number of request errors by route and error type",
                      "counter",
                      {}};
  for (const auto& [key, n] : errors_) {
    errors.samples.push_back(
        Sample{"", {{"route", key.first}, {"error_type", key.second}}, D(n), {}});
  }
  families.push_back(std::move(errors));
  MetricFamily durations{"sgl_router_request_duration_seconds",
                         "Request duration in seconds by route",
                         "histogram",
                         {}};
  for (const auto& [route, h] : durations_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
      cumulative += h.counts[i];
      durations.samples.push_back(
          Sample{"sgl_router_request_duration_seconds_bucket",
                 {{"route", route}, {"le", protocol::FormatPrometheusValue(h.upper_bounds[i])}},
                 D(cumulative),
                 {}});
    }
    durations.samples.push_back(Sample{"sgl_router_request_duration_seconds_bucket",
                                       {{"route", route}, {"le", "+Inf"}},
                                       D(h.count),
                                       {}});
    durations.samples.push_back(
        Sample{"sgl_router_request_duration_seconds_sum", {{"route", route}}, h.sum, {}});
    durations.samples.push_back(
        Sample{"sgl_router_request_duration_seconds_count", {{"route", route}}, D(h.count), {}});
  }
  families.push_back(std::move(durations));
  MetricFamily processed{"sgl_router_processed_requests_total",
                         "Total requests processed by each worker",
                         "counter",
                         {}};
  for (const auto& [worker, n] : processed_) {
    processed.samples.push_back(Sample{"", {{"worker", worker}}, D(n), {}});
  }
  families.push_back(std::move(processed));
  int64_t healthy = 0;
  MetricFamily health{
      "sgl_router_worker_health", "Worker health status (1=healthy, 0=unhealthy)", "gauge", {}};
  MetricFamily load{"sgl_router_worker_load", "Current load on each worker", "gauge", {}};
  for (const protocol::WorkerInfo& w : workers) {
    healthy += w.is_healthy ? 1 : 0;
    health.samples.push_back(Sample{"", {{"worker", w.url}}, w.is_healthy ? 1.0 : 0.0, {}});
    load.samples.push_back(Sample{"", {{"worker", w.url}}, D(w.load), {}});
  }
  families.push_back(MetricFamily{"sgl_router_active_workers",
                                  "Number of currently active workers",
                                  "gauge",
                                  {Sample{"", {}, D(healthy), {}}}});
  families.push_back(std::move(health));
  families.push_back(std::move(load));
  return protocol::WritePrometheusText(families);
}

}  // namespace agentkv::service
