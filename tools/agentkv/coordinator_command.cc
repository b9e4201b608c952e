#include "tools/agentkv/coordinator_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "agentkv/service/coordinator/coordinator_server.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Fleet-wide program-aware admission over HTTP: one global FIFO and token ledger fed by the "
    "engines' /metrics (seed 000's AdmissionCoordinator)";

constexpr const char* kFooter = R"(API (docs/COORDINATOR.md):
  POST /admission/acquire {"ticket","reservation_tokens","protected"}  -> the final decision
       (admit with a lease, or bypass: protected, degraded, aged, cancelled); waits in the FIFO
       up to --agentic-admission-max-wait-s
  POST /admission/release {"lease_id"}      POST /admission/cancel {"ticket"}
  GET  /agentic_kv[?reset=1]  GET /metrics  GET /health
With --auth-token, /admission/* and /agentic_kv need `Authorization: Bearer <token>`.

Every flag can be set in the environment as AGENTKV_<FLAG> in upper snake case, e.g.
AGENTKV_ROUTER_URL, AGENTKV_AGENTIC_ADMISSION_HEADROOM, AGENTKV_AUTH_TOKEN.

Example:
  agentkv coordinator --port 7000 --router-url http://127.0.0.1:30000 \
      --agentic-admission-headroom 0.9 --agentic-admission-max-wait-s 30

Runs until SIGINT or SIGTERM; waiters are then answered bypass `degraded`.)";

Status CheckRange(const char* flag, int value, int low, int high) {
  if (value < low || value > high) {
    return InvalidArgumentError(
        fmt::format("{} must be in [{}, {}], got {}", flag, low, high, value));
  }
  return Status::Ok();
}

}  // namespace

CoordinatorCommand::CoordinatorCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  CLI::App& c = *command_;
  AddEnvOption(c, "--host", host_, "Address to bind (loopback by default)");
  AddEnvOption(c, "--port", port_, "Port to listen on (0 = any free port)");
  AddEnvOption(c, "--threads", threads_, "HTTP I/O threads");
  AddEnvOption(c, "--shutdown-grace-s", shutdown_grace_s_,
               "Seconds answers in flight get to be written at shutdown");
  CLI::Option* router =
      AddEnvOption(c, "--router-url", router_url_,
                   "sgl-router base URL: engines are discovered with GET /workers (fallback "
                   "/list_workers)");
  CLI::Option* engines = c.add_option("--engine-urls", engine_urls_,
                                      "Fixed engine base URLs instead of router discovery")
                             ->envname(FlagEnvName("--engine-urls"))
                             ->delimiter(',');
  router->excludes(engines);
  AddEnvOption(c, "--auth-token", auth_token_,
               "Bearer token required on /admission/* and /agentic_kv (empty: none)");
  AddEnvOption(c, control::kHeadroomFlag, agentic_.agentic_admission_headroom,
               "Share of the healthy engines' summed max_total_num_tokens admission may commit, "
               "in (0, 1]");
  AddEnvOption(c, control::kPressureThresholdFlag, agentic_.agentic_admission_pressure_threshold,
               "Worst-engine token_usage at or above which new requests wait, in (0, 1]");
  decode_cap_option_ = c.add_option(std::string(control::kExpectedDecodeCapFlag), decode_cap_,
                                    "Most decode tokens one reservation counts (> 0); "
                                    "informational here: clients compute reservations")
                           ->envname(FlagEnvName(control::kExpectedDecodeCapFlag));
  AddEnvOption(c, control::kMaxWaitFlag, agentic_.agentic_admission_max_wait_s,
               "Longest FIFO wait before the aged bypass, seconds (>= 0)");
  AddEnvOption(c, control::kScopeFlag, scope_, "train or all (which requests clients gate)");
  AddEnvOption(c, control::kLeaseTtlFlag, agentic_.lease_ttl_s,
               "Age after which a lease is reclaimed, seconds (> 0)");
  AddEnvOption(c, control::kStalenessFlag, agentic_.staleness_s,
               "Maximum age of the capacity snapshot before admission bypasses `degraded`, seconds "
               "(>= poll interval)");
  AddEnvOption(c, control::kPollIntervalFlag, agentic_.poll_interval_s,
               "Seconds between polls of the engines' /metrics (> 0)");
  AddEnvOption(c, "--metrics-timeout-s", metrics_timeout_s_,
               "How long a poll waits for discovery, then for the engines' /metrics; poll "
               "interval + 2 x this must be below the staleness");
  AddLogLevelOption(c, log_level_);
}

int CoordinatorCommand::Run() {
  const std::string name = kName;
  service::CoordinatorOptions options;
  options.agentic = agentic_;
  options.agentic.agentic_program_admission = true;
  if (decode_cap_option_->count() > 0) {
    options.agentic.agentic_admission_expected_decode_cap = decode_cap_;
  }
  StatusOr<control::AdmissionScope> scope = control::ParseAdmissionScope(scope_);
  if (!scope.ok()) return ReportError(name, scope.status());
  options.agentic.agentic_admission_scope = *scope;
  if (Status s = options.agentic.Validate(); !s.ok()) return ReportError(name, s);
  if (Status s = CheckRange("--port", port_, 0, 65535); !s.ok()) return ReportError(name, s);
  if (Status s = CheckRange("--threads", threads_, 1, 256); !s.ok()) return ReportError(name, s);
  if (!(shutdown_grace_s_ >= 0.0 && shutdown_grace_s_ <= 3600.0)) {
    return ReportError(
        name, InvalidArgumentError(fmt::format("--shutdown-grace-s must be in [0, 3600], got {}",
                                               shutdown_grace_s_)));
  }
  options.http.address = host_;
  options.http.port = static_cast<uint16_t>(port_);
  options.http.threads = threads_;
  options.router_url = router_url_;
  options.engine_urls = engine_urls_;
  options.auth_token = auth_token_;
  options.metrics_timeout_s = metrics_timeout_s_;
  options.log = SpdlogSink;
  ApplyLogLevel(log_level_);

  BlockTerminationSignals();
  StatusOr<std::unique_ptr<service::CoordinatorServer>> server =
      service::CoordinatorServer::Start(options);
  if (!server.ok()) return ReportError(name, server.status());
  const std::string fleet =
      !engine_urls_.empty() ? fmt::format("{} fixed engines", engine_urls_.size())
      : !router_url_.empty()
          ? "engines from router " + router_url_
          : std::string("no --router-url or --engine-urls: degraded, every request bypasses");
  fmt::print("agentkv coordinator: serving {} ({}; headroom {}, max wait {} s, auth {})\n",
             (*server)->base_url(), fleet, options.agentic.agentic_admission_headroom,
             options.agentic.agentic_admission_max_wait_s, auth_token_.empty() ? "off" : "on");
  std::fflush(stdout);
  WaitForTerminationSignal();
  (*server)->Shutdown(std::chrono::milliseconds(static_cast<int64_t>(shutdown_grace_s_ * 1000.0)));
  return kExitOk;
}

}  // namespace agentkv::tools
