#include "tools/agentkv/coordinator_command.h"

#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "agentkv/service/coordinator_server.h"
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

// The same signal handling as `agentkv emulate`: block SIGINT and SIGTERM before any thread
// starts (threads inherit the mask), then wait for one with sigwait.
void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int signal = 0;
  sigwait(&set, &signal);
}

// "--agentic-admission-headroom" -> "AGENTKV_AGENTIC_ADMISSION_HEADROOM".
std::string EnvName(std::string_view flag) {
  std::string name = "AGENTKV_";
  for (char c : flag.substr(2)) {
    name += c == '-' ? '_' : static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  return name;
}

template <typename T>
CLI::Option* AddFlag(CLI::App& app, std::string_view flag, T& value, const std::string& help) {
  return app.add_option(std::string(flag), value, help)
      ->envname(EnvName(flag))
      ->capture_default_str();
}

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
  AddFlag(c, "--host", host_, "Address to bind (loopback by default)");
  AddFlag(c, "--port", port_, "Port to listen on (0 = any free port)");
  AddFlag(c, "--threads", threads_, "HTTP I/O threads");
  AddFlag(c, "--shutdown-grace-s", shutdown_grace_s_,
          "Seconds answers in flight get to be written at shutdown");
  CLI::Option* router =
      AddFlag(c, "--router-url", router_url_,
              "sgl-router base URL: engines are discovered with GET /workers (fallback "
              "/list_workers)");
  CLI::Option* engines = c.add_option("--engine-urls", engine_urls_,
                                      "Fixed engine base URLs instead of router discovery")
                             ->envname(EnvName("--engine-urls"))
                             ->delimiter(',');
  router->excludes(engines);
  AddFlag(c, "--auth-token", auth_token_,
          "Bearer token required on /admission/* and /agentic_kv (empty: none)");
  AddFlag(c, control::kHeadroomFlag, agentic_.agentic_admission_headroom,
          "Share of the healthy engines' summed max_total_num_tokens admission may commit, "
          "in (0, 1]");
  AddFlag(c, control::kPressureThresholdFlag, agentic_.agentic_admission_pressure_threshold,
          "Worst-engine token_usage at or above which new requests wait, in (0, 1]");
  decode_cap_option_ = c.add_option(std::string(control::kExpectedDecodeCapFlag), decode_cap_,
                                    "Most decode tokens one reservation counts (> 0); "
                                    "informational here: clients compute reservations")
                           ->envname(EnvName(control::kExpectedDecodeCapFlag));
  AddFlag(c, control::kMaxWaitFlag, agentic_.agentic_admission_max_wait_s,
          "Longest FIFO wait before the aged bypass, seconds (>= 0)");
  AddFlag(c, control::kScopeFlag, scope_, "train or all (which requests clients gate)");
  AddFlag(c, control::kLeaseTtlFlag, agentic_.lease_ttl_s,
          "Age after which a lease is reclaimed, seconds (> 0)");
  AddFlag(c, control::kStalenessFlag, agentic_.staleness_s,
          "Maximum age of the capacity snapshot before admission bypasses `degraded`, seconds "
          "(>= poll interval)");
  AddFlag(c, control::kPollIntervalFlag, agentic_.poll_interval_s,
          "Seconds between polls of the engines' /metrics (> 0)");
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
  WaitForSignal();
  (*server)->Shutdown(std::chrono::milliseconds(static_cast<int64_t>(shutdown_grace_s_ * 1000.0)));
  return kExitOk;
}

}  // namespace agentkv::tools
