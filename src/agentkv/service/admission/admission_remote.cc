// Invariants: every Acquire's `done` runs exactly once (HttpClient runs each request's callback
// once, also when destroyed, and an acquire the open breaker answers sends nothing); no request
// is started once closing_ is set; in_flight_ counts the control posts whose callback has not
// run yet; pending_ holds exactly the acquires sent whose callback has not run yet.
#include "agentkv/service/admission/admission_remote.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <utility>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
using control::AdmissionDecision;

// Past max_wait, how long the client still waits for the coordinator's answer.
constexpr double kAcquireMarginS = 10.0;
// During an outage, at most one failure line per this long.
constexpr std::chrono::seconds kFailureLogInterval{10};

std::string Describe(const StatusOr<net::ClientResponse>& response) {
  if (!response.ok()) return response.status().message();
  return "HTTP " + std::to_string(response->status);
}

TimeNs SteadyNow() {
  return TimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

TimeNs ToTimeNs(std::chrono::milliseconds d) { return TimeNs::Millis(d.count()); }

std::string RandomInstanceId() {
  std::random_device entropy;
  char id[48];
  std::snprintf(id, sizeof(id), "adm-%08x%08x%08x%08x", static_cast<unsigned>(entropy()),
                static_cast<unsigned>(entropy()), static_cast<unsigned>(entropy()),
                static_cast<unsigned>(entropy()));
  return id;
}

// Durations of the heartbeat and breaker options: within (0, 1 h] (0 allowed when `zero_ok`).
Status CheckDuration(std::string_view flag, std::chrono::milliseconds value, bool zero_ok) {
  constexpr std::chrono::milliseconds kHour{3'600'000};
  if ((value.count() > 0 || (zero_ok && value.count() == 0)) && value <= kHour) {
    return Status::Ok();
  }
  return InvalidArgumentError(std::string(flag) + " must be in " + (zero_ok ? "[0" : "(0") +
                              ", 3600] s, got " +
                              std::to_string(static_cast<double>(value.count()) / 1000.0));
}

AdmissionDecision DegradedBypass(const std::string& ticket, int64_t tokens) {
  return AdmissionDecision{control::AdmissionAction::kBypass,
                           control::AdmissionReason::kDegraded,
                           ticket,
                           tokens,
                           std::nullopt,
                           -1,
                           TimeNs(),
                           std::nullopt};
}

}  // namespace

