// Invariants: every Acquire's `done` runs exactly once (HttpClient runs each request's callback
// once, also when destroyed); no request is started once closing_ is set; in_flight_ counts
// the control posts whose callback has not run yet.
#include "agentkv/service/admission_remote.h"

#include <cmath>
#include <utility>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/service/admission_wire.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
using control::AdmissionDecision;

// Past max_wait, how long the client still waits for the coordinator's answer.
constexpr double kAcquireMarginS = 10.0;

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
    return InvalidArgumentError("coordinator_url: " + e.status().message());
  }
  // A day is far beyond any sensible wait and keeps the millisecond conversion in range.
  if (!std::isfinite(max_wait_s) || max_wait_s < 0 || max_wait_s > 86400.0) {
    return InvalidArgumentError("max_wait_s must be in [0, 86400], got " +
                                std::to_string(max_wait_s));
  }
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
    std::unique_lock<std::mutex> lock(in_flight_mu_);
    in_flight_done_.wait_for(lock, options_.control_timeout, [this] { return in_flight_ == 0; });
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
        if (response.ok() && response->status == 200) {
          StatusOr<AdmissionDecision> decision = ParseDecision(response->body);
          if (decision.ok()) return done(*decision);
        } else if (response.ok()) {
          answered_error = true;  // The coordinator refused the request: it holds nothing.
        }
        ++failures_;
        // The coordinator may have granted the ticket without our hearing of it.
        if (!answered_error) PostAndForget(kCancelPath, SerializeCancelRequest(ticket));
        done(DegradedBypass(ticket, tokens));
      });
}

void RemoteAdmission::Release(const std::string& lease_id) {
  PostAndForget(kReleasePath, SerializeReleaseRequest(lease_id));
}

void RemoteAdmission::Cancel(const std::string& ticket) {
  PostAndForget(kCancelPath, SerializeCancelRequest(ticket));
}

void RemoteAdmission::Reconcile(std::span<const control::EngineSnapshot> /*snapshots*/) {}

void RemoteAdmission::PostAndForget(std::string_view path, std::string body) {
  if (closing_) return;
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ++in_flight_;
  }
  control_client_->AsyncRequest(http::verb::post, options_.coordinator_url, std::string(path),
                                Headers(), std::move(body),
                                [this](StatusOr<net::ClientResponse> response) {
                                  if (!response.ok() || response->status != 200) ++failures_;
                                  std::lock_guard<std::mutex> lock(in_flight_mu_);
                                  if (--in_flight_ == 0) in_flight_done_.notify_all();
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
    if (metrics.ok()) return *std::move(metrics);
  }
  ++failures_;
  return {{std::string(control::kDegradedMetric), 1.0}};
}

}  // namespace agentkv::service
