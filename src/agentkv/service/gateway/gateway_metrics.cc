#include "agentkv/service/gateway/gateway_metrics.h"

#include <limits>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/protocol/json_util.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

protocol::Sample MakeSample(std::string name, std::vector<protocol::Label> labels, double value) {
  protocol::Sample sample;
  sample.name = std::move(name);
  sample.labels = std::move(labels);
  sample.value = value;
  return sample;
}

std::string BoundText(double bound) { return protocol::FormatPrometheusValue(bound); }

// One family of one unlabelled sample.
void Counter(std::vector<protocol::MetricFamily>& families, std::string name, std::string help,
             double value) {
  protocol::MetricFamily family{name, std::move(help), "counter", {}};
  family.samples.push_back(MakeSample(std::move(name), {}, value));
  families.push_back(std::move(family));
}

void Gauge(std::vector<protocol::MetricFamily>& families, std::string name, std::string help,
           double value) {
  protocol::MetricFamily family{name, std::move(help), "gauge", {}};
  family.samples.push_back(MakeSample(std::move(name), {}, value));
  families.push_back(std::move(family));
}

// The remote coordinator's failures by operation and its circuit breaker.
void AppendCoordinatorFamilies(const AdmissionBackendFailures& f,
                               const CoordinatorBreakerState& breaker,
                               std::vector<protocol::MetricFamily>& families) {
  protocol::MetricFamily coordinator{
      "agentkv_gateway_coordinator_failures_total",
      "Calls to the remote coordinator that failed (admission then fails open), by operation.",
      "counter",
      {}};
  for (const auto& [op, count] : {std::pair<const char*, int64_t>{"acquire", f.acquire},
                                  {"release", f.release},
                                  {"cancel", f.cancel},
                                  {"metrics", f.metrics},
                                  {"heartbeat", f.heartbeat}}) {
    coordinator.samples.push_back(
        MakeSample(coordinator.name, {{"op", op}}, static_cast<double>(count)));
  }
  families.push_back(std::move(coordinator));
  Gauge(families, "agentkv_gateway_coordinator_breaker_open",
        "1 while the circuit breaker in front of the remote coordinator is open (its heartbeats "
        "failed; admission bypasses `degraded` without asking), else 0.",
        breaker.open ? 1.0 : 0.0);
  Counter(families, "agentkv_gateway_coordinator_breaker_opens_total",
          "Times the remote coordinator's circuit breaker opened.",
          static_cast<double>(breaker.opens));
  Counter(families, "agentkv_gateway_coordinator_breaker_bypass_total",
          "Acquires answered bypass `degraded` without asking, because the breaker was open.",
          static_cast<double>(breaker.bypassed));
}

}  // namespace

std::vector<std::pair<std::string, double>> MergeAgenticKvSeries(
    bool lifecycle, int64_t step_close, int64_t step_close_failure,
    const std::vector<std::pair<std::string, double>>& backend_series) {
  control::AgenticOptions options;
  options.agentic_session_lifecycle = lifecycle;
  control::AdmissionCounters counters;
  counters.session_close = step_close;
  counters.session_close_failure = step_close_failure;
  std::vector<std::pair<std::string, double>> series =
      control::AgenticKvMetrics(options, counters, 0, std::nullopt);
  for (const auto& entry : backend_series) {
    if (entry.first.starts_with("agentic_kv/session/")) continue;
    series.push_back(entry);
  }
  return series;
}

std::string AgenticKvJson(const std::vector<std::pair<std::string, double>>& series) {
  protocol::JsonWriter writer;
  writer.BeginObject();
  for (const auto& [name, value] : series) writer.Key(name).Double(value);
  writer.EndObject();
  return writer.Take();
}

void GatewayMetrics::ObserveRequest(std::string_view route, int code, double seconds) {
  sync::MutexLock lock(&mu_);
  ++requests_[{std::string(route), code}];
  Histogram& histogram = durations_[std::string(route)];
  size_t bucket = 0;
  while (bucket < kRequestDurationBuckets.size() && seconds > kRequestDurationBuckets[bucket])
    ++bucket;
  if (bucket < kRequestDurationBuckets.size()) ++histogram.buckets[bucket];
  histogram.sum += seconds;
  ++histogram.count;
}

void GatewayMetrics::CountParentHintRejected() {
  sync::MutexLock lock(&mu_);
  ++parent_hint_rejected_;
}

void GatewayMetrics::CountUntrustedBypass() {
  sync::MutexLock lock(&mu_);
  ++untrusted_bypass_;
}

void GatewayMetrics::CountSessionRateLimited() {
  sync::MutexLock lock(&mu_);
  ++sessions_rate_limited_;
}

void GatewayMetrics::CountSessionClose(bool ok) {
  sync::MutexLock lock(&mu_);
  ++close_total_;
  ++step_close_;
  if (!ok) {
    ++close_failure_total_;
    ++step_close_failure_;
  }
}

std::pair<int64_t, int64_t> GatewayMetrics::StepCloses(bool reset) {
  sync::MutexLock lock(&mu_);
  const std::pair<int64_t, int64_t> step{step_close_, step_close_failure_};
  if (reset) {
    step_close_ = 0;
    step_close_failure_ = 0;
  }
  return step;
}

std::pair<int64_t, int64_t> GatewayMetrics::close_totals() const {
  sync::MutexLock lock(&mu_);
  return {close_total_, close_failure_total_};
}

int64_t GatewayMetrics::parent_hint_rejected() const {
  sync::MutexLock lock(&mu_);
  return parent_hint_rejected_;
}