Status RemoteAdmissionOptions::Validate() const {
  if (coordinator_url.empty()) return InvalidArgumentError("coordinator_url is required");
  if (StatusOr<net::HttpEndpoint> e = net::ParseBaseUrl(coordinator_url); !e.ok()) {
    return InvalidArgumentError("--coordinator-url: " + e.status().message());
  }
  // A day is far beyond any sensible wait and keeps the millisecond conversion in range.
  if (!std::isfinite(max_wait_s) || max_wait_s < 0 || max_wait_s > 86400.0) {
    return InvalidArgumentError(
        "--agentic-admission-max-wait-s must be in [0, 86400] with a coordinator, got " +
        std::to_string(max_wait_s));
  }
  if (!log) return InvalidArgumentError("log sink must be set");
  if (connect_timeout.count() <= 0) return InvalidArgumentError("connect_timeout must be > 0");
  if (control_timeout.count() <= 0) return InvalidArgumentError("control_timeout must be > 0");
  if (max_concurrent_acquires == 0) {
    return InvalidArgumentError("max_concurrent_acquires must be > 0");
  }
  if (instance_id.size() > control::kMaxTicketBytes) {
    return InvalidArgumentError("instance_id: at most " + std::to_string(control::kMaxTicketBytes) +
                                " bytes, got " + std::to_string(instance_id.size()));
  }
  AGENTKV_RETURN_IF_ERROR(
      CheckDuration("--coordinator-heartbeat-interval-s", heartbeat_interval, true));
  AGENTKV_RETURN_IF_ERROR(
      CheckDuration("--coordinator-heartbeat-timeout-s", heartbeat_timeout, false));
  AGENTKV_RETURN_IF_ERROR(
      CheckDuration("--coordinator-breaker-cooldown-s", breaker_cooldown, false));
  if (breaker_failures < 1 || breaker_failures > 1000) {
    return InvalidArgumentError("--coordinator-breaker-failures must be in [1, 1000], got " +
                                std::to_string(breaker_failures));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<RemoteAdmission>> RemoteAdmission::Create(
    const RemoteAdmissionOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<RemoteAdmission> admission(new RemoteAdmission(options));
  if (options.heartbeat_interval.count() > 0) {
    admission->heartbeat_ = std::thread([a = admission.get()] { a->HeartbeatLoop(); });
  }
  return admission;
}

RemoteAdmission::RemoteAdmission(const RemoteAdmissionOptions& options)
    : options_(options), breaker_(options.breaker_failures, ToTimeNs(options.breaker_cooldown)) {
  if (options_.instance_id.empty()) options_.instance_id = RandomInstanceId();
  net::HttpClientOptions acquire;
  acquire.connect_timeout = options.connect_timeout;
  acquire.header_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil((options.max_wait_s + kAcquireMarginS) * 1000.0)));
  acquire.max_connections_per_host = options.max_concurrent_acquires;
  acquire.max_idle_per_host = 64;
  acquire_client_ = std::make_unique<net::HttpClient>(acquire);
  net::HttpClientOptions control;
  control.connect_timeout = options.connect_timeout;
  control.header_timeout = options.control_timeout;
  control.body_timeout = options.control_timeout;
  control.queue_timeout = options.control_timeout;
  control_client_ = std::make_unique<net::HttpClient>(control);
  net::HttpClientOptions heartbeat;
  heartbeat.connect_timeout = options.heartbeat_timeout;
  heartbeat.header_timeout = options.heartbeat_timeout;
  heartbeat.body_timeout = options.heartbeat_timeout;
  heartbeat.queue_timeout = options.heartbeat_timeout;
  heartbeat.max_connections_per_host = 1;
  heartbeat.max_idle_per_host = 1;
  heartbeat_client_ = std::make_unique<net::HttpClient>(heartbeat);
}

RemoteAdmission::~RemoteAdmission() {
  {
    sync::MutexLock lock(&heartbeat_mu_);
    heartbeat_stop_ = true;
  }
  heartbeat_wake_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  {
    sync::MutexLock lock(&in_flight_mu_);
    const auto deadline = std::chrono::steady_clock::now() + options_.control_timeout;
    while (in_flight_ != 0) {
      if (in_flight_done_.WaitWithDeadline(&in_flight_mu_, deadline)) break;
    }
  }
  closing_ = true;
  // Acquire callbacks that run now answer `degraded` and start no cancel (closing_).
  acquire_client_.reset();
  control_client_.reset();
  heartbeat_client_.reset();
}

void RemoteAdmission::HeartbeatLoop() {
  sync::ReleasableMutexLock lock(&heartbeat_mu_);
  while (!heartbeat_stop_) {
    const auto started = std::chrono::steady_clock::now();
    lock.Unlock();
    OnProbe(SendHeartbeat());
    lock.Lock();
    const auto next = started + options_.heartbeat_interval;
    while (!heartbeat_stop_) {
      if (heartbeat_wake_.WaitWithDeadline(&heartbeat_mu_, next)) break;
    }
  }
}

bool RemoteAdmission::SendHeartbeat() {
  StatusOr<net::ClientResponse> response = heartbeat_client_->Request(
      http::verb::post, options_.coordinator_url, std::string(kHeartbeatPath), Headers(),
      SerializeHeartbeatRequest(options_.instance_id));
  if (response.ok() && response->status == 200) {
    OnSuccess();
    return true;
  }
  OnFailure(Op::kHeartbeat, Describe(response));
  return false;
}

