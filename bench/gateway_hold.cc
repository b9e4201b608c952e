// Gateway hold bench (issue 7, item 3): the gateway's threads and memory while it holds
// --connections concurrent slow requests, each waiting on a slow upstream.
//
// Three processes, so that each one's figures are its own and each stays within its own
// RLIMIT_NOFILE (the children are this program re-executed with a hidden --role, so that none
// inherits the client's heap from an earlier run):
//   * a slow engine stub (child): an SGLang-like /generate that holds every request for
//     --hold-seconds (a timer on its server's executor, no thread) and then answers a small
//     valid generate response; /server_info (session radix cache, priority eviction, metrics
//     on) and /metrics (--engine-tokens of KV, usage 0) satisfy the gateway's startup
//     prerequisite check and its fleet poller; /abort_request and /close_session answer 200;
//   * the Gateway (child), configured as in production: engine_urls -> the stub,
//     prerequisites checked, session lifecycle and program-aware admission on with an
//     in-process LocalAdmission (2 s fleet poll; the stub's capacity is far above what
//     --connections requests reserve, so none waits), --gateway-threads server I/O threads
//     (default 2), and the upstream client's max_connections_per_host raised to
//     --upstream-connections (default: max(4096, --connections)) so that every request can
//     have its own upstream connection, but capped to what the gateway's RLIMIT_NOFILE leaves
//     after one descriptor per downstream connection and 64 spare: the gateway needs two
//     descriptors per held request, and where the hard limit is 20,000 (and cannot be raised)
//     10,000 requests need 20,000 + ~17. Requests beyond the cap wait in the upstream pool's
//     queue (queue_timeout raised to cover the holds ahead of them) instead of failing with
//     EMFILE on connect, which the gateway answers 502;
//   * the client (this process): an HttpClient (--client-threads) sends --connections
//     concurrent non-streamed POST /generate (each with its own session_id, --input-tokens
//     input_ids, max_new_tokens 1), each on its own connection, through the gateway.
// "All held" is when the stub holds one request per upstream connection (all of them when
// not capped) and the gateway's in-flight gauge shows every request; then the gateway's
// Threads, VmRSS, VmHWM and open descriptors are read from /proc/<pid> (and compared with the
// idle gateway before the load), its admission series from GET /agentic_kv, and its figures
// are sampled every 100 ms until every request completed. Each of --runs runs starts a fresh
// stub and gateway; a summary table gives the range over the runs. Children are stopped with
// SIGTERM and reaped (waitpid) on every path; if this process dies they get SIGTERM
// (PR_SET_PDEATHSIG). RLIMIT_NOFILE is raised in each process as far as it needs and the hard
// limit allows, and reported. --lifecycle=false and --admission=false show what each costs.
//
// Client, gateway and stub share this machine's cores: times are relative.
//
//   cmake -S . -B build/gwhold -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGENTKV_WERROR=ON
//   cmake --build build/gwhold --target gateway_hold
//   build/gwhold/bench/gateway_hold --connections 10000 --hold-seconds 10 --runs 3
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_options.h"
#include "bench/gateway_hold_process.h"

namespace agentkv::service {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace http = net::http;
using bench::ChildProcess;
using bench::MiB;
using bench::ProcStatus;
using bench::RaiseFileLimit;
using bench::ReadProcStatus;
using bench::SharedMapping;
using bench::SharedState;

struct Flags {
  int connections = 10'000;
  double hold_seconds = 10.0;
  int runs = 3;
  int input_tokens = 16;
  int client_threads = 2;
  int gateway_threads = 2;
  // 0: max(GatewayOptions' default, connections).
  int upstream_connections = 0;
  int64_t engine_tokens = 10'000'000;
  // The production configuration has both on; turning one off shows what it costs.
  bool lifecycle = true;
  bool admission = true;
  // Internal, set by the client for its children: "client", "stub" or "gateway", the
  // descriptors of the shared state and of the port pipe, and the stub's URL.
  std::string role = "client";
  int shared_fd = -1;
  int port_fd = -1;
  std::string stub_url;
};

// ---------------------------------------------------------------------------------------------
// Child processes

// ---------------------------------------------------------------------------------------------
// The slow engine stub

std::string GenerateResponse(const std::string& rid, int64_t prompt_tokens) {
  return R"({"text":"x","output_ids":[7],"meta_info":{"id":")" + rid +
         R"(","finish_reason":{"type":"length","length":1},"prompt_tokens":)" +
         std::to_string(prompt_tokens) + R"(,"completion_tokens":1,"cached_tokens":0}})";
}

