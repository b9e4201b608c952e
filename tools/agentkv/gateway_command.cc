#include "tools/agentkv/gateway_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "agentkv/net/http_types.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/admission/admission_remote.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/tenant_keys.h"
#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/server_flags.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Session KV lifecycle and program-aware admission in front of an SGLang fleet (forwards "
    "/generate and the OpenAI routes to the router)";

constexpr const char* kFooter = R"(What it does (docs/GATEWAY.md):
  Forwards POST /generate, /v1/chat/completions and /v1/completions to --router-url (or round
  robin over --engine-urls), streams included. Each backend attempt gets a unique rid.
  --agentic-session-lifecycle  sends the session id (body `session_id`, else --session-header)
      as top-level session_id (and X-SMG-Routing-Key with --router-policy consistent_hashing);
      POST /v1/sessions/{id}/close (or --session-idle-timeout-s) aborts the session's requests
      and posts /close_session to every engine. A request with X-Agentkv-Session-Retain: 1
      retains its session (partial rollout): only its close ends it (--max-retained-sessions).
  --agentic-program-admission  admits each attempt against the fleet's KV budget (global
      FIFO, token ledger fed by the engines' /metrics); in process, or through
      `agentkv coordinator` with --coordinator-url.
  --agentic-working-set  admits programs (a main agent and its sub-agents) by the fleet's
      working set: a paused program's context stays counted for its predicted pause, and a
      new program waits until its first request fits (--agentic-working-set-*).
  --agentic-pause-priority  gives each forwarded request an SGLang `priority` by the pause
      expected after it (X-Agentkv-Pause, else the last chat message: role "tool" = tool_call,
      "user" = human_turn), so that --radix-eviction-policy priority keeps a tool loop's KV
      over a session waiting for its user.
  --agentic-program-fcfs  stamps each forwarded request's `priority` by its program's arrival
      (older programs higher), so that SGLang's --enable-priority-scheduling serves a
      continuing agent's next turn before newer programs' requests.
  GET /metrics, GET /agentic_kv[?reset=1], GET /health.

The fleet needs SGLang's --enable-session-radix-cache and --radix-eviction-policy priority
(lifecycle) and --enable-metrics (admission); checked at startup (--prerequisite-policy).
Every flag can also come from the environment as AGENTKV_<FLAG> (e.g. AGENTKV_BEARER_TOKEN,
AGENTKV_TENANT_KEYS_FILE, AGENTKV_PARENT_HINT_KEY) or from `agentkv --config FILE gateway` ([gateway] section).

Example:
  agentkv gateway --port 8080 --router-url http://127.0.0.1:30000 \
      --router-policy consistent_hashing --agentic-session-lifecycle --agentic-program-admission)";

}  // namespace