void RemoteAdmission::OnProbe(bool answered) {
  const TimeNs now = SteadyNow();
  CoordinatorBreaker::Change change;
  int failures = 0;
  TimeNs opened_at;
  {
    sync::MutexLock lock(&breaker_mu_);
    change = breaker_.OnProbe(answered, now);
    failures = breaker_.consecutive_failures();
    opened_at = breaker_.opened_at();
  }
  if (change == CoordinatorBreaker::Change::kClosed) {
    options_.log(LogLevel::kInfo, LogLine("coordinator_breaker_closed")
                                      .Add("coordinator", options_.coordinator_url)
                                      .Add("open_s", (now - opened_at).seconds())
                                      .Add("bypassed", breaker_bypassed_.load()));
    return;
  }
  if (change != CoordinatorBreaker::Change::kOpened) return;
  // Every acquire in flight waits on a coordinator that stopped answering: cut them now (each
  // then answers `degraded` and cancels its ticket) rather than at their header timeout.
  std::vector<std::shared_ptr<net::HttpClient::StreamHandle>> cut;
  {
    sync::MutexLock lock(&pending_mu_);
    for (auto& [id, pending] : pending_) {
      pending.cut = true;
      if (pending.handle != nullptr) cut.push_back(pending.handle);
    }
  }
  options_.log(
      LogLevel::kWarn,
      LogLine("coordinator_breaker_opened")
          .Add("coordinator", options_.coordinator_url)
          .Add("failures", failures)
          .Add("cooldown_s", static_cast<double>(options_.breaker_cooldown.count()) / 1000.0)
          .Add("cut_acquires", cut.size()));
  for (const auto& handle : cut) handle->Cancel();
}

bool RemoteAdmission::BreakerOpen() const {
  sync::MutexLock lock(&breaker_mu_);
  return breaker_.open();
}

CoordinatorBreakerState RemoteAdmission::breaker() const {
  sync::MutexLock lock(&breaker_mu_);
  return CoordinatorBreakerState{breaker_.open(), breaker_.opens(), breaker_bypassed_.load()};
}

net::HeaderList RemoteAdmission::Headers() const {
  net::HeaderList headers{{"Content-Type", "application/json"}};
  if (!options_.auth_token.empty()) {
    headers.emplace_back("Authorization", "Bearer " + options_.auth_token);
  }
  return headers;
}

void RemoteAdmission::Acquire(control::AcquireRequest request, AcquireCallback done) {
  uint64_t id = 0;
  {
    // Checked under pending_mu_, so that an acquire either bypasses here or is in pending_
    // before an opening breaker cuts what is there.
    sync::MutexLock lock(&pending_mu_);
    if (!BreakerOpen()) {
      id = ++next_pending_;
      pending_.emplace(id, PendingAcquire{});
    }
  }
  if (id == 0) {
    ++breaker_bypassed_;
    return done(DegradedBypass(request.ticket, request.reservation_tokens));
  }
  std::string body = SerializeAcquireRequest(request, options_.instance_id);
  std::shared_ptr<net::HttpClient::StreamHandle> handle = acquire_client_->AsyncRequest(
      http::verb::post, options_.coordinator_url, std::string(kAcquirePath), Headers(),
      std::move(body),
      [this, id, ticket = std::move(request.ticket), tokens = request.reservation_tokens,
       done = std::move(done)](StatusOr<net::ClientResponse> response) {
        {
          sync::MutexLock lock(&pending_mu_);
          pending_.erase(id);
        }
        bool answered_error = false;
        std::string error = Describe(response);
        if (response.ok() && response->status == 200) {
          StatusOr<AdmissionDecision> decision = ParseDecision(response->body);
          if (decision.ok()) {
            OnSuccess();
            return done(*decision);
          }
          error = "unreadable decision: " + decision.status().message();
        } else if (response.ok()) {
          answered_error = true;  // The coordinator refused the request: it holds nothing.
        }
        OnFailure(Op::kAcquire, error);
        // The coordinator may have granted the ticket without our hearing of it.
        if (!answered_error)
          PostAndForget(Op::kCancel, kCancelPath, SerializeCancelRequest(ticket));
        done(DegradedBypass(ticket, tokens));
      });
  bool cut = false;
  {
    sync::MutexLock lock(&pending_mu_);
    if (auto it = pending_.find(id); it != pending_.end()) {
      it->second.handle = handle;
      cut = it->second.cut;
    }
  }
  if (cut) handle->Cancel();  // The breaker opened while it was being sent.
}

