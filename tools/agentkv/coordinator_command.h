// `agentkv coordinator`: program-aware admission for a fleet, as an HTTP service
// (service::CoordinatorServer; docs/COORDINATOR.md).
//
// Gateways (RemoteAdmission) or an RL framework acquire a token lease before each backend
// attempt and release it after; the coordinator discovers the engines through the sgl-router
// (or a fixed --engine-urls list), polls their /metrics and keeps the one global FIFO and token
// ledger. Every flag can also come from the environment as AGENTKV_<FLAG> (e.g.
// AGENTKV_AGENTIC_ADMISSION_HEADROOM, AGENTKV_AUTH_TOKEN); the command line wins. All values
// are validated at startup: a bad one is one error line and exit 2. Runs until SIGINT or
// SIGTERM. Owned by main; not copyable.
#ifndef AGENTKV_TOOLS_AGENTKV_COORDINATOR_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_COORDINATOR_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/server_flags.h"
#include "tools/agentkv/working_set_flags.h"

namespace agentkv::tools {

class CoordinatorCommand {
 public:
  static constexpr const char* kName = "coordinator";

  explicit CoordinatorCommand(CLI::App& app);
  CoordinatorCommand(const CoordinatorCommand&) = delete;
  CoordinatorCommand& operator=(const CoordinatorCommand&) = delete;

  bool selected() const { return command_->parsed(); }
  // Serves until a signal; 0 after a clean shutdown, 2 for a bad flag or a port that cannot be
  // bound, 1 for an internal failure.
  int Run();

 private:
  CLI::App* command_ = nullptr;

  ServerFlags server_{/*port=*/7000, /*shutdown_grace_s=*/5.0};
  double metrics_timeout_s_ = 1.5;
  double instance_timeout_s_ = 10.0;
  std::string router_url_;
  std::vector<std::string> engine_urls_;
  std::string auth_token_;
  AgenticFlags agentic_;
  // The working set behind /admission/program/* (--agentic-working-set-*).
  WorkingSetFlags working_set_;
  std::string log_level_ = "info";
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_COORDINATOR_COMMAND_H_
