// RemoteAdmission: an AdmissionBackend that asks an `agentkv coordinator` (CoordinatorServer)
// over HTTP, for gateways that share one fleet-wide ledger (docs/COORDINATOR.md).
//
// Acquire posts /admission/acquire and hands `done` the coordinator's final decision; the
// coordinator holds the request while the ticket waits, so the client's header timeout is the
// maximum wait plus a margin. Admission fails open: a transport error, a timeout, a non-200
// answer or an unreadable body becomes kBypass `degraded` and is counted in failures(); after
// a transport error or timeout the ticket is also cancelled (fire-and-forget), so a grant that
// raced with the failure is returned rather than held until its TTL (Relax's client wrapper).
// Release and Cancel are asynchronous posts whose errors are counted and otherwise ignored
// (the lease TTL is the backstop). Reconcile is ignored: the coordinator polls the fleet.
//
// Liveness: every acquire names this process's instance id, and a heartbeat thread posts
// /admission/heartbeat every heartbeat_interval, so a coordinator ends this instance's leases
// and waiters soon after the process dies (its --instance-timeout-s) rather than at the lease
// TTL. The heartbeats are also the probes of a CoordinatorBreaker: after breaker_failures failed
// ones in a row (no answer within heartbeat_timeout, a refused connection, a non-200) it opens,
// every acquire in flight is cut and answered `degraded` (its ticket cancelled, as for any
// failed acquire) and new acquires bypass `degraded` without asking; at least
// breaker_cooldown later the first answered heartbeat closes it. Logged as
// `event=coordinator_breaker_opened` (warn) and `event=coordinator_breaker_closed` (info).
//
// Every failure is counted by operation (failures()) and logged: the first one after a
// success as `event=coordinator_failed` (warn), then at most one line every 10 s with the
// count since the last line, and `event=coordinator_recovered` (info) at the next success, so
// an outage is visible without one line per request.
//
// Thread-safe. Owns three HttpClients with one I/O thread each (callbacks run there) and the
// heartbeat thread. Destruction first stops the heartbeats (waiting at most heartbeat_timeout),
// lets releases and cancels in flight finish (up to control_timeout), then cancels the acquires
// in flight, whose `done` then runs once with kBypass `degraded` (the coordinator sees those
// clients go and cancels their tickets).
#ifndef AGENTKV_SERVICE_ADMISSION_ADMISSION_REMOTE_H_
#define AGENTKV_SERVICE_ADMISSION_ADMISSION_REMOTE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_client.h"
#include "agentkv/service/admission/admission_backend.h"
#include "agentkv/service/admission/coordinator_breaker.h"
#include "agentkv/service/common/log_sink.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

struct RemoteAdmissionOptions {
  // The coordinator's base URL, "http://host:port". Required.
  std::string coordinator_url;
  // Sent as `Authorization: Bearer <token>` when non-empty. Default: empty.
  std::string auth_token;
  // The coordinator's --agentic-admission-max-wait-s: an acquire may be held that long, so
  // the client waits max_wait_s + 10 s for an answer. Default: 30. Range: finite, >= 0.
  double max_wait_s = 30.0;
  // Connecting to the coordinator. Default: 2 s. Must be > 0.
  std::chrono::milliseconds connect_timeout{2000};
  // Release, cancel and /agentic_kv answers. Default: 5 s. Must be > 0.
  std::chrono::milliseconds control_timeout{5000};
  // Acquires held open at once (each holds a connection while it waits). Default: 16384.
  size_t max_concurrent_acquires = 16384;
  // This process's instance id, sent with every acquire and heartbeat. Default: empty, which
  // draws a random "adm-" id: each RemoteAdmission (each gateway process) is a new instance, so a
  // restarted gateway never inherits or double-counts the old one's leases. At most
  // control::kMaxTicketBytes bytes.
  std::string instance_id;
  // --coordinator-heartbeat-interval-s: between the starts of two heartbeats. 0 sends none: the
  // coordinator then keeps only the lease TTL for this instance and the breaker never opens.
  // Default: 1 s. Range: [0, 1 h].
  std::chrono::milliseconds heartbeat_interval{1000};
  // --coordinator-heartbeat-timeout-s: how long one heartbeat may take (connect and answer)
  // before it counts as failed. Default: 1 s. Range: (0, 1 h].
  std::chrono::milliseconds heartbeat_timeout{1000};
  // --coordinator-breaker-failures: failed heartbeats in a row that open the breaker.
  // Default: 2. Range: [1, 1000].
  int breaker_failures = 2;
  // --coordinator-breaker-cooldown-s: the breaker stays open at least this long. Default: 5 s.
  // Range: (0, 1 h].
  std::chrono::milliseconds breaker_cooldown{5000};
  // Where failures and recoveries are logged. Default: StderrLogSink.
  LogSink log = StderrLogSink;

