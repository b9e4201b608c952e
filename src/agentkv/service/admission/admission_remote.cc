// Invariants: every Acquire's `done` runs exactly once (HttpClient runs each request's callback
// once, also when destroyed); no request is started once closing_ is set; in_flight_ counts
// the control posts whose callback has not run yet.
#include "agentkv/service/admission/admission_remote.h"

#include <cmath>
#include <optional>
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
  return Status::Ok();
}

StatusOr<std::unique_ptr<RemoteAdmission>> RemoteAdmission::Create(
    const RemoteAdmissionOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<RemoteAdmission>(new RemoteAdmission(options));
}

RemoteAdmission::RemoteAdmission(const RemoteAdmissionOptions& options) : options_(options) {
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
}

RemoteAdmission::~RemoteAdmission() {
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
}

net::HeaderList RemoteAdmission::Headers() const {
  net::HeaderList headers{{"Content-Type", "application/json"}};
  if (!options_.auth_token.empty()) {
    headers.emplace_back("Authorization", "Bearer " + options_.auth_token);
  }
  return headers;
}

void RemoteAdmission::Acquire(control::AcquireRequest request, AcquireCallback done) {
  std::string body = SerializeAcquireRequest(request);
  acquire_client_->AsyncRequest(
      http::verb::post, options_.coordinator_url, std::string(kAcquirePath), Headers(),
      std::move(body),
      [this, ticket = std::move(request.ticket), tokens = request.reservation_tokens,
       done = std::move(done)](StatusOr<net::ClientResponse> response) {
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