// Holds every /generate for `hold`, then answers; the rest answers at once.
std::unique_ptr<net::HttpServer> StartStub(milliseconds hold, int64_t capacity,
                                           SharedState* shared) {
  auto server_slot = std::make_shared<net::HttpServer*>(nullptr);
  net::Router router;
  router.Add(
      http::verb::post, "/generate",
      [hold, shared, server_slot](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
        shared->stub_received.fetch_add(1);
        std::string rid = "stub";
        int64_t prompt_tokens = 0;
        boost::system::error_code error;
        const boost::json::value body = boost::json::parse(q.body(), error);
        if (!error && body.is_object()) {
          const boost::json::object& object = body.as_object();
          if (const auto* r = object.if_contains("rid"); r != nullptr && r->is_string()) {
            rid = std::string(r->as_string());
          }
          if (const auto* ids = object.if_contains("input_ids");
              ids != nullptr && ids->is_array()) {
            prompt_tokens = static_cast<int64_t>(ids->as_array().size());
          }
        }
        shared->stub_held.fetch_add(1);
        auto timer = std::make_shared<boost::asio::steady_timer>((*server_slot)->executor(), hold);
        timer->async_wait([timer, w, shared, rid = std::move(rid), prompt_tokens,
                           q = std::move(q)](const boost::system::error_code&) {
          shared->stub_held.fetch_sub(1);
          shared->stub_answered.fetch_add(1);
          w->Reply(net::MakeResponse(q, http::status::ok, GenerateResponse(rid, prompt_tokens)));
        });
      });
  router.Add(http::verb::get, "/metrics",
             [capacity](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               w->Reply(net::MakeResponse(q, http::status::ok,
                                          "sglang:max_total_num_tokens{tp_rank=\"0\"} " +
                                              std::to_string(capacity) +
                                              "\nsglang:token_usage{tp_rank=\"0\"} 0\n"
                                              "sglang:num_used_tokens{tp_rank=\"0\"} 0\n"
                                              "sglang:num_running_reqs{tp_rank=\"0\"} 0\n"
                                              "sglang:num_queue_reqs{tp_rank=\"0\"} 0\n",
                                          "text/plain"));
             });
  router.Add(
      http::verb::get, "/server_info",
      [capacity](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
        protocol::ServerInfo info;
        info.enable_metrics = true;
        info.enable_session_radix_cache = true;
        info.radix_eviction_policy = "priority";
        info.max_total_num_tokens = capacity;
        info.version = "gateway-hold-stub";
        w->Reply(net::MakeResponse(q, http::status::ok, protocol::SerializeServerInfo(info)));
      });
  router.Add(http::verb::get, "/health",
             [](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               w->Reply(net::MakeResponse(q, http::status::ok, "", "text/plain"));
             });
  for (const char* path : {"/abort_request", "/close_session"}) {
    router.Add(http::verb::post, path, [](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
      w->Reply(net::MakeResponse(q, http::status::ok, "", "text/plain"));
    });
  }
  StatusOr<std::unique_ptr<net::HttpServer>> server =
      net::HttpServer::Start(net::HttpServerOptions{}, router.AsHandler());
  if (!server.ok()) {
    std::fprintf(stderr, "stub: %s\n", server.status().ToString().c_str());
    return nullptr;
  }
  *server_slot = server->get();
  return *std::move(server);
}

// ---------------------------------------------------------------------------------------------
// The gateway process

// What the gateway child owns; lives in the child only.
struct GatewayProcess {
  std::shared_ptr<AdmissionBackend> admission;
  std::unique_ptr<Gateway> gateway;
};

// The upstream connection limit asked for: --upstream-connections, or enough for one
// connection per request.
size_t UpstreamConnections(const Flags& flags) {
  if (flags.upstream_connections > 0) return static_cast<size_t>(flags.upstream_connections);
  return std::max(GatewayOptions::DefaultUpstreamClientOptions().max_connections_per_host,
                  static_cast<size_t>(flags.connections));
}