int64_t GatewayMetrics::untrusted_bypass() const {
  sync::MutexLock lock(&mu_);
  return untrusted_bypass_;
}

int64_t GatewayMetrics::sessions_rate_limited() const {
  sync::MutexLock lock(&mu_);
  return sessions_rate_limited_;
}

int64_t GatewayMetrics::requests(std::string_view route, int code) const {
  sync::MutexLock lock(&mu_);
  auto it = requests_.find({std::string(route), code});
  return it == requests_.end() ? 0 : it->second;
}

std::vector<protocol::MetricFamily> GatewayMetrics::Families(
    const GatewayReadings& readings) const {
  sync::MutexLock lock(&mu_);
  std::vector<protocol::MetricFamily> families;
  AppendRequestFamilies(families);
  AppendCounterFamilies(readings, families);
  AppendCoordinatorFamilies(readings.coordinator_failures, readings.coordinator_breaker, families);
  Counter(families, "agentkv_gateway_inflight_refused_total",
          "Requests refused with 503 because their body would take the bytes held past "
          "--max-inflight-bytes.",
          static_cast<double>(readings.inflight_refused));
  Gauge(families, "agentkv_gateway_in_flight_requests", "Data-path requests being served now.",
        static_cast<double>(readings.in_flight));
  Gauge(families, "agentkv_gateway_inflight_bytes",
        "Bytes the gateway holds now for requests in flight: request bodies being read or "
        "served, and answer bytes queued for clients (bounded by --max-inflight-bytes).",
        static_cast<double>(readings.inflight_bytes));
  Gauge(families, "agentkv_gateway_sessions_active", "Sessions accepting requests.",
        static_cast<double>(readings.active_sessions));
  Gauge(families, "agentkv_gateway_sessions_retained",
        "Sessions marked retained (X-Agentkv-Session-Retain): never idled out nor evicted, "
        "ended only by a close; counted in agentkv_gateway_sessions_active too.",
        static_cast<double>(readings.retained_sessions));
  return families;
}

void GatewayMetrics::AppendRequestFamilies(std::vector<protocol::MetricFamily>& families) const {
  protocol::MetricFamily requests{"agentkv_gateway_requests_total",
                                  "Data-path requests answered, by route and HTTP status (499: "
                                  "the client left first).",
                                  "counter",
                                  {}};
  for (const auto& [key, count] : requests_) {
    requests.samples.push_back(
        MakeSample(requests.name, {{"route", key.first}, {"code", std::to_string(key.second)}},
                   static_cast<double>(count)));
  }
  families.push_back(std::move(requests));

  protocol::MetricFamily durations{"agentkv_gateway_request_duration_seconds",
                                   "Seconds from request to the end of the answer, admission "
                                   "wait included.",
                                   "histogram",
                                   {}};
  for (const auto& [route, histogram] : durations_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < kRequestDurationBuckets.size(); ++i) {
      cumulative += histogram.buckets[i];
      durations.samples.push_back(
          MakeSample(durations.name + "_bucket",
                     {{"route", route}, {"le", BoundText(kRequestDurationBuckets[i])}},
                     static_cast<double>(cumulative)));
    }
    durations.samples.push_back(MakeSample(durations.name + "_bucket",
                                           {{"route", route}, {"le", "+Inf"}},
                                           static_cast<double>(histogram.count)));
    durations.samples.push_back(
        MakeSample(durations.name + "_sum", {{"route", route}}, histogram.sum));
    durations.samples.push_back(MakeSample(durations.name + "_count", {{"route", route}},
                                           static_cast<double>(histogram.count)));
  }
  families.push_back(std::move(durations));
}

void GatewayMetrics::AppendCounterFamilies(const GatewayReadings& readings,
                                           std::vector<protocol::MetricFamily>& families) const {
  Counter(families, "agentkv_gateway_parent_hint_rejected_total",
          "Sub-agent parent hints not forwarded: no key configured, no session, or a bad "
          "signature.",
          static_cast<double>(parent_hint_rejected_));
  Counter(families, "agentkv_gateway_untrusted_bypass_total",
          "Requests whose X-Agentkv-Protected or X-Agentkv-Scope asked to skip admission without "
          "the gateway's bearer token; the headers were ignored and the request was admitted as "
          "any other.",
          static_cast<double>(untrusted_bypass_));
  Counter(families, "agentkv_gateway_session_close_total",
          "Session close fan-outs to every engine.", static_cast<double>(close_total_));
  Counter(families, "agentkv_gateway_session_close_failure_total",
          "Session close fan-outs that failed on at least one engine (the session still ended).",
          static_cast<double>(close_failure_total_));
  Counter(families, "agentkv_gateway_sessions_evicted_total",
          "Idle sessions ended early (and closed) to stay within --max-sessions.",
          static_cast<double>(readings.sessions_evicted));
  Counter(families, "agentkv_gateway_sessions_refused_total",
          "Requests refused with 503 because --max-sessions sessions were all busy or retained.",
          static_cast<double>(readings.sessions_refused));
  Counter(families, "agentkv_gateway_sessions_retain_refused_total",
          "Requests refused with 429 because their X-Agentkv-Session-Retain: 1 would retain "
          "more than --max-retained-sessions sessions.",
          static_cast<double>(readings.retain_refused));
  Counter(families, "agentkv_gateway_sessions_rate_limited_total",
          "Requests refused with 429 because they would have opened a session past their "
          "client's --max-new-sessions-per-s (burst --new-sessions-burst).",
          static_cast<double>(sessions_rate_limited_));
}

}  // namespace agentkv::service