// Long: one flat list of the gateway's flag registrations, in the order --help shows them;
// split, the list would be scattered over functions that each register an arbitrary part.
GatewayCommand::GatewayCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  CLI::App& c = *command_;
  service::GatewayOptions& o = options_;
  server_.Add(c, FlagSource::kCommandLineAndEnvironment);
  CLI::Option* router = AddEnvOption(c, "--router-url", o.router_url,
                                     "sgl-router base URL (engines discovered with GET /workers)");
  CLI::Option* engines =
      c.add_option("--engine-urls", o.engine_urls, "Fixed engine base URLs instead of a router")
          ->envname(FlagEnvName("--engine-urls"))
          ->delimiter(',');
  router->excludes(engines);
  AddEnvOption(c, "--router-policy", router_policy_,
               "The router's policy (consistent_hashing adds X-SMG-Routing-Key)");
  AddEnvOption(c, "--session-header", o.session_header,
               "Header naming the session when the body has no session_id");
  AddEnvOption(c, "--close-timeout-s", o.close_timeout_s, "Bound on one /close_session fan-out");
  AddEnvOption(c, "--session-idle-timeout-s", o.session_idle_timeout_s,
               "End and close sessions idle this long (0 = never)");
  AddEnvOption(c, "--session-drain-timeout-s", o.session_drain_timeout_s,
               "How long a closing session waits for its aborted requests");
  AddEnvOption(c, "--max-closed-sessions", o.max_closed_sessions,
               "Closed sessions remembered for idempotent closes");
  AddEnvOption(c, "--default-max-tokens", o.default_max_tokens,
               "Decode tokens reserved for an OpenAI request without max_tokens");
  AddEnvOption(c, "--control-timeout-s", o.control_timeout_s,
               "Timeout of each abort, /close_session and /server_info request");
  AddEnvOption(c, "--metrics-timeout-s", o.metrics_timeout_s,
               "How long a poll waits for /workers, then for the engines' /metrics; poll "
               "interval + 2 x this must be below the staleness");
  context_length_option_ =
      c.add_option("--context-length", context_length_,
                   "The model's context length: requests that cannot fit get SGLang's 400 at "
                   "once (default: the engines' /server_info context_length, if reported)")
          ->envname(FlagEnvName("--context-length"));
  AddEnvOption(c, "--max-sessions", o.max_sessions,
               "Most sessions accepting requests; more end the longest-idle one, or get 503");
  max_retained_sessions_option_ =
      c.add_option("--max-retained-sessions", max_retained_sessions_,
                   "Most sessions retained at once (X-Agentkv-Session-Retain: 1: never idled out "
                   "or evicted); a mark past it gets 429 (default: --max-sessions / 2)")
          ->envname(FlagEnvName("--max-retained-sessions"));
  AddEnvOption(c, "--max-body-bytes", max_body_bytes_,
               "Largest request body; a larger one gets 413 as soon as its Content-Length (or "
               "its chunks) show it, before more is read");
  AddEnvOption(c, "--max-inflight-bytes", max_inflight_bytes_,
               "Bound on the bytes all requests hold together (bodies being read or served, "
               "answers queued for slow clients); a request with a body past it gets 503 with "
               "Retry-After, requests under way continue (0 = no bound)");
  AddEnvOption(c, "--upstream-timeout-s", upstream_timeout_s_,
               "Longest wait for an upstream's response headers");
  AddEnvOption(c, "--upstream-connections", upstream_connections_,
               "Most open connections to each upstream (router or engine); requests beyond "
               "wait in the gateway. Each held request uses two descriptors");
  c.add_flag_callback(
      "--no-check-prerequisites", [&o] { o.check_prerequisites = false; },
      "Skip the /server_info checks at startup");
  AddEnvOption(c, "--prerequisite-policy", prerequisite_policy_,
               "refuse (exit) or disable (turn the feature off) when an engine lacks a flag");
  AddEnvOption(c, "--bearer-token", o.bearer_token,
               "Admin token: required on the session-close and admin endpoints, acts on every "
               "session (prefer the environment)");
  AddEnvOption(c, "--tenant-keys-file", tenant_keys_file_,
               "File of `TENANT KEY` lines: every request and close then needs a tenant's key "
               "(or the admin token), and each tenant's sessions are its own");
  c.add_flag("--allow-unauthenticated", o.allow_unauthenticated,
             "Start with the session lifecycle on a non-loopback --host without --bearer-token "
             "or --tenant-keys-file (anyone who reaches the port can close any session)")
      ->envname(FlagEnvName("--allow-unauthenticated"));
  AddEnvOption(c, "--max-new-sessions-per-s", o.max_new_sessions_per_s,
               "New sessions each client (tenant, admin, or all unauthenticated callers) may "
               "open a second; past it 429 (0 = no limit). In [0, 1000000]. Default: 100");
  AddEnvOption(c, "--new-sessions-burst", o.new_sessions_burst,
               "New sessions a client may open at once before --max-new-sessions-per-s "
               "applies. Default: 1000");
  AddEnvOption(c, "--agentic-pause-priority", pause_priority_,
               "SGLang request priority per expected pause, e.g. tool_call=10,human_turn=0 "
               "(KIND: tool_call, subagent_wait, human_turn, session_end; P in [0, 1000000]); "
               "added to bodies "
               "that set none. Default: empty (no priority added)");
  c.add_flag("--agentic-program-fcfs", o.program_fcfs,
             "Program-level FCFS on SGLang's priority scheduling: stamp each forwarded body's "
             "priority so that older programs (a sub-agent counts as its parent's) are served "
             "first; engines need --enable-priority-scheduling (docs/GATEWAY.md). An untrusted "
             "caller's priority is replaced. Exclusive with --agentic-pause-priority. "
             "Default: false")
      ->envname(FlagEnvName("--agentic-program-fcfs"));
  c.add_flag("--agentic-forward-pause", o.forward_pause,
             "Forward the expected pause as the body member agentkv_pause, for agentkv's engines "
             "(emulate --eviction-order gap_aware); stock SGLang ignores it. Default: false")
      ->envname(FlagEnvName("--agentic-forward-pause"));
  AddEnvOption(c, "--parent-hint-key", o.parent_hint_key,
               "HMAC-SHA256 key of signed sub-agent parent hints (prefer the environment)");
  c.add_flag("--agentic-subagent-demotion", o.agentic_subagent_demotion,
             "When a parent session (named by verified hints) sends a request, POST "
             "/demote_finished_subagents to every engine (agentkv engines; SGLang has no such "
             "call). Default: off");
  AddEnvOption(c, "--agentic-subagent-routing", subagent_routing_,
               "own (a sub-agent is routed by its own session) or parent (by its verified "
               "parent's session, with consistent_hashing and the lifecycle). Default: own")
      ->check(CLI::IsMember({"own", "parent"}));
  AddEnvOption(c, "--coordinator-url", coordinator_url_,
               "Use `agentkv coordinator` at this URL instead of in-process admission");
  AddEnvOption(c, "--coordinator-token", coordinator_token_, "Bearer token of the coordinator");
  AddEnvOption(c, "--coordinator-heartbeat-interval-s", heartbeat_interval_s_,
               "Between two heartbeats to the coordinator, which releases a silent gateway's "
               "leases after its --instance-timeout-s; 0 sends none. In [0, 3600]. Default: 1");
  AddEnvOption(c, "--coordinator-heartbeat-timeout-s", heartbeat_timeout_s_,
               "A heartbeat not answered within this counts as failed. In (0, 3600]. Default: 1");
  AddEnvOption(c, "--coordinator-breaker-failures", breaker_failures_,
               "Failed heartbeats in a row that open the circuit breaker: admission then bypasses "
               "(degraded) at once, waiting acquires included. In [1, 1000]. Default: 2");
  AddEnvOption(c, "--coordinator-breaker-cooldown-s", breaker_cooldown_s_,
               "The breaker stays open at least this long; then the first answered heartbeat "
               "closes it. In (0, 3600]. Default: 5");
  AddLogLevelOption(c, log_level_);
  agentic_.Add(c, AgenticFlags::Set::kAll, FlagSource::kCommandLineAndEnvironment);
  c.add_flag("--agentic-working-set", working_set_,
             "Program-level working-set admission: a paused program's context stays counted for "
             "its predicted pause, and a new program waits until its first request fits beside "
             "the live ones (before --agentic-program-admission when both are on). Default: off")
      ->envname(FlagEnvName("--agentic-working-set"));
  working_set_flags_.Add(c, "Working set");
}