// Descriptors the gateway uses besides one per downstream and one per upstream connection:
// stdio, the listener, an epoll and an eventfd or two per io_context (server, data client,
// control client), pooled control connections. About 18 were measured; this leaves room.
constexpr int64_t kReservedDescriptors = 64;

uint16_t StartGatewayProcess(const Flags& flags, const std::string& stub_url, SharedState* shared,
                             GatewayProcess* process) {
  // Each held request needs two descriptors here: the client's connection and the upstream one.
  const rlim_t nofile = RaiseFileLimit(2 * static_cast<rlim_t>(flags.connections) + 1024);
  shared->gateway_nofile = nofile;
  // Where RLIMIT_NOFILE cannot hold both, the upstream pool is capped below it: the requests
  // beyond the cap wait in the pool's queue (no descriptor) for a connection to come free,
  // instead of failing with EMFILE on connect (502 "Too many open files").
  const int64_t descriptor_budget =
      static_cast<int64_t>(nofile) - flags.connections - kReservedDescriptors;
  const auto upstream = static_cast<size_t>(std::max<int64_t>(
      1, std::min(static_cast<int64_t>(UpstreamConnections(flags)), descriptor_budget)));
  const int64_t hold_ms = static_cast<int64_t>(flags.hold_seconds * 1000);
  const int64_t rounds =
      (flags.connections + static_cast<int64_t>(upstream) - 1) / static_cast<int64_t>(upstream);
  GatewayOptions options;
  options.engine_urls = {stub_url};
  options.check_prerequisites = true;
  options.agentic.agentic_session_lifecycle = flags.lifecycle;
  options.agentic.agentic_program_admission = flags.admission;
  options.agentic.poll_interval_s = 2.0;
  options.http.threads = flags.gateway_threads;
  options.upstream.max_connections_per_host = upstream;
  // A request queued for a connection waits up to (rounds - 1) holds; 30 s of margin.
  options.upstream.queue_timeout =
      std::max(options.upstream.queue_timeout, milliseconds(rounds * hold_ms + 30'000));
  shared->upstream_connections = static_cast<int64_t>(upstream);
  shared->upstream_queue_timeout_ms = options.upstream.queue_timeout.count();
  // The first few warnings go to stderr; the rest are only counted (10,000 identical upstream
  // failures would drown the report).
  options.log = [shared](LogLevel level, std::string_view line) {
    if (level < LogLevel::kWarn) return;
    if (shared->gateway_warnings.fetch_add(1) < 5) StderrLogSink(level, line);
  };
  if (flags.admission) {
    LocalAdmissionOptions admission_options;
    admission_options.agentic = options.agentic;
    StatusOr<std::unique_ptr<LocalAdmission>> admission = LocalAdmission::Create(admission_options);
    if (!admission.ok()) {
      std::fprintf(stderr, "admission: %s\n", admission.status().ToString().c_str());
      return 0;
    }
    process->admission = *std::move(admission);
  }
  StatusOr<std::unique_ptr<Gateway>> gateway = Gateway::Start(options, process->admission);
  if (!gateway.ok()) {
    std::fprintf(stderr, "gateway: %s\n", gateway.status().ToString().c_str());
    return 0;
  }
  process->gateway = *std::move(gateway);
  if (process->gateway->lifecycle_enabled() != flags.lifecycle ||
      process->gateway->admission_enabled() != flags.admission) {
    std::fprintf(stderr, "gateway started without lifecycle or admission\n");
    return 0;
  }
  return process->gateway->port();
}

// ---------------------------------------------------------------------------------------------
// The client

std::map<std::string, double> FetchAgenticKv(net::HttpClient& client, const std::string& url) {
  std::map<std::string, double> series;
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, url, "/agentic_kv");
  if (!r.ok() || r->status != 200) return series;
  boost::system::error_code error;
  const boost::json::value body = boost::json::parse(r->body, error);
  if (error || !body.is_object()) return series;
  for (const auto& [key, value] : body.as_object()) {
    if (value.is_number()) series[std::string(key)] = value.to_number<double>();
  }
  return series;
}

// The value of the first sample of Prometheus series `name` (no labels) in /metrics, or -1.
double FetchGatewayGauge(net::HttpClient& client, const std::string& url, const std::string& name) {
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, url, "/metrics");
  if (!r.ok() || r->status != 200) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r->body.substr(at + name.size() + 2));
}

