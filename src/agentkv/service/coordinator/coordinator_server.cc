// Invariants:
// - Every acquire is answered exactly once (LocalAdmission's contract) or its client is gone;
//   a client that goes before its answer was written leaves nothing behind: an unanswered
//   ticket is cancelled (a waiter resolves `cancelled`, a grant racing with it is released),
//   an answered admit's lease is released.
// - The ledger is written only through LocalAdmission; the poller reconciles once per poll.
// - Every failed Status is answered through net::HttpStatusFor, the one Status-to-HTTP map.
#include "agentkv/service/coordinator/coordinator_server.h"

#include <atomic>
#include <cmath>
#include <optional>
#include <utility>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/net/http_status.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/json_util.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/protocol/workers.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/service/admission/working_set_wire.h"
#include "agentkv/service/common/agentic_kv_prometheus.h"
#include "agentkv/service/common/bearer_token.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
using control::AdmissionDecision;

constexpr std::string_view kUnauthorizedMessage = "missing or invalid bearer token";
constexpr const char* kEndpointNames[] = {"acquire",        "release",          "cancel",
                                          "agentic_kv",     "metrics",          "health",
                                          "heartbeat",      "program_acquire",  "program_finish",
                                          "program_cancel", "program_end_agent"};

void ReplyStatus(const net::Request& request, net::ResponseWriter& writer, const Status& status) {
  writer.Reply(
      net::MakeErrorResponse(request, net::HttpStatusFor(status.code()), status.message()));
}

}  // namespace

Status CoordinatorOptions::Validate() const {
  control::AgenticOptions enabled = agentic;
  enabled.agentic_program_admission = true;
  AGENTKV_RETURN_IF_ERROR(enabled.Validate());
  AGENTKV_RETURN_IF_ERROR(http.Validate());
  AGENTKV_RETURN_IF_ERROR(working_set.Validate());
  if (!router_url.empty()) {
    if (StatusOr<net::HttpEndpoint> e = net::ParseBaseUrl(router_url); !e.ok()) {
      return InvalidArgumentError("--router-url: " + e.status().message());
    }
  }
  for (const std::string& url : engine_urls) {
    if (StatusOr<net::HttpEndpoint> e = net::ParseBaseUrl(protocol::StripRankSuffix(url));
        !e.ok()) {
      return InvalidArgumentError("--engine-urls: " + e.status().message());
    }
  }
  AGENTKV_RETURN_IF_ERROR(
      control::CheckPollTiming(enabled, "--metrics-timeout-s", metrics_timeout_s));
  if (!(instance_timeout_s > 0.0 && instance_timeout_s <= 86400.0)) {
    return InvalidArgumentError("--instance-timeout-s must be in (0, 86400], got " +
                                std::to_string(instance_timeout_s));
  }
  if (tick_interval.count() <= 0) return InvalidArgumentError("tick_interval must be > 0");
  return Status::Ok();
}

CoordinatorServer::CoordinatorServer(const CoordinatorOptions& options) : options_(options) {
  options_.agentic.agentic_program_admission = true;
}

StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(options));
  AGENTKV_RETURN_IF_ERROR(s->CreateAdmission());
  s->CreatePoller();
  net::Router router;
  s->AddRoutes(router);
  AGENTKV_ASSIGN_OR_RETURN(s->server_, net::HttpServer::Start(options.http, router.AsHandler()));
  s->poller_->Start();
  return s;
}

Status CoordinatorServer::CreateAdmission() {
  LocalAdmissionOptions local;
  local.agentic = options_.agentic;
  local.tick_interval = options_.tick_interval;
  local.instance_timeout_s = options_.instance_timeout_s;
  local.on_instance_expired = [log = options_.log](const InstanceExpiry& expiry) {
    log(LogLevel::kWarn, LogLine("instance_expired")
                             .Add("instance", expiry.instance)
                             .Add("silent_s", expiry.silent_for.seconds())
                             .Add("leases", expiry.released.leases)
                             .Add("tokens", expiry.released.tokens)
                             .Add("waiters", expiry.released.waiters));
  };
  AGENTKV_ASSIGN_OR_RETURN(admission_, LocalAdmission::Create(std::move(local)));
  LocalWorkingSetOptions working_set;
  working_set.working_set = options_.working_set;
  AGENTKV_ASSIGN_OR_RETURN(working_set_, LocalWorkingSet::Create(std::move(working_set)));
  return Status::Ok();
}