int GatewayCommand::Run() {
  const std::string name = kName;
  StatusOr<service::GatewayOptions> built = Options();
  if (!built.ok()) return ReportError(name, built.status());
  service::GatewayOptions options = *std::move(built);
  WarnIfDescriptorsShort(upstream_connections_);

  BlockTerminationSignals();
  StatusOr<std::shared_ptr<service::AdmissionBackend>> backend = Backend(options);
  if (!backend.ok()) return ReportError(name, backend.status());
  StatusOr<std::unique_ptr<service::Gateway>> gateway = service::Gateway::Start(options, *backend);
  if (!gateway.ok()) return ReportError(name, gateway.status());
  fmt::print("agentkv gateway: serving {} -> {} (lifecycle {}, admission {})\n",
             (*gateway)->base_url(),
             options.router_url.empty() ? fmt::format("{} engines", options.engine_urls.size())
                                        : options.router_url,
             (*gateway)->lifecycle_enabled() ? "on" : "off",
             (*gateway)->admission_enabled()
                 ? (coordinator_url_.empty() ? "in process" : "via " + coordinator_url_)
                 : "off");
  std::fflush(stdout);
  WaitForTerminationSignal();
  (*gateway)->Shutdown(server_.shutdown_grace());
  return kExitOk;
}

StatusOr<service::GatewayOptions> GatewayCommand::Options() {
  service::GatewayOptions options = options_;
  StatusOr<control::AgenticOptions> agentic = agentic_.Options();
  if (!agentic.ok()) return agentic.status();
  options.agentic = *std::move(agentic);
  if (working_set_) {
    StatusOr<control::WorkingSetOptions> working_set = working_set_flags_.Options();
    if (!working_set.ok()) return working_set.status();
    options.working_set = *std::move(working_set);
  }
  options.route_subagents_by_parent = subagent_routing_ == "parent";
  if (context_length_option_->count() > 0) options.context_length = context_length_;
  if (max_retained_sessions_option_->count() > 0) {
    options.max_retained_sessions = max_retained_sessions_;
  }
  StatusOr<service::PrerequisitePolicy> policy =
      service::ParsePrerequisitePolicy(prerequisite_policy_);
  if (!policy.ok()) return policy.status();
  options.prerequisite_policy = *policy;
  StatusOr<protocol::PausePriorities> pause_priority =
      protocol::ParsePausePriorities(pause_priority_);
  if (!pause_priority.ok()) return pause_priority.status();
  options.pause_priority = *pause_priority;
  StatusOr<service::SglRouterPolicy> router_policy = service::ParseSglRouterPolicy(router_policy_);
  if (!router_policy.ok()) return router_policy.status();
  options.router_policy = *router_policy;
  AGENTKV_RETURN_IF_ERROR(CheckRanges());
  server_.ApplyTo(options.http);
  options.http.max_body_bytes = static_cast<size_t>(max_body_bytes_);
  options.http.max_inflight_bytes = static_cast<size_t>(max_inflight_bytes_);
  options.upstream.header_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(upstream_timeout_s_ * 1000.0));
  options.upstream.max_connections_per_host = static_cast<size_t>(upstream_connections_);
  // Every connection the pool may open may also stay idle (until the idle timeout): a smaller
  // cap closes connections under load only to open new ones for the next requests.
  options.upstream.max_idle_per_host = options.upstream.max_connections_per_host;
  options.log = SpdlogSinkAt(log_level_);
  ApplyLogLevel(log_level_);
  if (!tenant_keys_file_.empty()) {
    StatusOr<std::vector<service::TenantKey>> keys = service::ReadTenantKeysFile(tenant_keys_file_);
    if (!keys.ok()) return keys.status();
    options.tenant_keys = *std::move(keys);
  }
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  return options;
}