void RemoteAdmission::Release(const std::string& lease_id) {
  PostAndForget(Op::kRelease, kReleasePath, SerializeReleaseRequest(lease_id));
}

void RemoteAdmission::Cancel(const std::string& ticket) {
  PostAndForget(Op::kCancel, kCancelPath, SerializeCancelRequest(ticket));
}

void RemoteAdmission::Reconcile(std::span<const control::EngineSnapshot> /*snapshots*/) {}

void RemoteAdmission::PostAndForget(Op op, std::string_view path, std::string body) {
  if (closing_) return;
  {
    sync::MutexLock lock(&in_flight_mu_);
    ++in_flight_;
  }
  control_client_->AsyncRequest(http::verb::post, options_.coordinator_url, std::string(path),
                                Headers(), std::move(body),
                                [this, op](StatusOr<net::ClientResponse> response) {
                                  if (!response.ok() || response->status != 200) {
                                    OnFailure(op, Describe(response));
                                  } else {
                                    OnSuccess();
                                  }
                                  sync::MutexLock lock(&in_flight_mu_);
                                  if (--in_flight_ == 0) in_flight_done_.SignalAll();
                                });
}

std::vector<std::pair<std::string, double>> RemoteAdmission::StepMetrics(bool reset_step) {
  std::string target(kAgenticKvPath);
  if (reset_step) target += "?reset=1";
  StatusOr<net::ClientResponse> response =
      control_client_->Request(http::verb::get, options_.coordinator_url, target, Headers());
  if (response.ok() && response->status == 200) {
    StatusOr<std::vector<std::pair<std::string, double>>> metrics =
        ParseStepMetrics(response->body);
    if (metrics.ok()) {
      OnSuccess();
      return *std::move(metrics);
    }
  }
  OnFailure(Op::kMetrics, Describe(response));
  return {{std::string(control::kDegradedMetric), 1.0}};
}

AdmissionBackendFailures RemoteAdmission::failures() const {
  sync::MutexLock lock(&health_mu_);
  return failures_;
}

void RemoteAdmission::OnFailure(Op op, std::string_view error) {
  std::optional<LogLine> line;
  {
    sync::MutexLock lock(&health_mu_);
    std::string_view name;
    switch (op) {
      case Op::kAcquire:
        ++failures_.acquire;
        name = "acquire";
        break;
      case Op::kRelease:
        ++failures_.release;
        name = "release";
        break;
      case Op::kCancel:
        ++failures_.cancel;
        name = "cancel";
        break;
      case Op::kMetrics:
        ++failures_.metrics;
        name = "metrics";
        break;
      case Op::kHeartbeat:
        ++failures_.heartbeat;
        name = "heartbeat";
        break;
    }
    ++unlogged_failures_;
    const auto now = std::chrono::steady_clock::now();
    if (failing_ && last_log_.has_value() && now - *last_log_ < kFailureLogInterval) return;
    line.emplace("coordinator_failed");
    line->Add("coordinator", options_.coordinator_url)
        .Add("op", name)
        .Add("failures", unlogged_failures_)
        .Quoted("error", error);
    failing_ = true;
    unlogged_failures_ = 0;
    last_log_ = now;
  }
  options_.log(LogLevel::kWarn, *line);
}

void RemoteAdmission::OnSuccess() {
  int64_t unlogged = 0;
  {
    sync::MutexLock lock(&health_mu_);
    if (!failing_) return;
    failing_ = false;
    unlogged = unlogged_failures_;
    unlogged_failures_ = 0;
    last_log_.reset();
  }
  options_.log(LogLevel::kInfo, LogLine("coordinator_recovered")
                                    .Add("coordinator", options_.coordinator_url)
                                    .Add("unlogged_failures", unlogged));
}

}  // namespace agentkv::service
