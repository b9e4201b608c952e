// The gateway's startup: its clients, sessions, poller and routes, and the engines' checks
// before it serves. The data path is in gateway.cc. Invariants: gateway_core.h.
#include <cstdio>
#include <random>
#include <string>

#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_core.h"
#include "agentkv/service/gateway/gateway_prerequisites.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

using gateway_internal::Clock;
namespace http = net::http;

namespace {

// The read-only routes the gateway passes through unchanged (HandlePassThrough): what OpenAI
// clients and SGLang tooling ask before or beside generating. The RL control routes
// (/pause_generation, /update_weights_*, /release_memory_occupation, ...) are not among them:
// they act on one engine each, so RL frameworks call every engine directly.
constexpr std::pair<http::verb, const char*> kPassThroughRoutes[] = {
    {http::verb::get, "/v1/models"},       {http::verb::get, "/model_info"},
    {http::verb::get, "/get_model_info"},  {http::verb::get, "/server_info"},
    {http::verb::get, "/get_server_info"}, {http::verb::post, "/tokenize"},
    {http::verb::post, "/detokenize"},     {http::verb::post, "/v1/tokenize"},
    {http::verb::post, "/v1/detokenize"},
};

// "gw-" and 32 random hex digits: this gateway instance among those sharing a coordinator.
std::string NewInstanceId() {
  std::random_device entropy;
  char instance[40];
  std::snprintf(instance, sizeof(instance), "gw-%08x%08x%08x%08x", static_cast<unsigned>(entropy()),
                static_cast<unsigned>(entropy()), static_cast<unsigned>(entropy()),
                static_cast<unsigned>(entropy()));
  return instance;
}

}  // namespace

Status Gateway::Core::Init() {
  AGENTKV_RETURN_IF_ERROR(options_.Validate());
  lifecycle_ = options_.agentic.agentic_session_lifecycle;
  admission_ = options_.agentic.agentic_program_admission;
  if (admission_ && backend_ == nullptr) {
    return InvalidArgumentError(std::string(control::kProgramAdmissionFlag) +
                                " needs an admission backend");
  }
  instance_id_ = NewInstanceId();
  id_prefix_ = instance_id_ + "-";
  context_length_ = options_.context_length;
  AGENTKV_RETURN_IF_ERROR(DiscoverEngines());
  OpenSessions();
  loops_ = std::make_shared<net::IoLoops>(options_.http.threads, net::IoLoops::Shape::kPerThread,
                                          "a gateway handler", "gateway-io");
  data_client_ = std::make_unique<net::HttpClient>(options_.upstream, loops_);
  AGENTKV_ASSIGN_OR_RETURN(const bool scrape_metrics, CreatePoller());
  return Serve(scrape_metrics);
}

Status Gateway::Core::DiscoverEngines() {
  net::HttpClientOptions control;
  control.connect_timeout = options_.control_timeout();
  control.header_timeout = options_.control_timeout();
  control.body_timeout = options_.control_timeout();
  control.queue_timeout = options_.control_timeout();
  control.max_connections_per_host = 256;
  control_client_ = std::make_unique<net::HttpClient>(control);
  directory_ = std::make_unique<EngineDirectory>(options_.router_url, options_.engine_urls,
                                                 control_client_.get());
  if (StatusOr<std::vector<std::string>> urls = directory_->Refresh(); !urls.ok()) {
    Log(LogLevel::kWarn, LogLine("engine_discovery_failed")
                             .Add("router", options_.router_url)
                             .Quoted("error", urls.status().message()));
  }
  if (options_.check_prerequisites) AGENTKV_RETURN_IF_ERROR(CheckEnginePrerequisites());
  return Status::Ok();
}

void Gateway::Core::OpenSessions() {
  SessionManagerOptions session_options;
  session_options.lifecycle = lifecycle_;
  session_options.idle_timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.session_idle_timeout_s));
  session_options.drain_timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.session_drain_timeout_s));
  session_options.max_closed_sessions = options_.max_closed_sessions;
  session_options.max_sessions = options_.max_sessions;
  session_options.max_retained_sessions = options_.max_retained_sessions;
  session_options.subagent_demotion = options_.agentic_subagent_demotion;
  session_options.on_close_outcome = [this](const std::string& session_id, bool ok) {
    metrics_.CountSessionClose(ok);
    if (options_.on_session_close) options_.on_session_close(ok);
    Log(ok ? LogLevel::kInfo : LogLevel::kWarn,
        LogLine("session_closed").Add("session", session_id).Add("ok", ok));
  };
  sessions_ = std::make_unique<SessionManager>(std::move(session_options), this);
  {
    sync::MutexLock lock(&new_sessions_mu_);
    new_sessions_ = std::make_unique<NewSessionLimiter>(options_.max_new_sessions_per_s,
                                                        options_.new_sessions_burst);
  }
  if (options_.OpenDoor()) {
    Log(LogLevel::kWarn,
        LogLine("unauthenticated_sessions")
            .Add("host", options_.http.address)
            .Quoted("detail",
                    "--allow-unauthenticated: anyone who reaches this port can close or abort any "
                    "session; set --tenant-keys-file or --bearer-token"));
  }
}

