// Gateway overhead bench (issue 7): the latency and throughput the agentkv gateway adds over a
// direct connection to an unpaced emulated engine, and the same against nginx proxy_pass.
//
// One EngineEmulator (unpaced, session radix cache, priority eviction, --engine-tokens of KV)
// and one Gateway in front of it (engine_urls, prerequisites checked, session lifecycle and
// program-aware admission on with an in-process LocalAdmission, 2 s fleet poll) run in this
// process. For each body size (small: --small-tokens input_ids; large: --large-tokens) and each
// --concurrency C, an HttpClient (2 threads, C connections) keeps C non-streamed /generate
// requests (max_new_tokens 1, taking turns in --sessions session_ids) in flight for --seconds
// against the engine directly and through the gateway, alternating, --runs times. Each request's
// latency is recorded; the program prints per-run requests/s, p50 and p99 and their medians,
// and the gateway's added latency (median gateway minus median direct).
//
// With --nginx=auto (or a path) and nginx present, it writes a minimal nginx.conf (upstream
// keepalive, proxy_http_version 1.1, access_log off, proxy_buffering off) into a temp dir,
// starts one nginx child per --nginx-workers entry, measures small bodies at
// --nginx-concurrency with direct, the gateway and each nginx alternating within every run
// (each path's share of the direct requests/s comes from the same runs), and stops them
// (SIGQUIT, waitpid).
//
// Client, gateway, engine and nginx share this machine's cores: figures are relative.
//
// With --json-out FILE it also writes the medians as JSON (scripts/perf-report.py's `gateway`
// section reads it): {"overhead": [{"body", "concurrency", "direct": {...}, "gateway": {...}}],
// "nginx": {"version", "concurrency", "paths": [{"name", ...}]}}, each path with
// requests_per_s, p50_ms, p99_ms and errors; "nginx" is null when it did not run.
//
//   build/release/bench/gateway_load
//   build/release/bench/gateway_load --concurrency 1,64 --seconds 5 --runs 5 --nginx=off
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_options.h"

extern char** environ;

namespace agentkv::service {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Flags {
  std::vector<int> concurrency = {1, 64, 1024};
  int small_tokens = 16;
  int large_tokens = 100'000;
  // Large bodies run only at concurrencies up to this (1024 x 0.7 MB bodies in flight through
  // two hops on 2 cores mostly measures memory copies).
  int large_max_concurrency = 64;
  double seconds = 2.0;
  int runs = 3;
  int client_threads = 2;
  int gateway_threads = 2;
  int64_t sessions = 4096;
  int64_t engine_tokens = 8'000'000;
  std::string nginx = "auto";
  std::vector<int> nginx_workers = {1, 2};
  int nginx_concurrency = 64;
  std::string json_out;
  // --plain: lifecycle and admission off, the gateway a plain proxy (what the agentic path
  // costs on top of proxying is the difference against a default run).
  bool plain = false;
};

// A request body: `prefix_` + a session number + `suffix`. Every request of a size has the same
// input_ids (so the engine's radix cache shares them); request n belongs to session
// n % sessions, so a run is `sessions` agents taking turns, as agentic traffic is.
class BodyMaker {
 public:
  BodyMaker(int tokens, int64_t sessions) : sessions_(sessions) {
    std::string ids;
    ids.reserve(static_cast<size_t>(tokens) * 7);
    for (int i = 0; i < tokens; ++i) {
      if (i > 0) ids += ',';
      ids += std::to_string(1000 + i);
    }
    prefix_ = R"({"input_ids": [)" + ids +
              R"(], "sampling_params": {"max_new_tokens": 1}, "session_id": "bench-)";
  }
  std::string Make(int64_t request) const {
    std::string body;
    body.reserve(prefix_.size() + 24);
    body += prefix_;
    body += std::to_string(request % sessions_);
    body += "\"}";
    return body;
  }
  size_t bytes() const { return prefix_.size() + 8; }

 private:
  const int64_t sessions_;
  std::string prefix_;
};

struct RunResult {
  double requests_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t errors = 0;
  std::string first_error;
};

double Percentile(std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  size_t index = static_cast<size_t>(q * n);
  if (index >= sorted.size()) index = sorted.size() - 1;
  return sorted[index];
}