  // InvalidArgument naming the bad field.
  Status Validate() const;
};

class RemoteAdmission final : public AdmissionBackend {
 public:
  static StatusOr<std::unique_ptr<RemoteAdmission>> Create(const RemoteAdmissionOptions& options);

  RemoteAdmission(const RemoteAdmission&) = delete;
  RemoteAdmission& operator=(const RemoteAdmission&) = delete;
  ~RemoteAdmission() override;

  void Acquire(control::AcquireRequest request, AcquireCallback done) override;
  void Release(const std::string& lease_id) override;
  void Cancel(const std::string& ticket) override;
  // Ignored: the coordinator polls the fleet itself.
  void Reconcile(std::span<const control::EngineSnapshot> snapshots) override;
  // GET /agentic_kv (`?reset=1` with `reset_step`), blocking; on any error
  // {{"agentic_kv/budget/degraded", 1.0}}. Must not be called from a callback of this backend.
  std::vector<std::pair<std::string, double>> StepMetrics(bool reset_step) override;

  // Requests that failed (transport, timeout, non-200, bad body), by operation.
  AdmissionBackendFailures failures() const override;
  CoordinatorBreakerState breaker() const override;
  // The instance id acquires and heartbeats carry.
  const std::string& instance_id() const { return options_.instance_id; }

 private:
  explicit RemoteAdmission(const RemoteAdmissionOptions& options);

  enum class Op : uint8_t { kAcquire, kRelease, kCancel, kMetrics, kHeartbeat };

  // An acquire in flight, so that an opening breaker can cut it. The handle is set once
  // AsyncRequest returned; an acquire cut before that is cancelled as soon as it is set.
  struct PendingAcquire {
    std::shared_ptr<net::HttpClient::StreamHandle> handle;
    bool cut = false;
  };

  void HeartbeatLoop();
  // One heartbeat, blocking up to heartbeat_timeout; true when the coordinator answered 200.
  bool SendHeartbeat();
  // Feeds one heartbeat's outcome to the breaker; cuts the acquires in flight when it opens.
  void OnProbe(bool answered);
  // Opens-or-not, read on every acquire.
  bool BreakerOpen() const;

  net::HeaderList Headers() const;
  // Posts `body` to `path`, counting a failure of `op`; the answer is otherwise ignored.
  void PostAndForget(Op op, std::string_view path, std::string body);
  // Counts and logs (rate-limited) one failed call, or notes a successful one.
  void OnFailure(Op op, std::string_view error);
  void OnSuccess();

  RemoteAdmissionOptions options_;
  mutable sync::Mutex health_mu_;
  AdmissionBackendFailures failures_ AGENTKV_GUARDED_BY(health_mu_);
  // Failures not logged yet, and when the last failure line was written.
  int64_t unlogged_failures_ AGENTKV_GUARDED_BY(health_mu_) = 0;
  std::optional<std::chrono::steady_clock::time_point> last_log_ AGENTKV_GUARDED_BY(health_mu_);
  bool failing_ AGENTKV_GUARDED_BY(health_mu_) = false;
  // Set by the destructor before it destroys client_: callbacks that run meanwhile (with
  // Unavailable) must not start new requests.
  std::atomic<bool> closing_{false};
  // Release and cancel posts not yet answered; the destructor waits for them (bounded by
  // control_timeout) so that a lease returned just before destruction is not lost.
  sync::Mutex in_flight_mu_;
  sync::CondVar in_flight_done_;
  int64_t in_flight_ AGENTKV_GUARDED_BY(in_flight_mu_) = 0;
  mutable sync::Mutex breaker_mu_;
  CoordinatorBreaker breaker_ AGENTKV_GUARDED_BY(breaker_mu_);
  std::atomic<int64_t> breaker_bypassed_{0};

  sync::Mutex pending_mu_;
  std::map<uint64_t, PendingAcquire> pending_ AGENTKV_GUARDED_BY(pending_mu_);
  uint64_t next_pending_ AGENTKV_GUARDED_BY(pending_mu_) = 0;

  sync::Mutex heartbeat_mu_;
  sync::CondVar heartbeat_wake_;
  bool heartbeat_stop_ AGENTKV_GUARDED_BY(heartbeat_mu_) = false;
  std::thread heartbeat_;

  // Acquires are held open at the coordinator while they wait, so they get their own client
  // (many connections, a header timeout past max_wait): a release must never queue behind
  // waiting acquires for a connection.
  std::unique_ptr<net::HttpClient> acquire_client_;
  // Release, cancel and metrics: short timeouts.
  std::unique_ptr<net::HttpClient> control_client_;
  // Heartbeats alone, so that none waits behind a queue of releases: its latency is the
  // coordinator's.
  std::unique_ptr<net::HttpClient> heartbeat_client_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_ADMISSION_REMOTE_H_