struct RunFigures {
  ProcStatus idle;
  ProcStatus holding;  // When all were first held.
  int max_threads = 0;
  int64_t max_rss_kb = 0;
  int64_t hwm_kb = 0;  // VmHWM after the last completion.
  int64_t after_rss_kb = 0;
  double all_held_s = -1;
  int64_t peak_held = 0;
  int ok = 0;
  double total_s = 0;
  std::map<std::string, int> errors;
  bool passed() const { return all_held_s >= 0 && ok > 0 && errors.empty(); }
};

// The answers of one run's requests, written by the client's callbacks.
struct Outcomes {
  std::atomic<int> ok{0};
  std::atomic<int> done{0};
  std::mutex error_mu;
  std::map<std::string, int> errors;  // Guarded by error_mu.
};

// The descriptor limits and the gateway's upstream pool in force (the first run's header).
void PrintLimits(const Flags& flags, const SharedState& shared) {
  const int64_t upstream = shared.upstream_connections.load();
  std::printf("  RLIMIT_NOFILE soft limits: client %llu, gateway %llu, stub %llu\n",
              static_cast<unsigned long long>(RaiseFileLimit(0)),
              static_cast<unsigned long long>(shared.gateway_nofile.load()),
              static_cast<unsigned long long>(shared.stub_nofile.load()));
  std::printf(
      "  gateway upstream client: max_connections_per_host %lld (asked %zu%s), queue_timeout "
      "%.0f s\n",
      static_cast<long long>(upstream), UpstreamConnections(flags),
      static_cast<size_t>(upstream) < UpstreamConnections(flags)
          ? "; capped so that downstream + upstream connections fit the gateway's "
            "RLIMIT_NOFILE: the rest wait in its connection queue"
          : "",
      static_cast<double>(shared.upstream_queue_timeout_ms.load()) / 1000.0);
}

// Sends --connections concurrent /generate of one session each through the gateway at `url`.
void SendRequests(const Flags& flags, int run, const std::string& url, net::HttpClient& client,
                  Outcomes& outcomes) {
  std::string ids;
  for (int i = 0; i < flags.input_tokens; ++i) {
    if (i > 0) ids += ',';
    ids += std::to_string(1000 + i);
  }
  const std::string prefix =
      R"({"input_ids": [)" + ids +
      R"(], "sampling_params": {"max_new_tokens": 1}, "session_id": "hold-)" + std::to_string(run) +
      "-";
  for (int i = 0; i < flags.connections; ++i) {
    client.AsyncRequest(http::verb::post, url, "/generate", {{"Content-Type", "application/json"}},
                        prefix + std::to_string(i) + "\"}", [&](StatusOr<net::ClientResponse> r) {
                          if (r.ok() && r->status == 200) {
                            outcomes.ok.fetch_add(1);
                          } else {
                            std::string error = r.ok() ? "status " + std::to_string(r->status) +
                                                             ": " + r->body.substr(0, 160)
                                                       : r.status().ToString().substr(0, 200);
                            std::lock_guard lock(outcomes.error_mu);
                            ++outcomes.errors[error];
                          }
                          outcomes.done.fetch_add(1);
                        });
  }
}