// Keeps `concurrency` requests in flight against `url` for `seconds`; latencies of requests
// that completed before the stop are kept.
RunResult RunOnce(net::HttpClient& client, const std::string& url, int concurrency, double seconds,
                  const BodyMaker& bodies, std::atomic<int64_t>& next_session) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int> in_flight{0};
  std::mutex mu;
  std::condition_variable drained;
  std::vector<double> latencies_ms;  // Guarded by mu.
  std::string first_error;           // Guarded by mu.
  latencies_ms.reserve(1 << 16);
  std::function<void()> issue = [&] {
    in_flight.fetch_add(1);
    const Clock::time_point sent = Clock::now();
    client.AsyncRequest(
        net::http::verb::post, url, "/generate", {{"Content-Type", "application/json"}},
        bodies.Make(next_session.fetch_add(1)), [&, sent](StatusOr<net::ClientResponse> r) {
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
          const bool counted = !stop.load(std::memory_order_relaxed);
          if (r.ok() && r->status == 200) {
            if (counted) {
              completed.fetch_add(1, std::memory_order_relaxed);
              std::lock_guard lock(mu);
              latencies_ms.push_back(ms);
            }
          } else {
            errors.fetch_add(1, std::memory_order_relaxed);
            std::lock_guard lock(mu);
            if (first_error.empty()) {
              first_error =
                  r.ok() ? "status " + std::to_string(r->status) + ": " + r->body.substr(0, 200)
                         : r.status().ToString();
            }
          }
          if (counted) issue();
          if (in_flight.fetch_sub(1) == 1) {
            std::lock_guard lock(mu);
            drained.notify_all();
          }
        });
  };
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < concurrency; ++i) issue();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const int64_t done_at_stop = completed.load();
  std::unique_lock lock(mu);
  drained.wait(lock, [&] { return in_flight.load() == 0; });
  RunResult result;
  result.requests_per_s = static_cast<double>(done_at_stop) / elapsed;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  result.p50_ms = Percentile(latencies_ms, 0.50);
  result.p99_ms = Percentile(latencies_ms, 0.99);
  result.errors = errors.load();
  result.first_error = first_error;
  return result;
}

