// `agentkv gateway`: session KV lifecycle and program-aware admission in front of an SGLang
// fleet (seed 000 without changing the agent framework or the fleet).
//
// A thin shell over service::Gateway: it owns the flags (the seed's --agentic-* names, plus
// addresses, timeouts and secrets; every flag also reads AGENTKV_<FLAG> from the environment
// and the top-level --config file's [gateway] section), picks the admission backend (in-process
// LocalAdmission, or RemoteAdmission with --coordinator-url), routes the gateway's log lines to
// spdlog, and runs until SIGINT/SIGTERM. Owned by main; not copyable or movable.
#ifndef AGENTKV_TOOLS_AGENTKV_GATEWAY_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_GATEWAY_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/service/admission/admission_backend.h"
#include "agentkv/service/gateway/gateway_options.h"
#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/server_flags.h"
#include "tools/agentkv/working_set_flags.h"

namespace agentkv::tools {

class GatewayCommand {
 public:
  static constexpr const char* kName = "gateway";

  explicit GatewayCommand(CLI::App& app);
  GatewayCommand(const GatewayCommand&) = delete;
  GatewayCommand& operator=(const GatewayCommand&) = delete;

  bool selected() const { return command_->parsed(); }
  // Runs until a signal: 0 after a clean shutdown, 2 for a bad flag or a fleet that lacks a
  // prerequisite (with --prerequisite-policy refuse), 1 for an internal failure.
  int Run();

 private:
  // Run's steps: the gateway's options from the flags (InvalidArgument naming a bad flag; sets
  // the log level); the flags' ranges; the admission backend the options ask for (null when
  // admission is off; in-process, or the remote coordinator's client, which leaves the
  // fleet's poll to the coordinator unless the working set needs it).
  StatusOr<service::GatewayOptions> Options();
  Status CheckRanges() const;
  StatusOr<std::shared_ptr<service::AdmissionBackend>> Backend(
      service::GatewayOptions& options) const;

  CLI::App* command_ = nullptr;

  ServerFlags server_{/*port=*/8080, /*shutdown_grace_s=*/30.0};
  service::GatewayOptions options_;
  AgenticFlags agentic_;
  // --agentic-working-set and its --agentic-working-set-* options.
  bool working_set_ = false;
  WorkingSetFlags working_set_flags_;
  int64_t context_length_ = 0;
  int64_t max_retained_sessions_ = 0;
  std::string prerequisite_policy_ = "refuse";
  std::string pause_priority_;
  std::string router_policy_ = "cache_aware";
  std::string subagent_routing_ = "own";
  std::string coordinator_url_;
  std::string coordinator_token_;
  // --tenant-keys-file: read in Run into GatewayOptions::tenant_keys.
  std::string tenant_keys_file_;
  double heartbeat_interval_s_ = 1.0;
  double heartbeat_timeout_s_ = 1.0;
  int64_t breaker_failures_ = 2;
  double breaker_cooldown_s_ = 5.0;
  double upstream_timeout_s_ = 3600.0;
  int64_t upstream_connections_ = 4096;
  // --max-body-bytes and --max-inflight-bytes, signed so that a negative value is named as out
  // of range rather than wrapped.
  int64_t max_body_bytes_ = static_cast<int64_t>(net::HttpServerOptions{}.max_body_bytes);
  int64_t max_inflight_bytes_ =
      static_cast<int64_t>(service::GatewayOptions::kDefaultMaxInflightBytes);
  std::string log_level_ = "info";
  CLI::Option* context_length_option_ = nullptr;
  CLI::Option* max_retained_sessions_option_ = nullptr;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_GATEWAY_COMMAND_H_
