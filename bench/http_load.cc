// Load bench for the net module (a plain program: it measures a whole server and client, not
// a function, so it does not fit Google Benchmark's loop).
//
// Mode "throughput": an in-process HttpServer with a trivial handler and an HttpClient that
// keeps --concurrency keep-alive requests in flight for --seconds; prints requests/s for each
// of --runs runs and their median.
//
// Mode "hold": a server whose handler holds every request for --hold-seconds (a timer on the
// server's executor, no thread), and --connections concurrent requests from an HttpClient with
// 2 threads, each on its own connection. While all are held it prints the server's thread count
// (/proc/self/task) and resident memory (VmRSS), then checks that every request completes. By
// default the server runs in a child process (--server-process=fork) so that its figures are
// its own and each process needs only --connections descriptors; RLIMIT_NOFILE is raised as far
// as the hard limit allows and reported.
//
//   build/net-release/bench/http_load --mode=throughput
//   build/net-release/bench/http_load --mode=hold --connections=10000 --hold-seconds=10
#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"

namespace agentkv::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Flags {
  std::string mode = "all";
  int server_threads = 2;
  int client_threads = 2;
  // Throughput.
  int concurrency = 64;
  double seconds = 2.0;
  int runs = 5;
  // Hold.
  int connections = 10'000;
  double hold_seconds = 10.0;
  std::string server_process = "fork";
};

