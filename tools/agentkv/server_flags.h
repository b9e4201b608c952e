// The flags of every command that serves HTTP (gateway, coordinator and each `emulate` mode):
// where to listen, with how many I/O threads, how long shutdown lets answers in flight finish,
// and whether each answered request is logged (--access-log: one JSON line per request on
// stderr, net::AccessLogJson). Declared once, with the same names, help and range checks
// everywhere; only the defaults differ by command. Owned by its command; not copyable (CLI11
// holds pointers into it).
#ifndef AGENTKV_TOOLS_AGENTKV_SERVER_FLAGS_H_
#define AGENTKV_TOOLS_AGENTKV_SERVER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "agentkv/base/status.h"
#include "agentkv/net/http_server.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {

class ServerFlags {
 public:
  // The command's defaults: --port `port`, --shutdown-grace-s `shutdown_grace_s`; --host
  // 127.0.0.1 and --threads 2 everywhere.
  ServerFlags(int port, double shutdown_grace_s)
      : port_(port), shutdown_grace_s_(shutdown_grace_s) {}
  ServerFlags(const ServerFlags&) = delete;
  ServerFlags& operator=(const ServerFlags&) = delete;

  // Adds --host, --port, --threads, --shutdown-grace-s and --access-log to `app`. May be
  // called for several apps (the `emulate` modes), which then share the values.
  void Add(CLI::App& app, FlagSource source);

  // OK, or InvalidArgument naming the flag and its value: --port in [0, 65535], --threads in
  // [1, 256], --shutdown-grace-s in [0, 3600].
  [[nodiscard]] Status Check() const;

  // Sets the address, port and threads of `http`, and with --access-log its access log hook
  // (AccessLogToStderr()); call after Check().
  void ApplyTo(net::HttpServerOptions& http) const;
  // --access-log.
  bool access_log() const { return access_log_; }
  // --port; call after Check().
  int port() const { return port_; }
  // --shutdown-grace-s as a duration (whole milliseconds); call after Check().
  std::chrono::milliseconds shutdown_grace() const;

 private:
  std::string host_ = "127.0.0.1";
  int port_;
  int threads_ = 2;
  double shutdown_grace_s_;
  bool access_log_ = false;
};

// An access log hook that writes net::AccessLogJson(entry) and a newline to stderr, one whole
// line at a time from any thread, whatever --log-level says (the flag alone turns it on).
net::AccessLogHook AccessLogToStderr();

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_SERVER_FLAGS_H_