void CoordinatorServer::CreatePoller() {
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(options_.metrics_timeout_s * 1000.0)));
  net::HttpClientOptions client;
  client.connect_timeout = timeout;
  client.header_timeout = timeout;
  client.body_timeout = timeout;
  client.queue_timeout = timeout;
  client_ = std::make_unique<net::HttpClient>(client);
  // A fixed engine list takes precedence over router discovery.
  directory_ = std::make_unique<EngineDirectory>(
      options_.engine_urls.empty() ? options_.router_url : std::string(), options_.engine_urls,
      client_.get());
  FleetPollerOptions poller;
  poller.timeout = timeout;
  poller.interval = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(options_.agentic.poll_interval().ns()));
  LocalAdmission* admission = admission_.get();
  LocalWorkingSet* ws = working_set_.get();
  poller_ = std::make_unique<FleetPoller>(
      poller, directory_.get(), client_.get(),
      [admission, ws](std::vector<control::EngineSnapshot> snapshots) {
        admission->Reconcile(snapshots);
        ws->Reconcile(snapshots);
      },
      options_.log);
}

void CoordinatorServer::AddRoutes(net::Router& router) {
  router.Add(http::verb::post, std::string(kAcquirePath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleAcquire(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kReleasePath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleRelease(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kCancelPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleCancel(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kHeartbeatPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleHeartbeat(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kProgramAcquirePath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleProgramAcquire(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kProgramFinishPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleProgramFinish(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kProgramCancelPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleProgramCancel(std::move(r), std::move(w));
             });
  router.Add(http::verb::post, std::string(kProgramEndAgentPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleProgramEndAgent(std::move(r), std::move(w));
             });
  router.Add(http::verb::get, std::string(kAgenticKvPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               HandleAgenticKv(std::move(r), std::move(w));
             });
  router.Add(http::verb::get, std::string(kCoordinatorMetricsPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               ++requests_[kMetrics];
               w->Reply(net::MakeResponse(r, http::status::ok, MetricsText(),
                                          protocol::kPrometheusContentType));
             });
  router.Add(http::verb::get, std::string(kCoordinatorHealthPath),
             [this](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
               ++requests_[kHealth];
               protocol::JsonWriter body;
               body.BeginObject().Key("status").String("ok");
               body.Key("degraded").Bool(admission_->degraded()).EndObject();
               w->Reply(net::MakeResponse(r, http::status::ok, body.Take()));
             });
}

CoordinatorServer::~CoordinatorServer() { Shutdown(std::chrono::milliseconds(0)); }

uint16_t CoordinatorServer::port() const { return server_->port(); }
std::string CoordinatorServer::base_url() const { return server_->base_url(); }

void CoordinatorServer::Shutdown(std::chrono::milliseconds deadline) {
  {
    sync::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (poller_ != nullptr) poller_->Stop();
  // Waiters are answered (bypass `degraded`) before the server stops, so that their clients
  // read an answer instead of a closed connection.
  if (admission_ != nullptr) admission_->Shutdown();
  if (working_set_ != nullptr) working_set_->Shutdown();
  if (server_ != nullptr) server_->Shutdown(deadline);
}

bool CoordinatorServer::Authorize(const net::Request& request, net::ResponseWriter& writer) const {
  const auto header = request[http::field::authorization];
  if (BearerAuthorized(std::string_view(header.data(), header.size()), options_.auth_token)) {
    return true;
  }
  net::Response response =
      net::MakeErrorResponse(request, http::status::unauthorized, kUnauthorizedMessage);
  response.set(http::field::www_authenticate, "Bearer");
  writer.Reply(std::move(response));
  return false;
}

void CoordinatorServer::HandleAcquire(net::Request request,
                                      std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kAcquire];
  if (!Authorize(request, *writer)) return;
  std::string instance;
  StatusOr<control::AcquireRequest> parsed = ParseAcquireRequest(request.body(), &instance);
  if (!parsed.ok()) return ReplyStatus(request, *writer, parsed.status());
  if (writer->client_gone()) return;

  // What the client-gone callback must undo depends on whether the answer was already given.
  struct Answer {
    sync::Mutex mu;
    bool answered AGENTKV_GUARDED_BY(mu) = false;
    std::optional<std::string> lease_id AGENTKV_GUARDED_BY(mu);
  };
  auto answer = std::make_shared<Answer>();
  LocalAdmission* admission = admission_.get();
  writer->OnClientGone([answer, admission, ticket = parsed->ticket] {
    bool answered = false;
    std::optional<std::string> lease_id;
    {
      sync::MutexLock lock(&answer->mu);
      answered = answer->answered;
      lease_id = answer->lease_id;
    }
    // Unanswered: cancel the ticket (a waiter resolves `cancelled`; a lease granted meanwhile
    // is released). Answered with a lease the client never read: return it.
    if (!answered) {
      admission->Cancel(ticket);
    } else if (lease_id.has_value()) {
      admission->Release(*lease_id);
    }
  });
  auto shared_request = std::make_shared<net::Request>(std::move(request));
  admission->AcquireWithStatus(
      *std::move(parsed),
      [answer, writer, shared_request](StatusOr<AdmissionDecision> result) {
        {
          sync::MutexLock lock(&answer->mu);
          answer->answered = true;
          if (result.ok()) answer->lease_id = result->lease_id;
        }
        if (!result.ok()) return ReplyStatus(*shared_request, *writer, result.status());
        writer->Reply(
            net::MakeResponse(*shared_request, http::status::ok, SerializeDecision(*result)));
      },
      instance);
}

void CoordinatorServer::HandleProgramAcquire(net::Request request,
                                             std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kProgramAcquire];
  if (!Authorize(request, *writer)) return;
  StatusOr<control::ProgramRequest> parsed = ParseProgramAcquire(request.body());
  if (!parsed.ok()) return ReplyStatus(request, *writer, parsed.status());
  if (writer->client_gone()) return;
  // What the client-gone callback must undo: an unanswered wait is cancelled; an admission
  // the client never read is finished with nothing held (as an unread lease is released).
  enum Answer : int { kUnanswered, kAdmitted, kOther };
  auto answer = std::make_shared<std::atomic<int>>(kUnanswered);
  LocalWorkingSet* ws = working_set_.get();
  writer->OnClientGone([answer, ws, ticket = parsed->ticket] {
    const int state = answer->load();
    if (state == kUnanswered) {
      ws->Cancel(ticket);
    } else if (state == kAdmitted) {
      ws->Finish(ticket, control::RequestEnd{.next_pause = PauseKind::kSessionEnd});
    }
  });
  auto shared_request = std::make_shared<net::Request>(std::move(request));
  const Status asked = ws->Acquire(
      *parsed, [answer, writer, shared_request](const control::WorkingSetDecision& decision) {
        answer->store(decision.admitted ? kAdmitted : kOther);
        writer->Reply(net::MakeResponse(*shared_request, http::status::ok,
                                        SerializeProgramDecision(decision)));
      });
  if (!asked.ok()) {
    answer->store(kOther);
    ReplyStatus(*shared_request, *writer, asked);
  }
}

void CoordinatorServer::HandleProgramFinish(net::Request request,
                                            std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kProgramFinish];
  if (!Authorize(request, *writer)) return;
  StatusOr<ProgramFinish> finish = ParseProgramFinish(request.body());
  if (!finish.ok()) return ReplyStatus(request, *writer, finish.status());
  working_set_->Finish(finish->ticket, finish->end);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleProgramCancel(net::Request request,
                                            std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kProgramCancel];
  if (!Authorize(request, *writer)) return;
  StatusOr<std::string> ticket = ParseProgramCancel(request.body());
  if (!ticket.ok()) return ReplyStatus(request, *writer, ticket.status());
  working_set_->Cancel(*ticket);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleProgramEndAgent(net::Request request,
                                              std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kProgramEndAgent];
  if (!Authorize(request, *writer)) return;
  StatusOr<std::string> agent = ParseProgramEndAgent(request.body());
  if (!agent.ok()) return ReplyStatus(request, *writer, agent.status());
  working_set_->EndAgent(*agent);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleHeartbeat(net::Request request,
                                        std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kHeartbeat];
  if (!Authorize(request, *writer)) return;
  StatusOr<std::string> instance = ParseHeartbeatRequest(request.body());
  if (!instance.ok()) return ReplyStatus(request, *writer, instance.status());
  admission_->Heartbeat(*instance);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleRelease(net::Request request,
                                      std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kRelease];
  if (!Authorize(request, *writer)) return;
  StatusOr<std::string> lease_id = ParseReleaseRequest(request.body());
  if (!lease_id.ok()) return ReplyStatus(request, *writer, lease_id.status());
  admission_->Release(*lease_id);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleCancel(net::Request request,
                                     std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kCancel];
  if (!Authorize(request, *writer)) return;
  StatusOr<std::string> ticket = ParseCancelRequest(request.body());
  if (!ticket.ok()) return ReplyStatus(request, *writer, ticket.status());
  admission_->Cancel(*ticket);
  writer->Reply(net::MakeResponse(request, http::status::ok, "{}"));
}

void CoordinatorServer::HandleAgenticKv(net::Request request,
                                        std::shared_ptr<net::ResponseWriter> writer) {
  ++requests_[kAgenticKv];
  if (!Authorize(request, *writer)) return;
  const bool reset = net::QueryFlag(request.target(), "reset");
  writer->Reply(net::MakeResponse(request, http::status::ok,
                                  SerializeStepMetrics(admission_->StepMetrics(reset))));
}

std::string CoordinatorServer::MetricsText() {
  // The coordinator decides admission but fans out no session closes (gateways do).
  AgenticKvTotals totals;
  totals.admission = true;
  totals.counts = admission_->TotalCounters().value_or(control::AdmissionCounters{});
  std::vector<protocol::MetricFamily> families =
      AgenticKvFamilies(admission_->StepMetrics(/*reset_step=*/false), totals);
  protocol::MetricFamily requests{"agentkv_coordinator_requests_total",
                                  "HTTP requests received since start, by endpoint (answered or "
                                  "not, authorized or not).",
                                  "counter",
                                  {}};
  for (int i = 0; i < kEndpointCount; ++i) {
    requests.samples.push_back(protocol::Sample{"",
                                                {protocol::Label{"endpoint", kEndpointNames[i]}},
                                                static_cast<double>(requests_[i].load()),
                                                std::nullopt});
  }
  families.push_back(std::move(requests));
  for (protocol::MetricFamily& family :
       WorkingSetFamilies(working_set_->Gauges(), working_set_->Counters())) {
    families.push_back(std::move(family));
  }
  const InstanceExpiryTotals expired = admission_->instance_expiry_totals();
  auto one = [&families](std::string name, std::string help, std::string type, double value) {
    families.push_back(protocol::MetricFamily{std::move(name),
                                              std::move(help),
                                              std::move(type),
                                              {protocol::Sample{"", {}, value, std::nullopt}}});
  };
  one("agentkv_coordinator_instances",
      "Caller instances (gateways) heard from within --instance-timeout-s.", "gauge",
      static_cast<double>(admission_->instances()));
  one("agentkv_coordinator_instance_expired_total",
      "Caller instances given up on after --instance-timeout-s of silence since start.", "counter",
      static_cast<double>(expired.instances));
  one("agentkv_coordinator_instance_leases_released_total",
      "Leases released because their instance went silent.", "counter",
      static_cast<double>(expired.leases));
  one("agentkv_coordinator_instance_tokens_released_total",
      "Tokens of the leases released because their instance went silent.", "counter",
      static_cast<double>(expired.tokens));
  one("agentkv_coordinator_instance_waiters_cancelled_total",
      "Waiting acquires cancelled because their instance went silent.", "counter",
      static_cast<double>(expired.waiters));
  return protocol::WritePrometheusText(families);
}

std::vector<control::EngineSnapshot> CoordinatorServer::PollOnce() { return poller_->PollOnce(); }

int64_t CoordinatorServer::polls() const { return poller_->polls(); }

}  // namespace agentkv::service