int CountThreads(const std::string& proc) {
  int count = 0;
  if (DIR* dir = ::opendir((proc + "/task").c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(dir);
  }
  return count;
}

int64_t RssKb(const std::string& proc) {
  std::ifstream status(proc + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// Raises RLIMIT_NOFILE towards `wanted`; returns the soft limit in force afterwards.
rlim_t RaiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted) {
    rlimit raised = limit;
    raised.rlim_cur = std::min(wanted, limit.rlim_max);
    if (raised.rlim_max < wanted) {
      rlimit both{wanted, wanted};  // Works with CAP_SYS_RESOURCE.
      if (::setrlimit(RLIMIT_NOFILE, &both) == 0) return wanted;
    }
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

// ---------------------------------------------------------------------------------------------
// Throughput

double OneThroughputRun(HttpClient& client, const std::string& base_url, int concurrency,
                        double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int> in_flight{0};
  std::mutex mu;
  std::condition_variable drained;
  std::function<void()> issue = [&] {
    in_flight.fetch_add(1);
    client.AsyncRequest(http::verb::get, base_url, "/ping", {}, "",
                        [&](StatusOr<ClientResponse> response) {
                          if (response.ok() && response->status == 200) {
                            completed.fetch_add(1, std::memory_order_relaxed);
                          } else {
                            failed.fetch_add(1, std::memory_order_relaxed);
                          }
                          if (!stop.load(std::memory_order_relaxed)) issue();
                          if (in_flight.fetch_sub(1) == 1) {
                            std::lock_guard lock(mu);
                            drained.notify_all();
                          }
                        });
  };
  const auto start = Clock::now();
  for (int i = 0; i < concurrency; ++i) issue();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  const int64_t done_at_stop = completed.load();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::unique_lock lock(mu);
  drained.wait(lock, [&] { return in_flight.load() == 0; });
  if (failed.load() > 0)
    std::printf("  (%lld failed requests)\n", static_cast<long long>(failed.load()));
  return static_cast<double>(done_at_stop) / elapsed;
}

int RunThroughput(const Flags& flags) {
  HttpServerOptions server_options;
  server_options.threads = flags.server_threads;
  auto server = HttpServer::Start(
      server_options, [](Request request, std::shared_ptr<ResponseWriter> writer) {
        writer->Reply(MakeResponse(request, http::status::ok, "ok", "text/plain"));
      });
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  HttpClientOptions client_options;
  client_options.threads = flags.client_threads;
  client_options.max_connections_per_host = static_cast<size_t>(flags.concurrency);
  client_options.max_idle_per_host = static_cast<size_t>(flags.concurrency);
  HttpClient client(client_options);
  const std::string base_url = (*server)->base_url();
  std::printf(
      "throughput: server threads %d, client threads %d, %d keep-alive requests in flight, "
      "%.1f s per run\n",
      flags.server_threads, flags.client_threads, flags.concurrency, flags.seconds);
  OneThroughputRun(client, base_url, flags.concurrency, std::min(flags.seconds, 0.5));  // Warm-up.
  std::vector<double> rates;
  for (int run = 0; run < flags.runs; ++run) {
    rates.push_back(OneThroughputRun(client, base_url, flags.concurrency, flags.seconds));
    std::printf("  run %d: %.0f requests/s\n", run + 1, rates.back());
  }
  std::sort(rates.begin(), rates.end());
  std::printf("throughput median: %.0f requests/s (connections opened: %lld)\n",
              rates[rates.size() / 2], static_cast<long long>(client.connections_opened()));
  (*server)->Shutdown(milliseconds(1'000));
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Hold

// The hold server: /hold answers after `hold`; /stats reports the process's figures.
std::unique_ptr<HttpServer> StartHoldServer(int threads, milliseconds hold,
                                            std::atomic<int64_t>* held) {
  // Handlers need the server (for its executor); it exists once Start returned.
  auto server_slot = std::make_shared<HttpServer*>(nullptr);
  Router router;
  router.Add(http::verb::get, "/hold",
             [hold, held, server_slot](Request request, std::shared_ptr<ResponseWriter> writer) {
               held->fetch_add(1);
               auto timer =
                   std::make_shared<boost::asio::steady_timer>((*server_slot)->executor(), hold);
               timer->async_wait([timer, writer, held, request = std::move(request)](auto) {
                 held->fetch_sub(1);
                 writer->Reply(MakeResponse(request, http::status::ok, "held", "text/plain"));
               });
             });
  router.Add(http::verb::get, "/stats",
             [held, server_slot](Request request, std::shared_ptr<ResponseWriter> writer) {
               const std::string body =
                   "{\"held\":" + std::to_string(held->load()) +
                   ",\"threads\":" + std::to_string(CountThreads("/proc/self")) +
                   ",\"rss_kb\":" + std::to_string(RssKb("/proc/self")) +
                   ",\"open\":" + std::to_string((*server_slot)->open_connections()) + "}";
               writer->Reply(MakeResponse(request, http::status::ok, body));
             });
  HttpServerOptions options;
  options.threads = threads;
  auto server = HttpServer::Start(options, router.AsHandler());
  if (!server.ok()) {
    std::fprintf(stderr, "hold server: %s\n", server.status().ToString().c_str());
    return nullptr;
  }
  *server_slot = server->get();
  return std::move(server).value();
}

struct ServerStats {
  int64_t held = -1;
  int threads = -1;
  int64_t rss_kb = -1;
  int64_t open = -1;
};

int64_t JsonInt(const std::string& body, const std::string& key) {
  const size_t at = body.find("\"" + key + "\":");
  if (at == std::string::npos) return -1;
  return std::stoll(body.substr(at + key.size() + 3));
}

ServerStats FetchStats(HttpClient& client, const std::string& base_url) {
  ServerStats stats;
  auto response = client.Request(http::verb::get, base_url, "/stats");
  if (!response.ok() || response->status != 200) return stats;
  stats.held = JsonInt(response->body, "held");
  stats.threads = static_cast<int>(JsonInt(response->body, "threads"));
  stats.rss_kb = JsonInt(response->body, "rss_kb");
  stats.open = JsonInt(response->body, "open");
  return stats;
}

// Raises RLIMIT_NOFILE for the hold (2 * C + 100, or C + 100 per process with a forked server)
// and reports it; false when the limit stays too low.
bool RaiseHoldFileLimit(const Flags& flags) {
  const int connections = flags.connections;
  const bool fork_server = flags.server_process == "fork";
  const rlim_t wanted =
      static_cast<rlim_t>(fork_server ? connections + 100 : 2 * connections + 100);
  const rlim_t got =
      RaiseFileLimit(std::max<rlim_t>(wanted, 2 * static_cast<rlim_t>(connections) + 100));
  std::printf("hold: %d connections held %.1f s; server threads %d (%s), client threads %d\n",
              connections, flags.hold_seconds, flags.server_threads,
              fork_server ? "server in a child process" : "server in this process",
              flags.client_threads);
  std::printf("  RLIMIT_NOFILE: wanted %llu (2*C+100), soft limit now %llu%s\n",
              static_cast<unsigned long long>(2 * static_cast<rlim_t>(connections) + 100),
              static_cast<unsigned long long>(got),
              got < 2 * static_cast<rlim_t>(connections) + 100
                  ? " (the hard limit stops it; each process needs only C+100 in fork mode)"
                  : "");
  if (got < wanted) {
    std::fprintf(stderr, "cannot raise RLIMIT_NOFILE to %llu\n",
                 static_cast<unsigned long long>(wanted));
    return false;
  }
  return true;
}

// The hold server: in a child forked before any thread exists (`child` > 0; it stops when
// `stop_fd` closes), or in this process (`local`).
struct HoldServer {
  pid_t child = -1;
  int stop_fd = -1;
  std::unique_ptr<HttpServer> local;
  uint16_t port = 0;
};

// Starts the hold server as --server-process says; false when it fails.
bool StartHoldServerProcess(const Flags& flags, milliseconds hold, std::atomic<int64_t>* held,
                            HoldServer& server) {
  int stop_pipe[2] = {-1, -1};
  if (flags.server_process == "fork") {
    int port_pipe[2];
    if (::pipe(port_pipe) != 0 || ::pipe(stop_pipe) != 0) return false;
    server.child = ::fork();
    if (server.child == 0) {
      ::close(port_pipe[0]);
      ::close(stop_pipe[1]);
      auto child_server = StartHoldServer(flags.server_threads, hold, held);
      const uint16_t child_port = child_server ? child_server->port() : 0;
      if (::write(port_pipe[1], &child_port, sizeof(child_port)) != sizeof(child_port)) _exit(1);
      char byte;
      while (::read(stop_pipe[0], &byte, 1) > 0) {
      }
      if (child_server) child_server->Shutdown(milliseconds(1'000));
      _exit(0);
    }
    ::close(port_pipe[1]);
    ::close(stop_pipe[0]);
    server.stop_fd = stop_pipe[1];
    if (::read(port_pipe[0], &server.port, sizeof(server.port)) != sizeof(server.port) ||
        server.port == 0)
      return false;
    ::close(port_pipe[0]);
  } else {
    server.local = StartHoldServer(flags.server_threads, hold, held);
    if (!server.local) return false;
    server.port = server.local->port();
  }
  return true;
}

// Stops the hold server: closes the child's stop pipe and reaps it, or shuts the local one down.
void StopHoldServer(HoldServer& server) {
  if (server.child > 0) {
    ::close(server.stop_fd);
    int status = 0;
    ::waitpid(server.child, &status, 0);
  } else {
    server.local->Shutdown(milliseconds(1'000));
  }
}

// The server and the client while the requests are held.
void PrintHolding(int connections, bool fork_server, const ServerStats& idle,
                  const ServerStats& peak, double all_held_after, int client_threads_now,
                  int64_t client_rss_kb) {
  if (all_held_after >= 0) {
    std::printf("  all %d requests held after %.2f s\n", connections, all_held_after);
  } else {
    std::printf("  NOT all requests held at once: peak %lld\n", static_cast<long long>(peak.held));
  }
  std::printf(
      "  server while holding %lld requests on %lld open connections: %d threads, RSS %.1f MiB "
      "(%.1f KiB per held request over the idle server)\n",
      static_cast<long long>(peak.held), static_cast<long long>(peak.open), peak.threads,
      static_cast<double>(peak.rss_kb) / 1024.0,
      static_cast<double>(peak.rss_kb - idle.rss_kb) /
          static_cast<double>(std::max<int64_t>(peak.held, 1)));
  std::printf("  client process meanwhile: %d threads, RSS %.1f MiB%s\n", client_threads_now,
              static_cast<double>(client_rss_kb) / 1024.0,
              fork_server ? "" : " (same process as the server)");
}

int RunHold(const Flags& flags) {
  const int connections = flags.connections;
  const bool fork_server = flags.server_process == "fork";
  if (!RaiseHoldFileLimit(flags)) return 1;
  const milliseconds hold(static_cast<int64_t>(flags.hold_seconds * 1000));

  // The server: in a child forked before any thread exists, or here.
  std::atomic<int64_t> held{0};
  HoldServer server;
  if (!StartHoldServerProcess(flags, hold, &held, server)) return 1;
  const uint16_t port = server.port;
  const std::string base_url = "http://127.0.0.1:" + std::to_string(port);

  HttpClientOptions stats_options;
  HttpClient stats_client(stats_options);
  const ServerStats idle = FetchStats(stats_client, base_url);
  std::printf("  server before load: %d threads, RSS %.1f MiB\n", idle.threads,
              static_cast<double>(idle.rss_kb) / 1024.0);

  HttpClientOptions options;
  options.threads = flags.client_threads;
  options.max_connections_per_host = static_cast<size_t>(connections);
  options.max_idle_per_host = static_cast<size_t>(connections);
  options.connect_timeout = milliseconds(60'000);
  options.queue_timeout = milliseconds(60'000);
  options.header_timeout = hold + milliseconds(120'000);
  HttpClient client(options);

  std::atomic<int> ok{0};
  std::atomic<int> done{0};
  std::mutex error_mu;
  std::vector<std::string> errors;
  const auto start = Clock::now();
  for (int i = 0; i < connections; ++i) {
    client.AsyncRequest(
        http::verb::get, base_url, "/hold", {}, "", [&](StatusOr<ClientResponse> response) {
          if (response.ok() && response->status == 200) {
            ok.fetch_add(1);
          } else {
            std::lock_guard lock(error_mu);
            if (errors.size() < 5) {
              errors.push_back(response.ok() ? "status " + std::to_string(response->status)
                                             : response.status().ToString());
            }
          }
          done.fetch_add(1);
        });
  }
  // Wait until every request is held by the server, then sample.
  ServerStats peak;
  double all_held_after = -1;
  while (Clock::now() - start < hold + milliseconds(60'000) && done.load() < connections) {
    const ServerStats stats = FetchStats(stats_client, base_url);
    if (stats.held >= peak.held) peak = stats;
    if (stats.held == connections) {
      all_held_after = std::chrono::duration<double>(Clock::now() - start).count();
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  const int client_threads_now = CountThreads("/proc/self");
  const int64_t client_rss_kb = RssKb("/proc/self");
  PrintHolding(connections, fork_server, idle, peak, all_held_after, client_threads_now,
               client_rss_kb);

  while (done.load() < connections && Clock::now() - start < hold + milliseconds(180'000)) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("  completed %d/%d with status 200 in %.2f s (connections opened: %lld)\n", ok.load(),
              connections, total, static_cast<long long>(client.connections_opened()));
  for (const auto& error : errors) std::printf("  error: %s\n", error.c_str());

  StopHoldServer(server);
  return ok.load() == connections && all_held_after >= 0 ? 0 : 2;
}

}  // namespace
}  // namespace agentkv::net

int main(int argc, char** argv) {
  agentkv::net::Flags flags;
  CLI::App app{"HTTP load bench for agentkv::net (docs/NET.md)"};
  app.add_option("--mode", flags.mode, "throughput, hold or all")
      ->check(CLI::IsMember({"throughput", "hold", "all"}));
  app.add_option("--server-threads", flags.server_threads, "server I/O threads")
      ->check(CLI::Range(1, 256));
  app.add_option("--client-threads", flags.client_threads, "client I/O threads")
      ->check(CLI::Range(1, 256));
  app.add_option("--concurrency", flags.concurrency, "throughput: requests in flight")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--seconds", flags.seconds, "throughput: seconds per run")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--runs", flags.runs, "throughput: runs (the median is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--connections", flags.connections, "hold: concurrent connections")
      ->check(CLI::Range(1, 200'000));
  app.add_option("--hold-seconds", flags.hold_seconds, "hold: how long each request is held")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--server-process", flags.server_process, "hold: fork or inproc")
      ->check(CLI::IsMember({"fork", "inproc"}));
  CLI11_PARSE(app, argc, argv);
  // The hold mode forks; it runs first, before throughput starts any thread.
  int rc = 0;
  if (flags.mode == "hold" || flags.mode == "all") rc = agentkv::net::RunHold(flags);
  if (rc == 0 && (flags.mode == "throughput" || flags.mode == "all")) {
    rc = agentkv::net::RunThroughput(flags);
  }
  return rc;
}
