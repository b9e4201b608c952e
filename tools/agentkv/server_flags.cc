#include "tools/agentkv/server_flags.h"

#include <cstdint>

namespace agentkv::tools {

void ServerFlags::Add(CLI::App& app, FlagSource source) {
  AddFlagOption(app, "--host", host_, "Address to bind (loopback by default)", source);
  AddFlagOption(app, "--port", port_, "Port to listen on (0 = any free port)", source);
  AddFlagOption(app, "--threads", threads_, "HTTP I/O threads (per server)", source);
  AddFlagOption(app, "--shutdown-grace-s", shutdown_grace_s_,
                "Seconds answers in flight get to finish at shutdown", source);
}

Status ServerFlags::Check() const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--port", port_, 0, 65535));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--threads", threads_, 1, 256));
  return CheckFlagRange("--shutdown-grace-s", shutdown_grace_s_, 0.0, 3600.0);
}

void ServerFlags::ApplyTo(net::HttpServerOptions& http) const {
  http.address = host_;
  http.port = static_cast<uint16_t>(port_);
  http.threads = threads_;
}

std::chrono::milliseconds ServerFlags::shutdown_grace() const {
  return std::chrono::milliseconds(static_cast<int64_t>(shutdown_grace_s_ * 1000.0));
}

}  // namespace agentkv::tools