StatusOr<bool> Gateway::Core::CreatePoller() {
  FleetPollerOptions poller_options;
  poller_options.interval = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(options_.agentic.poll_interval_s));
  poller_options.timeout = options_.metrics_timeout();
  if (options_.working_set.has_value()) {
    LocalWorkingSetOptions ws;
    ws.working_set = *options_.working_set;
    AGENTKV_ASSIGN_OR_RETURN(working_set_, GatewayWorkingSet::Create(std::move(ws)));
  }
  poller_options.scrape_metrics =
      (admission_ || working_set_ != nullptr) && options_.poll_fleet_metrics;
  poller_ = std::make_unique<FleetPoller>(
      poller_options, directory_.get(), control_client_.get(),
      [this](std::vector<control::EngineSnapshot> snapshots) {
        if (backend_ != nullptr) backend_->Reconcile(snapshots);
        if (working_set_ != nullptr) working_set_->Reconcile(snapshots);
      },
      options_.log);
  return poller_options.scrape_metrics;
}

Status Gateway::Core::Serve(bool scrape_metrics) {
  net::Router router;
  Routes(router);
  AGENTKV_ASSIGN_OR_RETURN(server_,
                           net::HttpServer::Start(options_.http, router.AsHandler(), loops_));
  // A first poll before serving, so that admission starts with a fresh capacity snapshot
  // instead of bypassing (degraded) until the poller's first round.
  if (scrape_metrics) poller_->PollOnce();
  if (scrape_metrics || directory_->uses_router()) poller_->Start();
  sweeper_ = std::thread([this] { SweepLoop(); });
  Log(LogLevel::kInfo,
      LogLine("gateway_started")
          .Add("url", server_->base_url())
          .Add("upstream", options_.router_url.empty() ? "engines" : options_.router_url)
          .Add("lifecycle", lifecycle_ ? "on" : "off")
          .Add("admission", admission_ ? "on" : "off")
          .Add("working_set", working_set_ != nullptr ? "on" : "off")
          .Add("router_policy", SglRouterPolicyName(options_.router_policy)));
  return Status::Ok();
}

Status Gateway::Core::CheckEnginePrerequisites() {
  if (!lifecycle_ && !admission_) return Status::Ok();
  std::vector<EngineServerInfo> infos;
  for (const std::string& url : directory_->urls()) {
    StatusOr<net::ClientResponse> r =
        control_client_->Request(http::verb::get, url, std::string(protocol::kServerInfoPath));
    StatusOr<protocol::ServerInfo> info =
        !r.ok() ? StatusOr<protocol::ServerInfo>(r.status())
        : r->status != 200
            ? StatusOr<protocol::ServerInfo>(UnavailableError("HTTP " + std::to_string(r->status)))
            : protocol::ParseServerInfo(r->body);
    if (info.ok()) {
      Log(LogLevel::kInfo, LogLine("engine_checked")
                               .Add("engine", url)
                               .Quoted("version", info->version)
                               .Add("enable_session_radix_cache", info->enable_session_radix_cache)
                               .Add("radix_eviction_policy", info->radix_eviction_policy)
                               .Add("enable_metrics", info->enable_metrics));
    }
    infos.push_back(EngineServerInfo{url, std::move(info)});
  }
  if (!context_length_.has_value()) context_length_ = FleetContextLength(infos);
  AGENTKV_ASSIGN_OR_RETURN(
      PrerequisiteOutcome outcome,
      CheckPrerequisites(infos, lifecycle_, admission_, options_.prerequisite_policy));
  for (const LogLine& warning : outcome.warnings) Log(LogLevel::kWarn, warning);
  lifecycle_ = outcome.lifecycle;
  admission_ = outcome.admission;
  return Status::Ok();
}

void Gateway::Core::Routes(net::Router& router) {
  for (GatewayRoute route :
       {GatewayRoute::kGenerate, GatewayRoute::kChatCompletions, GatewayRoute::kCompletions}) {
    router.Add(http::verb::post, std::string(RoutePath(route)),
               [this, route](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                 HandleForward(route, std::move(q), std::move(w));
               });
  }
  router.Add(
      http::verb::get, "/metrics",
      [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) { HandleMetrics(q, *w); });
  router.Add(
      http::verb::get, "/agentic_kv",
      [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) { HandleAgenticKv(q, *w); });
  router.Add(
      http::verb::get, "/health", [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
        const bool down = shutting_down_.load();
        w->Reply(net::MakeResponse(q, down ? http::status::service_unavailable : http::status::ok,
                                   down ? R"({"status":"shutting_down"})" : R"({"status":"ok"})"));
      });
  for (const auto& [verb, path] : kPassThroughRoutes) {
    router.Add(verb, path, [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
      HandlePassThrough(std::move(q), std::move(w));
    });
  }
  // GET /v1/models/{model} (the SDK's models.retrieve) passes through as the model list does.
  router.AddPrefix(http::verb::get, "/v1/models/",
                   [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                     HandlePassThrough(std::move(q), std::move(w));
                   });
  // POST /v1/sessions/{id}/close has a variable path segment: the fallback matches it.
  router.SetFallback([this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
    HandleClose(std::move(q), std::move(w));
  });
}

}  // namespace agentkv::service
