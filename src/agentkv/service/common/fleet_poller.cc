#include "agentkv/service/common/fleet_poller.h"

#include <memory>

#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

std::optional<double> Gauge(const std::map<std::string, double>& gauges, const char* name) {
  auto it = gauges.find(name);
  if (it == gauges.end()) return std::nullopt;
  return it->second;
}

}  // namespace

control::EngineSnapshot SnapshotFromScrape(std::string engine_url,
                                           const StatusOr<net::ClientResponse>& scrape) {
  control::EngineSnapshot unhealthy;
  unhealthy.engine_id = engine_url;
  unhealthy.healthy = false;
  if (!scrape.ok() || scrape->status != 200) return unhealthy;
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(scrape->body);
  if (!samples.ok()) return unhealthy;
  // MaxByName already took the max over the TP ranks' lines; one aggregated "rank" remains.
  const std::map<std::string, double> gauges = protocol::MaxByName(*samples);
  control::RankGauges rank;
  rank.max_total_num_tokens = Gauge(gauges, "sglang:max_total_num_tokens");
  rank.num_used_tokens = Gauge(gauges, "sglang:num_used_tokens");
  rank.token_usage = Gauge(gauges, "sglang:token_usage");
  rank.full_token_usage = Gauge(gauges, "sglang:full_token_usage");
  return control::SnapshotFromGauges(std::move(engine_url),
                                     std::span<const control::RankGauges>(&rank, 1));
}

FleetPoller::FleetPoller(FleetPollerOptions options, EngineDirectory* directory,
                         net::HttpClient* client, PollCallback on_poll, LogSink log)
    : options_(options),
      directory_(directory),
      client_(client),
      on_poll_(std::move(on_poll)),
      log_(std::move(log)) {}

FleetPoller::~FleetPoller() { Stop(); }

void FleetPoller::Start() {
  sync::MutexLock lock(&mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void FleetPoller::Stop() {
  {
    sync::MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

int64_t FleetPoller::polls() const {
  sync::MutexLock lock(&mu_);
  return polls_;
}

void FleetPoller::Loop() {
  sync::ReleasableMutexLock lock(&mu_);
  while (!stopping_) {
    lock.Unlock();
    PollOnce();
    lock.Lock();
    const auto deadline = std::chrono::steady_clock::now() + options_.interval;
    while (!stopping_) {
      if (wake_.WaitWithDeadline(&mu_, deadline)) break;
    }
  }
}

std::vector<control::EngineSnapshot> FleetPoller::PollOnce() {
  std::vector<control::EngineSnapshot> snapshots;
  StatusOr<std::vector<std::string>> urls =
      directory_->Refresh(std::chrono::steady_clock::now() + options_.timeout);
  if (!urls.ok()) {
    log_(LogLevel::kWarn, LogLine("engine_discovery_failed")
                              .Add("router", directory_->router_url())
                              .Quoted("error", urls.status().message()));
  } else if (options_.scrape_metrics) {
    // Scrape every engine concurrently and wait for the answers until the deadline; an engine
    // that has not answered by then is cancelled and counts as failed.
    struct Latch {
      sync::Mutex mu;
      sync::CondVar done;
      std::vector<std::optional<StatusOr<net::ClientResponse>>> results AGENTKV_GUARDED_BY(mu);
      size_t remaining AGENTKV_GUARDED_BY(mu) = 0;
    };
    auto latch = std::make_shared<Latch>();
    {
      sync::MutexLock lock(&latch->mu);  // Not shared yet; taken for the lock annotations.
      latch->results.resize(urls->size());
      latch->remaining = urls->size();
    }
    const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
    std::vector<std::shared_ptr<net::HttpClient::StreamHandle>> calls;
    for (size_t i = 0; i < urls->size(); ++i) {
      calls.push_back(client_->AsyncRequest(net::http::verb::get, (*urls)[i],
                                            std::string(protocol::kMetricsPath), {}, "",
                                            [latch, i](StatusOr<net::ClientResponse> response) {
                                              sync::MutexLock lock(&latch->mu);
                                              if (latch->results[i].has_value())
                                                return;  // Timed out: already recorded.
                                              latch->results[i] = std::move(response);
                                              if (--latch->remaining == 0) latch->done.SignalAll();
                                            }));
    }
    std::vector<std::optional<StatusOr<net::ClientResponse>>> results;
    {
      sync::MutexLock lock(&latch->mu);
      while (latch->remaining != 0) {
        if (latch->done.WaitWithDeadline(&latch->mu, deadline)) break;
      }
      for (auto& result : latch->results) {
        if (!result.has_value()) {
          result = DeadlineExceededError("no answer within --metrics-timeout-s");
        }
      }
      results = latch->results;
    }
    for (size_t i = 0; i < calls.size(); ++i) calls[i]->Cancel();  // No-op for finished ones.
    for (size_t i = 0; i < urls->size(); ++i) {
      control::EngineSnapshot snapshot = SnapshotFromScrape((*urls)[i], *results[i]);
      if (!snapshot.healthy) {
        const StatusOr<net::ClientResponse>& r = *results[i];
        log_(LogLevel::kWarn,
             LogLine("metrics_scrape_failed")
                 .Add("engine", (*urls)[i])
                 .Quoted("error", r.ok() ? "HTTP " + std::to_string(r->status) +
                                               (r->status == 200 ? " unparsable" : "")
                                         : r.status().message()));
      }
      snapshots.push_back(std::move(snapshot));
    }
  }
  if (options_.scrape_metrics && on_poll_) on_poll_(snapshots);
  sync::MutexLock lock(&mu_);
  ++polls_;
  return snapshots;
}

}  // namespace agentkv::service