struct Summary {
  double requests_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t errors = 0;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

Summary Summarize(const std::vector<RunResult>& runs) {
  std::vector<double> rps;
  std::vector<double> p50;
  std::vector<double> p99;
  Summary s;
  for (const RunResult& r : runs) {
    rps.push_back(r.requests_per_s);
    p50.push_back(r.p50_ms);
    p99.push_back(r.p99_ms);
    s.errors += r.errors;
  }
  s.requests_per_s = Median(rps);
  s.p50_ms = Median(p50);
  s.p99_ms = Median(p99);
  return s;
}

struct Target {
  std::string name;
  std::string url;
};

// Runs every target `flags.runs` times, alternating targets within each run, after a short
// warm-up of each. Returns one Summary per target.
std::vector<Summary> Measure(const Flags& flags, const std::vector<Target>& targets,
                             int concurrency, const BodyMaker& bodies, const char* label,
                             std::atomic<int64_t>& next_session) {
  net::HttpClientOptions options;
  options.threads = flags.client_threads;
  options.max_connections_per_host = static_cast<size_t>(concurrency);
  options.max_idle_per_host = static_cast<size_t>(concurrency);
  options.header_timeout = milliseconds(120'000);
  options.queue_timeout = milliseconds(120'000);
  options.max_response_bytes = size_t{64} << 20;
  net::HttpClient client(options);
  for (const Target& t : targets) {
    RunOnce(client, t.url, concurrency, std::min(0.5, flags.seconds), bodies, next_session);
  }
  std::vector<std::vector<RunResult>> results(targets.size());
  for (int run = 0; run < flags.runs; ++run) {
    for (size_t i = 0; i < targets.size(); ++i) {
      RunResult r =
          RunOnce(client, targets[i].url, concurrency, flags.seconds, bodies, next_session);
      std::printf(
          "  %-5s C=%-5d %-14s run %d: %8.0f req/s  p50 %8.3f ms  p99 %8.3f ms%s%s\n", label,
          concurrency, targets[i].name.c_str(), run + 1, r.requests_per_s, r.p50_ms, r.p99_ms,
          r.errors > 0 ? "  errors: " : "",
          r.errors > 0 ? (std::to_string(r.errors) + " (" + r.first_error + ")").c_str() : "");
      std::fflush(stdout);
      results[i].push_back(std::move(r));
    }
  }
  std::vector<Summary> summaries;
  for (const auto& runs : results) summaries.push_back(Summarize(runs));
  return summaries;
}

// ---------------------------------------------------------------------------------------------
// nginx

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string NginxVersion(const std::string& path) {
  const std::string command = path + " -v 2>&1";
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[256];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

class NginxProcess {
 public:
  // Writes the config into a fresh temp dir and starts nginx; returns null on failure.
  static std::unique_ptr<NginxProcess> Start(const std::string& path, int workers,
                                             uint16_t engine_port) {
    char dir_template[] = "/tmp/agentkv-nginx-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) return nullptr;
    const std::string dir = dir_template;
    // Worker processes may run as another user when started as root.
    ::chmod(dir.c_str(), 0777);
    const uint16_t port = FreePort();
    const std::string conf = dir + "/nginx.conf";
    {
      std::ofstream out(conf);
      out << "daemon off;\nmaster_process on;\nworker_processes " << workers << ";\n"
          << "pid " << dir << "/nginx.pid;\nerror_log " << dir << "/error.log warn;\n"
          << "events { worker_connections 16384; }\n"
          << "http {\n  access_log off;\n  client_max_body_size 100m;\n"
          << "  client_body_buffer_size 1m;\n  keepalive_requests 1000000;\n"
          << "  client_body_temp_path " << dir << "/client_body;\n"
          << "  proxy_temp_path " << dir << "/proxy;\n"
          << "  fastcgi_temp_path " << dir << "/fastcgi;\n"
          << "  uwsgi_temp_path " << dir << "/uwsgi;\n"
          << "  scgi_temp_path " << dir << "/scgi;\n"
          << "  upstream engine {\n    server 127.0.0.1:" << engine_port << ";\n"
          << "    keepalive 1024;\n    keepalive_requests 1000000;\n  }\n"
          << "  server {\n    listen 127.0.0.1:" << port << ";\n"
          << "    location / {\n      proxy_pass http://engine;\n"
          << "      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"
          << "      proxy_buffering off;\n      proxy_read_timeout 3600s;\n    }\n  }\n}\n";
    }
    std::vector<std::string> args = {path, "-p", dir, "-c", conf, "-e", dir + "/error.log"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
      return nullptr;
    }
    auto process = std::unique_ptr<NginxProcess>(new NginxProcess(dir, pid, port));
    // Ready once a request reaches the engine through it.
    net::HttpClient probe(net::HttpClientOptions{});
    for (int i = 0; i < 100; ++i) {
      auto r = probe.Request(net::http::verb::get, process->base_url(), "/health");
      if (r.ok() && r->status == 200) return process;
      std::this_thread::sleep_for(milliseconds(50));
    }
    std::fprintf(stderr, "nginx did not become ready; see %s/error.log\n", dir.c_str());
    return nullptr;
  }

  NginxProcess(const NginxProcess&) = delete;
  NginxProcess& operator=(const NginxProcess&) = delete;

  // SIGQUIT (graceful), then SIGKILL after 5 s; reaps the child.
  ~NginxProcess() {
    ::kill(pid_, SIGQUIT);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  NginxProcess(std::string dir, pid_t pid, uint16_t port)
      : dir_(std::move(dir)), pid_(pid), port_(port) {}
  std::string dir_;
  pid_t pid_;
  uint16_t port_;
};

// ---------------------------------------------------------------------------------------------

// The bench's flags.
void AddFlags(CLI::App& app, Flags& flags) {
  app.add_option("--concurrency", flags.concurrency, "requests in flight (list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--small-tokens", flags.small_tokens)->capture_default_str();
  app.add_option("--large-tokens", flags.large_tokens, "0 skips large bodies")
      ->capture_default_str();
  app.add_option("--large-max-concurrency", flags.large_max_concurrency)->capture_default_str();
  app.add_option("--seconds", flags.seconds, "per run and target")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--runs", flags.runs, "runs (medians are reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--client-threads", flags.client_threads)->capture_default_str();
  app.add_option("--sessions", flags.sessions,
                 "agent sessions the requests take turns in (request n is in session n % sessions)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--gateway-threads", flags.gateway_threads,
                 "the gateway's I/O threads (one event loop each, server and upstream client)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--engine-tokens", flags.engine_tokens, "the engine's max_total_tokens")
      ->capture_default_str();
  app.add_option("--nginx", flags.nginx, "auto, off or the nginx binary")->capture_default_str();
  app.add_option("--nginx-workers", flags.nginx_workers, "worker_processes (list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--nginx-concurrency", flags.nginx_concurrency)->capture_default_str();
  app.add_flag("--plain", flags.plain,
               "lifecycle and program-aware admission off: the gateway as a plain proxy");
  app.add_option("--json-out", flags.json_out,
                 "also write the medians here as JSON (scripts/perf-report.py reads it)");
}

boost::json::object SummaryJson(const Summary& s) {
  return {{"requests_per_s", s.requests_per_s},
          {"p50_ms", s.p50_ms},
          {"p99_ms", s.p99_ms},
          {"errors", s.errors}};
}

// Direct against through the gateway, for each body size and concurrency: the medians as a
// table.
void MeasureOverhead(const Flags& flags, const std::vector<Target>& targets, const BodyMaker& small,
                     std::atomic<int64_t>& next_session, boost::json::object& json) {
  struct Row {
    std::string size;
    int concurrency;
    Summary direct;
    Summary gateway;
  };
  std::vector<Row> rows;
  const BodyMaker large(std::max(flags.large_tokens, 1), flags.sessions);
  for (const auto& [name, bodies, tokens] :
       {std::tuple<const char*, const BodyMaker*, int>{"small", &small, flags.small_tokens},
        std::tuple<const char*, const BodyMaker*, int>{"large", &large, flags.large_tokens}}) {
    if (tokens <= 0) continue;
    std::printf("%s bodies: %d input_ids, %zu bytes\n", name, tokens, bodies->bytes());
    for (int c : flags.concurrency) {
      if (bodies == &large && c > flags.large_max_concurrency) {
        std::printf("  large C=%d skipped (--large-max-concurrency %d)\n", c,
                    flags.large_max_concurrency);
        continue;
      }
      const std::vector<Summary> s = Measure(flags, targets, c, *bodies, name, next_session);
      rows.push_back({name, c, s[0], s[1]});
    }
  }

  std::printf("\nmedians of %d runs (ms; req/s)\n", flags.runs);
  std::printf(
      "| body | C | direct p50 | direct p99 | gateway p50 | gateway p99 | added p50 | "
      "added p99 | direct req/s | gateway req/s | errors |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %+.3f | %+.3f | %.0f | %.0f | %lld |\n",
                r.size.c_str(), r.concurrency, r.direct.p50_ms, r.direct.p99_ms, r.gateway.p50_ms,
                r.gateway.p99_ms, r.gateway.p50_ms - r.direct.p50_ms,
                r.gateway.p99_ms - r.direct.p99_ms, r.direct.requests_per_s,
                r.gateway.requests_per_s,
                static_cast<long long>(r.direct.errors + r.gateway.errors));
  }
  boost::json::array overhead;
  for (const Row& r : rows) {
    overhead.push_back(boost::json::object{{"body", r.size},
                                           {"concurrency", r.concurrency},
                                           {"direct", SummaryJson(r.direct)},
                                           {"gateway", SummaryJson(r.gateway)}});
  }
  json["overhead"] = std::move(overhead);
}

// The gateway against nginx proxies (one per --nginx-workers) in front of the same engine.
void CompareWithNginx(const Flags& flags, const std::vector<Target>& targets, uint16_t engine_port,
                      const BodyMaker& small, std::atomic<int64_t>& next_session,
                      boost::json::object& json) {
  const std::string path = flags.nginx == "auto" ? "/usr/sbin/nginx" : flags.nginx;
  if (::access(path.c_str(), X_OK) != 0) {
    std::printf("\nnginx: %s not found; comparison skipped\n", path.c_str());
  } else {
    std::printf("\nnginx comparison: %s, small bodies, C=%d\n", NginxVersion(path).c_str(),
                flags.nginx_concurrency);
    // Every nginx configuration runs at once (idle ones cost nothing) so that direct, the
    // gateway and each nginx alternate within every run: the ratios compare like with like.
    std::vector<std::unique_ptr<NginxProcess>> running;
    std::vector<Target> compared = targets;
    for (int workers : flags.nginx_workers) {
      auto nginx = NginxProcess::Start(path, workers, engine_port);
      if (!nginx) {
        std::printf("  nginx with %d workers failed to start\n", workers);
        continue;
      }
      compared.push_back({"nginx-" + std::to_string(workers) + "w", nginx->base_url()});
      running.push_back(std::move(nginx));
    }
    const std::vector<Summary> s =
        Measure(flags, compared, flags.nginx_concurrency, small, "small", next_session);
    std::printf(
        "| path | req/s | share of direct | p50 ms | p99 ms | errors |\n"
        "|---|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < compared.size(); ++i) {
      std::printf("| %s | %.0f | %.0f%% | %.3f | %.3f | %lld |\n", compared[i].name.c_str(),
                  s[i].requests_per_s, 100.0 * s[i].requests_per_s / s[0].requests_per_s,
                  s[i].p50_ms, s[i].p99_ms, static_cast<long long>(s[i].errors));
    }
    for (size_t i = 2; i < compared.size(); ++i) {
      std::printf("gateway / %s: %.2f x the requests/s\n", compared[i].name.c_str(),
                  s[1].requests_per_s / s[i].requests_per_s);
    }
    boost::json::array paths;
    for (size_t i = 0; i < compared.size(); ++i) {
      boost::json::object path_json = SummaryJson(s[i]);
      path_json["name"] = compared[i].name;
      paths.push_back(std::move(path_json));
    }
    json["nginx"] = boost::json::object{{"version", NginxVersion(path)},
                                        {"concurrency", flags.nginx_concurrency},
                                        {"paths", std::move(paths)}};
  }
}

bool WriteJson(const std::string& path, const boost::json::object& json) {
  const std::string text = boost::json::serialize(json) + "\n";
  std::FILE* out = std::fopen(path.c_str(), "w");
  bool written = out != nullptr && std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (out != nullptr && std::fclose(out) != 0) written = false;
  return written;
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app("Gateway overhead over a direct connection to an unpaced emulated engine");
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);

  EngineEmulatorOptions engine_options;
  engine_options.runtime.paced = false;
  engine_options.runtime.enable_session_radix_cache = true;
  engine_options.runtime.radix_eviction_policy = RadixEvictionPolicy::kPriority;
  engine_options.runtime.engine.kv_pool.max_total_tokens = flags.engine_tokens;
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }

  GatewayOptions gateway_options;
  gateway_options.engine_urls = {(*engine)->base_url()};
  gateway_options.check_prerequisites = true;
  gateway_options.http.threads = flags.gateway_threads;
  gateway_options.agentic.agentic_session_lifecycle = !flags.plain;
  gateway_options.agentic.agentic_program_admission = !flags.plain;
  gateway_options.agentic.poll_interval_s = 2.0;
  // The bench is one client opening thousands of sessions a second: the per-client new-session
  // rate limit would answer most of them 429 and the figures would time refusals.
  gateway_options.max_new_sessions_per_s = 0;
  gateway_options.log = LogSink(StderrLogSink, LogLevel::kWarn);
  LocalAdmissionOptions admission_options;
  admission_options.agentic = gateway_options.agentic;
  StatusOr<std::unique_ptr<LocalAdmission>> admission = LocalAdmission::Create(admission_options);
  if (!admission.ok()) {
    std::fprintf(stderr, "admission: %s\n", admission.status().ToString().c_str());
    return 1;
  }
  std::shared_ptr<AdmissionBackend> backend = *std::move(admission);
  StatusOr<std::unique_ptr<Gateway>> gateway = Gateway::Start(gateway_options, backend);
  if (!gateway.ok()) {
    std::fprintf(stderr, "gateway: %s\n", gateway.status().ToString().c_str());
    return 1;
  }
  if ((*gateway)->lifecycle_enabled() == flags.plain ||
      (*gateway)->admission_enabled() == flags.plain) {
    std::fprintf(stderr, "gateway started with lifecycle or admission %s\n",
                 flags.plain ? "on under --plain" : "off");
    return 1;
  }

  std::printf(
      "gateway_load: engine %s (unpaced, %lld KV tokens), gateway %s (%s, "
      "%d I/O threads); client %d threads; %.1f s x %d runs; "
      "hardware threads %u\n",
      (*engine)->base_url().c_str(), static_cast<long long>(flags.engine_tokens),
      (*gateway)->base_url().c_str(), flags.plain ? "plain proxy" : "lifecycle, admission",
      flags.gateway_threads, flags.client_threads, flags.seconds, flags.runs,
      std::thread::hardware_concurrency());
  const std::vector<Target> targets = {{"direct", (*engine)->base_url()},
                                       {"gateway", (*gateway)->base_url()}};
  std::atomic<int64_t> next_session{0};
  const BodyMaker small(flags.small_tokens, flags.sessions);
  boost::json::object json{{"nginx", nullptr}};
  MeasureOverhead(flags, targets, small, next_session, json);
  if (flags.nginx != "off")
    CompareWithNginx(flags, targets, (*engine)->port(), small, next_session, json);
  if (!flags.json_out.empty() && !WriteJson(flags.json_out, json)) {
    std::fprintf(stderr, "gateway_load: cannot write --json-out %s\n", flags.json_out.c_str());
    return 1;
  }

  const GatewayStats stats = (*gateway)->stats();
  std::printf("\ngateway: %lld sessions active at the end, %lld polls\n",
              static_cast<long long>(stats.sessions_active), static_cast<long long>(stats.polls));
  (*gateway)->Shutdown(milliseconds(2'000));
  (*engine)->Shutdown(milliseconds(2'000));
  return 0;
}

}  // namespace
}  // namespace agentkv::service

int main(int argc, char** argv) { return agentkv::service::Main(argc, argv); }