// What the gateway, the stub and the client hold while every request is held.
void PrintHolding(const Flags& flags, const RunFigures& figures, net::HttpClient& stats_client,
                  const std::string& url, const ChildProcess& stub, const SharedState& shared) {
  const int connections = flags.connections;
  const auto kv = [](const std::map<std::string, double>& m, const std::string& key) {
    const auto it = m.find("agentic_kv/" + key);
    return it == m.end() ? 0.0 : it->second;  // Counters are left out while zero.
  };
  const std::map<std::string, double> hold_kv = FetchAgenticKv(stats_client, url);
  const ProcStatus stub_status = ReadProcStatus(stub.pid());
  const ProcStatus client_status = ReadProcStatus(::getpid());
  std::printf(
      "  all %d held after %.2f s (%lld at the stub); gateway: %d threads, %d fds, RSS %.1f MiB "
      "(%+.1f KiB per held request), in flight %.0f, sessions active %.0f\n",
      connections, figures.all_held_s, static_cast<long long>(shared.stub_held.load()),
      figures.holding.threads, figures.holding.fds, MiB(figures.holding.rss_kb),
      static_cast<double>(figures.holding.rss_kb - figures.idle.rss_kb) / connections,
      FetchGatewayGauge(stats_client, url, "agentkv_gateway_in_flight_requests"),
      FetchGatewayGauge(stats_client, url, "agentkv_gateway_sessions_active"));
  std::printf(
      "  admission while holding: admit %.0f, wait %.0f, waiting %.0f, bypass %.0f (degraded "
      "%.0f), leases %.0f, reserved %.0f of %.0f tokens\n",
      kv(hold_kv, "admission/admit"), kv(hold_kv, "admission/wait"),
      kv(hold_kv, "admission/waiting"), kv(hold_kv, "admission/bypass"),
      kv(hold_kv, "admission/bypass_degraded"), kv(hold_kv, "budget/lease_count"),
      kv(hold_kv, "budget/reserved"), kv(hold_kv, "budget/ceiling"));
  std::printf("  meanwhile: stub %d threads, RSS %.1f MiB; client %d threads, RSS %.1f MiB\n",
              stub_status.threads, MiB(stub_status.rss_kb), client_status.threads,
              MiB(client_status.rss_kb));
}

// Starts the slow stub, then the gateway in front of it; either is null when it failed.
std::pair<std::unique_ptr<ChildProcess>, std::unique_ptr<ChildProcess>> StartChildren(
    const Flags& flags, const SharedMapping& mapping) {
  const int connections = flags.connections;
  const std::string shared_fd = "--shared-fd=" + std::to_string(mapping.fd());
  const std::string connections_flag = "--connections=" + std::to_string(connections);
  char hold_flag[64];
  std::snprintf(hold_flag, sizeof(hold_flag), "--hold-seconds=%.17g", flags.hold_seconds);
  std::unique_ptr<ChildProcess> stub =
      ChildProcess::Start("stub", {"--role=stub", shared_fd, connections_flag, hold_flag,
                                   "--engine-tokens=" + std::to_string(flags.engine_tokens)});
  if (!stub) return {nullptr, nullptr};
  std::unique_ptr<ChildProcess> gateway = ChildProcess::Start(
      "gateway", {"--role=gateway", shared_fd, connections_flag, "--stub-url=" + stub->base_url(),
                  "--gateway-threads=" + std::to_string(flags.gateway_threads),
                  "--upstream-connections=" + std::to_string(flags.upstream_connections),
                  flags.lifecycle ? "--lifecycle=true" : "--lifecycle=false",
                  flags.admission ? "--admission=true" : "--admission=false", hold_flag});
  return {std::move(stub), std::move(gateway)};
}