Status GatewayCommand::CheckRanges() const {
  Status s = server_.Check();
  if (s.ok()) {
    s = CheckFlagRange("--upstream-timeout-s", upstream_timeout_s_, 0.0, 86400.0,
                       LowerBound::kOpen);
  }
  if (s.ok()) s = CheckFlagRange("--upstream-connections", upstream_connections_, 1, 1'000'000);
  if (s.ok()) {
    s = CheckFlagRange("--coordinator-heartbeat-interval-s", heartbeat_interval_s_, 0.0, 3600.0);
  }
  if (s.ok()) {
    s = CheckFlagRange("--coordinator-heartbeat-timeout-s", heartbeat_timeout_s_, 0.0, 3600.0,
                       LowerBound::kOpen);
  }
  if (s.ok()) s = CheckFlagRange("--coordinator-breaker-failures", breaker_failures_, 1, 1000);
  if (s.ok()) {
    s = CheckFlagRange("--coordinator-breaker-cooldown-s", breaker_cooldown_s_, 0.0, 3600.0,
                       LowerBound::kOpen);
  }
  if (s.ok()) s = CheckFlagRange("--max-body-bytes", max_body_bytes_, int64_t{0}, int64_t{1} << 62);
  if (s.ok()) {
    s = CheckFlagRange("--max-inflight-bytes", max_inflight_bytes_, int64_t{0}, int64_t{1} << 62);
  }
  if (s.ok() && !coordinator_url_.empty()) {
    // Checked even when admission is off: a URL that names no reachable port is a mistake
    // whatever else is set.
    if (StatusOr<net::HttpEndpoint> e = net::ParseBaseUrl(coordinator_url_); !e.ok()) {
      s = InvalidArgumentError("--coordinator-url: " + e.status().message());
    }
  }
  return s;
}

StatusOr<std::shared_ptr<service::AdmissionBackend>> GatewayCommand::Backend(
    service::GatewayOptions& options) const {
  std::shared_ptr<service::AdmissionBackend> backend;
  if (options.agentic.agentic_program_admission) {
    if (!coordinator_url_.empty()) {
      service::RemoteAdmissionOptions remote;
      remote.coordinator_url = coordinator_url_;
      remote.auth_token = coordinator_token_;
      remote.max_wait_s = options.agentic.agentic_admission_max_wait_s;
      // Whole milliseconds, rounded up so that a positive duration never becomes 0.
      auto millis = [](double seconds) {
        return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
      };
      remote.heartbeat_interval = millis(heartbeat_interval_s_);
      remote.heartbeat_timeout = millis(heartbeat_timeout_s_);
      remote.breaker_failures = static_cast<int>(breaker_failures_);
      remote.breaker_cooldown = millis(breaker_cooldown_s_);
      remote.log = SpdlogSink;
      StatusOr<std::unique_ptr<service::RemoteAdmission>> created =
          service::RemoteAdmission::Create(remote);
      if (!created.ok()) return created.status();
      backend = std::shared_ptr<service::AdmissionBackend>(std::move(*created));
      // The coordinator polls the fleet for admission; the working set needs its own poll.
      options.poll_fleet_metrics = options.working_set.has_value();
    } else {
      service::LocalAdmissionOptions local;
      local.agentic = options.agentic;
      StatusOr<std::unique_ptr<service::LocalAdmission>> created =
          service::LocalAdmission::Create(local);
      if (!created.ok()) return created.status();
      std::shared_ptr<service::LocalAdmission> shared(std::move(*created));
      options.on_session_close = [shared](bool ok) { shared->CountSessionClose(ok); };
      backend = shared;
    }
  }
  return backend;
}

}  // namespace agentkv::tools
