#include "tools/agentkv/coordinator_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>

#include "agentkv/service/coordinator/coordinator_server.h"
#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/server_flags.h"

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
  POST /admission/heartbeat {"instance"}    (an instance silent for --instance-timeout-s
       loses its leases and waiters; acquires may name theirs as "instance")
  GET  /agentic_kv[?reset=1]  GET /metrics  GET /health
With --auth-token, /admission/* and /agentic_kv need `Authorization: Bearer <token>`.

Every flag can be set in the environment as AGENTKV_<FLAG> in upper snake case, e.g.
AGENTKV_ROUTER_URL, AGENTKV_AGENTIC_ADMISSION_HEADROOM, AGENTKV_AUTH_TOKEN.

Example:
  agentkv coordinator --port 7000 --router-url http://127.0.0.1:30000 \
      --agentic-admission-headroom 0.9 --agentic-admission-max-wait-s 30

Runs until SIGINT or SIGTERM; waiters are then answered bypass `degraded`.)";

}  // namespace

CoordinatorCommand::CoordinatorCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  CLI::App& c = *command_;
  server_.Add(c, FlagSource::kCommandLineAndEnvironment);
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
  agentic_.Add(c, AgenticFlags::Set::kAdmission, FlagSource::kCommandLineAndEnvironment);
  AddEnvOption(c, "--metrics-timeout-s", metrics_timeout_s_,
               "How long a poll waits for discovery, then for the engines' /metrics; poll "
               "interval + 2 x this must be below the staleness");
  AddEnvOption(c, "--instance-timeout-s", instance_timeout_s_,
               "A caller instance (gateway) silent this long (no heartbeat, no acquire) has its "
               "leases released and its waiters cancelled; in (0, 86400]");
  working_set_.Add(c, "Working set (/admission/program/*)");
  AddLogLevelOption(c, log_level_);
}

int CoordinatorCommand::Run() {
  const std::string name = kName;
  service::CoordinatorOptions options;
  StatusOr<control::AgenticOptions> agentic = agentic_.Options();
  if (!agentic.ok()) return ReportError(name, agentic.status());
  options.agentic = *std::move(agentic);
  options.agentic.agentic_program_admission = true;
  StatusOr<control::WorkingSetOptions> working_set = working_set_.Options();
  if (!working_set.ok()) return ReportError(name, working_set.status());
  options.working_set = *std::move(working_set);
  Status s = options.agentic.Validate();
  if (s.ok()) s = server_.Check();
  if (!s.ok()) return ReportError(name, s);
  server_.ApplyTo(options.http);
  options.router_url = router_url_;
  options.engine_urls = engine_urls_;
  options.auth_token = auth_token_;
  options.metrics_timeout_s = metrics_timeout_s_;
  options.instance_timeout_s = instance_timeout_s_;
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
  (*server)->Shutdown(server_.shutdown_grace());
  return kExitOk;
}

}  // namespace agentkv::tools
