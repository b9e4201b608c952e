// The flags of every command that serves HTTP (gateway, coordinator and each `emulate` mode):
// where to listen, with how many I/O threads, and how long shutdown lets answers in flight
// finish. Declared once, with the same names, help and range checks everywhere; only the
// defaults differ by command. Owned by its command; not copyable (CLI11 holds pointers into
// it).
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

  // Adds --host, --port, --threads and --shutdown-grace-s to `app`. May be called for several
  // apps (the `emulate` modes), which then share the values.
  void Add(CLI::App& app, FlagSource source);

  // OK, or InvalidArgument naming the flag and its value: --port in [0, 65535], --threads in
  // [1, 256], --shutdown-grace-s in [0, 3600].
  [[nodiscard]] Status Check() const;

  // Sets the address, port and threads of `http`; call after Check().
  void ApplyTo(net::HttpServerOptions& http) const;
  // --port; call after Check().
  int port() const { return port_; }
  // --shutdown-grace-s as a duration (whole milliseconds); call after Check().
  std::chrono::milliseconds shutdown_grace() const;

 private:
  std::string host_ = "127.0.0.1";
  int port_;
  int threads_ = 2;
  double shutdown_grace_s_;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_SERVER_FLAGS_H_
