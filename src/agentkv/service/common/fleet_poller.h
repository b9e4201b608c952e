// FleetPoller: the gateway's capacity signal for program-aware admission (seed 000's poller).
//
// Every poll interval it rediscovers the engines (EngineDirectory::Refresh), scrapes each
// engine's GET /metrics concurrently, aggregates the TP-replicated gauges by max
// (protocol::MaxByName, control::SnapshotFromGauges) and hands the snapshots to a callback (the
// gateway passes them to AdmissionBackend::Reconcile). Unlike Relax, which discards the whole
// poll on any single failure, a failed scrape marks only that engine unhealthy: the ledger then
// sizes its ceiling from the engines it can see. A failed discovery yields no snapshot at all,
// so the ledger goes degraded and admission fails open. Thread-safe; owns one thread between
// Start and Stop; the directory and client must outlive it.
#ifndef AGENTKV_SERVICE_COMMON_FLEET_POLLER_H_
#define AGENTKV_SERVICE_COMMON_FLEET_POLLER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/net/http_client.h"
#include "agentkv/service/common/engine_directory.h"
#include "agentkv/service/common/log_sink.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// The snapshot of one engine from its /metrics answer: the gauges by max over lines; an error,
// a non-200 answer or unparsable text gives {engine_id, healthy = false}.
control::EngineSnapshot SnapshotFromScrape(std::string engine_url,
                                           const StatusOr<net::ClientResponse>& scrape);

struct FleetPollerOptions {
  // Between polls (--agentic-admission-poll-interval-s). Default: 2 s. Must be > 0.
  std::chrono::milliseconds interval{2000};
  // How long a poll waits for discovery, and then for the scrapes (--metrics-timeout-s),
  // whatever the client's own timeouts: a router or engine that has not answered in time
  // counts as failed for this poll and its call is cancelled, so a poll lasts at most twice
  // this. Default: 1.5 s. Must be > 0.
  std::chrono::milliseconds timeout{1500};
  // Scrape /metrics (admission on); when false, polls only refresh the directory.
  bool scrape_metrics = true;
};

class FleetPoller {
 public:
  using PollCallback = std::function<void(std::vector<control::EngineSnapshot> snapshots)>;

  FleetPoller(FleetPollerOptions options, EngineDirectory* directory, net::HttpClient* client,
              PollCallback on_poll, LogSink log);
  FleetPoller(const FleetPoller&) = delete;
  FleetPoller& operator=(const FleetPoller&) = delete;
  ~FleetPoller();

  // Starts the thread: a poll at once, then one every interval.
  void Start();
  // Stops and joins the thread (a poll in progress finishes first). Idempotent.
  void Stop();

  // One poll, blocking (at most twice options.timeout): refresh, scrape, callback. Returns
  // what it passed to the callback. Must not run on the client's I/O threads.
  std::vector<control::EngineSnapshot> PollOnce();

  int64_t polls() const;

 private:
  void Loop();

  const FleetPollerOptions options_;
  EngineDirectory* const directory_;
  net::HttpClient* const client_;
  const PollCallback on_poll_;
  const LogSink log_;

  mutable sync::Mutex mu_;
  sync::CondVar wake_;
  bool stopping_ AGENTKV_GUARDED_BY(mu_) = false;
  int64_t polls_ AGENTKV_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_FLEET_POLLER_H_