// The client: one connection per request, timeouts past the hold.
net::HttpClientOptions ClientOptions(const Flags& flags, milliseconds hold) {
  const int connections = flags.connections;
  net::HttpClientOptions options;
  options.threads = flags.client_threads;
  options.max_connections_per_host = static_cast<size_t>(connections);
  options.max_idle_per_host = static_cast<size_t>(connections);
  options.connect_timeout = milliseconds(60'000);
  options.queue_timeout = milliseconds(60'000);
  options.header_timeout = hold + milliseconds(120'000);
  return options;
}

// Takes `s` into the run's maxima.
void Sample(RunFigures& figures, const ProcStatus& s) {
  figures.max_threads = std::max(figures.max_threads, s.threads);
  figures.max_rss_kb = std::max(figures.max_rss_kb, s.rss_kb);
}

// Samples the gateway every 50 ms until all `expect_held` requests are held (then records the
// figures holding), the first answer arrives, or the deadline passes.
void WaitUntilAllHeld(const Flags& flags, const Outcomes& outcomes, Clock::time_point start,
                      int64_t expect_held, const SharedState& shared, net::HttpClient& stats_client,
                      const std::string& url, pid_t gateway, RunFigures& figures) {
  // Until the stub holds one request per upstream connection and the gateway has every one
  // in flight (or the first answer arrives: the hold is over), every 50 ms.
  while (outcomes.ok.load() == 0 && outcomes.done.load() < flags.connections &&
         Clock::now() - start <
             milliseconds(static_cast<int64_t>(flags.hold_seconds * 1000)) + milliseconds(60'000)) {
    const int64_t held = shared.stub_held.load();
    figures.peak_held = std::max(figures.peak_held, held);
    if (held == expect_held &&
        (expect_held == flags.connections ||
         FetchGatewayGauge(stats_client, url, "agentkv_gateway_in_flight_requests") ==
             flags.connections)) {
      figures.all_held_s = std::chrono::duration<double>(Clock::now() - start).count();
      figures.holding = ReadProcStatus(gateway);
      Sample(figures, figures.holding);
      break;
    }
    Sample(figures, ReadProcStatus(gateway));
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// The run's outcome: the answers, the gateway's maxima and its warnings, and each error.
void PrintCompletion(const Flags& flags, const RunFigures& figures, const SharedState& shared) {
  const int connections = flags.connections;
  std::printf(
      "  completed %d/%d with status 200 in %.2f s; gateway threads max %d, RSS max %.1f MiB, "
      "VmHWM %.1f MiB, RSS after %.1f MiB; gateway warnings %lld\n",
      figures.ok, connections, figures.total_s, figures.max_threads, MiB(figures.max_rss_kb),
      MiB(figures.hwm_kb), MiB(figures.after_rss_kb),
      static_cast<long long>(shared.gateway_warnings.load()));
  for (const auto& [error, count] : figures.errors) {
    std::printf("  error x%d: %s\n", count, error.c_str());
  }
  std::fflush(stdout);
}

RunFigures RunOnce(const Flags& flags, int run, SharedMapping& mapping) {
  RunFigures figures;
  const int connections = flags.connections;
  const milliseconds hold(static_cast<int64_t>(flags.hold_seconds * 1000));
  mapping.Reset();
  SharedState* shared = mapping.state();

  // Both children start while this process has only its main thread.
  auto [stub, gateway] = StartChildren(flags, mapping);
  if (!stub || !gateway) return figures;
  const std::string url = gateway->base_url();
  // The requests the stub can hold at once: one per upstream connection.
  const int64_t upstream = shared->upstream_connections.load();
  const int64_t expect_held = std::min<int64_t>(connections, upstream);
  if (run == 0) PrintLimits(flags, *shared);

  net::HttpClientOptions stats_options;
  stats_options.header_timeout = milliseconds(10'000);
  net::HttpClient stats_client(stats_options);
  std::this_thread::sleep_for(milliseconds(300));
  figures.idle = ReadProcStatus(gateway->pid());
  const std::map<std::string, double> idle_kv = FetchAgenticKv(stats_client, url);
  const auto kv = [](const std::map<std::string, double>& m, const std::string& key) {
    const auto it = m.find("agentic_kv/" + key);
    return it == m.end() ? 0.0 : it->second;  // Counters are left out while zero.
  };
  std::printf(
      "run %d: gateway pid %d idle: %d threads, %d fds, RSS %.1f MiB; admission ceiling %.0f "
      "tokens, degraded %.0f\n",
      run + 1, static_cast<int>(gateway->pid()), figures.idle.threads, figures.idle.fds,
      MiB(figures.idle.rss_kb), kv(idle_kv, "budget/ceiling"), kv(idle_kv, "budget/degraded"));

  net::HttpClient client(ClientOptions(flags, hold));

  Outcomes outcomes;
  const Clock::time_point start = Clock::now();
  SendRequests(flags, run, url, client, outcomes);
  std::atomic<int>& ok = outcomes.ok;
  std::atomic<int>& done = outcomes.done;

  const auto elapsed = [&start] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  WaitUntilAllHeld(flags, outcomes, start, expect_held, *shared, stats_client, url, gateway->pid(),
                   figures);
  if (figures.all_held_s >= 0) {
    PrintHolding(flags, figures, stats_client, url, *stub, *shared);
  } else {
    std::printf("  NOT all held at once: peak %lld held at the stub (received %lld)\n",
                static_cast<long long>(figures.peak_held),
                static_cast<long long>(shared->stub_received.load()));
  }
  std::fflush(stdout);

  // Sample every 100 ms until every request completed.
  while (done.load() < connections && Clock::now() - start < hold + milliseconds(180'000)) {
    Sample(figures, ReadProcStatus(gateway->pid()));
    std::this_thread::sleep_for(milliseconds(100));
  }
  figures.total_s = elapsed();
  figures.ok = ok.load();
  const ProcStatus after = ReadProcStatus(gateway->pid());
  figures.after_rss_kb = after.rss_kb;
  figures.hwm_kb = after.hwm_kb;
  {
    std::lock_guard lock(outcomes.error_mu);
    figures.errors = outcomes.errors;
    if (done.load() < connections) {
      figures.errors["unfinished after the deadline"] = connections - done.load();
    }
  }
  PrintCompletion(flags, figures, *shared);
  // The clients (and their threads) go before the children stop and before the next fork.
  return figures;
}

template <typename T, typename F>
std::string Range(const std::vector<RunFigures>& runs, F value, const char* format) {
  T low = value(runs.front());
  T high = low;
  for (const RunFigures& r : runs) {
    low = std::min(low, value(r));
    high = std::max(high, value(r));
  }
  char a[48];
  char b[48];
  std::snprintf(a, sizeof(a), format, low);
  std::snprintf(b, sizeof(b), format, high);
  return std::string(a) == b ? std::string(a) : std::string(a) + "-" + b;
}

// The children's mains.
int RunStub(const Flags& flags) {
  std::unique_ptr<SharedMapping> mapping = SharedMapping::Map(flags.shared_fd);
  if (!mapping) return 1;
  std::unique_ptr<net::HttpServer> server;
  return bench::ServeUntilSignalled(
      flags.port_fd,
      [&] {
        mapping->state()->stub_nofile =
            RaiseFileLimit(static_cast<rlim_t>(flags.connections) + 1024);
        server = StartStub(milliseconds(static_cast<int64_t>(flags.hold_seconds * 1000)),
                           flags.engine_tokens, mapping->state());
        return server ? server->port() : uint16_t{0};
      },
      [&] {
        if (server) server->Shutdown(milliseconds(1'000));
      });
}

int RunGateway(const Flags& flags) {
  std::unique_ptr<SharedMapping> mapping = SharedMapping::Map(flags.shared_fd);
  if (!mapping) return 1;
  GatewayProcess process;
  return bench::ServeUntilSignalled(
      flags.port_fd,
      [&] { return StartGatewayProcess(flags, flags.stub_url, mapping->state(), &process); },
      [&] {
        if (process.gateway) process.gateway->Shutdown(milliseconds(2'000));
        process.gateway.reset();
        process.admission.reset();
      });
}

// The bench's flags, the children's internal ones hidden.
void AddFlags(CLI::App& app, Flags& flags) {
  app.add_option("--connections", flags.connections,
                 "concurrent /generate requests, each on its own connection")
      ->check(CLI::Range(1, 60'000))
      ->capture_default_str();
  app.add_option("--hold-seconds", flags.hold_seconds,
                 "how long the stub holds each /generate before answering")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--runs", flags.runs, "runs, each with a fresh stub and gateway")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--input-tokens", flags.input_tokens, "input_ids per request")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  app.add_option("--client-threads", flags.client_threads, "the client's I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--gateway-threads", flags.gateway_threads, "the gateway's server I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--upstream-connections", flags.upstream_connections,
                 "the gateway's upstream max_connections_per_host; 0: max(4096, --connections)")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--engine-tokens", flags.engine_tokens,
                 "the stub's max_total_num_tokens (the admission ceiling is 90% of it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--lifecycle", flags.lifecycle,
                 "the gateway's session lifecycle (false: to see what it costs)")
      ->capture_default_str();
  app.add_option("--admission", flags.admission,
                 "the gateway's program-aware admission (false: to see what it costs)")
      ->capture_default_str();
  app.add_option("--role", flags.role, "internal: client, stub or gateway")
      ->check(CLI::IsMember({"client", "stub", "gateway"}))
      ->group("");
  app.add_option("--shared-fd", flags.shared_fd)->group("");
  app.add_option("--port-fd", flags.port_fd)->group("");
  app.add_option("--stub-url", flags.stub_url)->group("");
}

// The range of each figure over the runs, as a table.
void PrintSummary(const Flags& flags, const std::vector<RunFigures>& runs) {
  const double c = flags.connections;
  std::printf("\nover %d runs (ranges)\n| figure | value |\n|---|---|\n", flags.runs);
  std::printf("| gateway threads idle -> holding %d (max while holding) | %s -> %s (%s) |\n",
              flags.connections,
              Range<int>(
                  runs, [](auto& r) { return r.idle.threads; }, "%d")
                  .c_str(),
              Range<int>(
                  runs, [](auto& r) { return r.holding.threads; }, "%d")
                  .c_str(),
              Range<int>(
                  runs, [](auto& r) { return r.max_threads; }, "%d")
                  .c_str());
  std::printf(
      "| gateway RSS idle -> holding %d | %s MiB -> %s MiB (%s KiB per held request) |\n",
      flags.connections,
      Range<double>(
          runs, [](auto& r) { return MiB(r.idle.rss_kb); }, "%.1f")
          .c_str(),
      Range<double>(
          runs, [](auto& r) { return MiB(r.holding.rss_kb); }, "%.1f")
          .c_str(),
      Range<double>(
          runs, [c](auto& r) { return static_cast<double>(r.holding.rss_kb - r.idle.rss_kb) / c; },
          "%.1f")
          .c_str());
  std::printf("| gateway RSS max while holding / VmHWM | %s / %s MiB |\n",
              Range<double>(
                  runs, [](auto& r) { return MiB(r.max_rss_kb); }, "%.1f")
                  .c_str(),
              Range<double>(
                  runs, [](auto& r) { return MiB(r.hwm_kb); }, "%.1f")
                  .c_str());
  std::printf("| gateway RSS after all completed (sessions still open) | %s MiB |\n",
              Range<double>(
                  runs, [](auto& r) { return MiB(r.after_rss_kb); }, "%.1f")
                  .c_str());
  std::printf("| gateway open descriptors idle -> holding | %s -> %s |\n",
              Range<int>(
                  runs, [](auto& r) { return r.idle.fds; }, "%d")
                  .c_str(),
              Range<int>(
                  runs, [](auto& r) { return r.holding.fds; }, "%d")
                  .c_str());
  std::printf("| time until all %d are held | %s s |\n", flags.connections,
              Range<double>(
                  runs, [](auto& r) { return r.all_held_s; }, "%.2f")
                  .c_str());
  std::printf("| completed with status 200 | %s / %d, in %s s |\n",
              Range<int>(
                  runs, [](auto& r) { return r.ok; }, "%d")
                  .c_str(),
              flags.connections,
              Range<double>(
                  runs, [](auto& r) { return r.total_s; }, "%.2f")
                  .c_str());
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app(
      "Gateway threads and memory while holding many concurrent slow requests: a slow engine "
      "stub and the gateway (lifecycle + admission) in their own processes, the client here");
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (flags.role == "stub") return RunStub(flags);
  if (flags.role == "gateway") return RunGateway(flags);

  const rlim_t wanted = static_cast<rlim_t>(flags.connections) + 1024;
  const rlim_t got = RaiseFileLimit(wanted);
  std::printf(
      "gateway_hold: %d concurrent /generate (%d input_ids, max_new_tokens 1, one session "
      "each), held %.1f s by the stub; gateway: lifecycle %s, admission %s (LocalAdmission), "
      "%d server threads; client %d threads; %d runs; hardware threads %u\n",
      flags.connections, flags.input_tokens, flags.hold_seconds, flags.lifecycle ? "on" : "off",
      flags.admission ? "on" : "off", flags.gateway_threads, flags.client_threads, flags.runs,
      std::thread::hardware_concurrency());
  if (got < wanted) {
    std::fprintf(stderr, "cannot raise RLIMIT_NOFILE to %llu (soft limit %llu)\n",
                 static_cast<unsigned long long>(wanted), static_cast<unsigned long long>(got));
    return 1;
  }
  std::unique_ptr<SharedMapping> mapping = SharedMapping::Create();
  if (!mapping) return 1;

  std::vector<RunFigures> runs;
  bool passed = true;
  for (int run = 0; run < flags.runs; ++run) {
    RunFigures figures = RunOnce(flags, run, *mapping);
    passed = passed && figures.passed() && figures.ok == flags.connections;
    runs.push_back(std::move(figures));
  }

  PrintSummary(flags, runs);
  return passed ? 0 : 2;
}

}  // namespace
}  // namespace agentkv::service

int main(int argc, char** argv) { return agentkv::service::Main(argc, argv); }
