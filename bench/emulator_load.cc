// Load bench of the emulated fleet: --engines unpaced EngineEmulators behind a RouterEmulator,
// all in this process, driven over HTTP by an HttpClient keeping --concurrency /generate
// requests in flight for --seconds. Each request is an agentic turn: a --prompt-tokens prompt
// of input_ids that shares a 1,024-token system prefix with every other request and carries a
// session id (X-SMG-Routing-Key and session_id), asking for --max-new-tokens. Prints requests/s
// and output tokens/s for each of --runs runs and their median, plus the engines' prefix hit
// rate (every request therefore runs the real KV cache and step scheduler).
//
//   build/release/bench/emulator_load --engines 2 --concurrency 64
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/routing/router.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"

namespace agentkv::service {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int engines = 2;
  std::string policy = "consistent_hashing";
  int concurrency = 64;
  int sessions = 256;
  int prompt_tokens = 2048;
  int max_new_tokens = 16;
  double seconds = 3.0;
  int runs = 3;
  int client_threads = 2;
};

std::string Body(const Flags& flags, int session, int64_t turn) {
  std::string ids;
  for (int i = 0; i < flags.prompt_tokens; ++i) {
    // 1,024 shared tokens, then the session's own context.
    const int64_t token = i < 1024 ? i + 1 : 100'000 + session * 10'000 + i;
    if (!ids.empty()) ids += ',';
    ids += std::to_string(token);
  }
  return R"({"input_ids": [)" + ids + R"(], "sampling_params": {"max_new_tokens": )" +
         std::to_string(flags.max_new_tokens) + R"(}, "session_id": "s-)" +
         std::to_string(session) + R"(", "rid": "r-)" + std::to_string(session) + "-" +
         std::to_string(turn) + "\"}";
}

struct RunResult {
  double requests_per_s = 0;
  double tokens_per_s = 0;
  int64_t errors = 0;
};

RunResult RunOnce(const Flags& flags, const std::string& router_url) {
  net::HttpClientOptions client_options;
  client_options.threads = flags.client_threads;
  client_options.max_connections_per_host = static_cast<size_t>(flags.concurrency);
  net::HttpClient client(client_options);
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> next{0};
  int in_flight = 0;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(flags.seconds));
  std::function<void()> issue = [&] {
    const int64_t n = next++;
    const int session = static_cast<int>(n % flags.sessions);
    client.AsyncRequest(net::http::verb::post, router_url, "/generate",
                        {{"Content-Type", "application/json"},
                         {"X-SMG-Routing-Key", "s-" + std::to_string(session)}},
                        Body(flags, session, n), [&](StatusOr<net::ClientResponse> r) {
                          if (r.ok() && r->status == 200) {
                            ++completed;
                          } else {
                            ++errors;
                          }
                          if (Clock::now() < end) {
                            issue();
                            return;
                          }
                          std::lock_guard<std::mutex> lock(mu);
                          --in_flight;
                          cv.notify_all();
                        });
  };
  const Clock::time_point start = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu);
    in_flight = flags.concurrency;
  }
  for (int i = 0; i < flags.concurrency; ++i) issue();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return in_flight == 0; });
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  RunResult result;
  result.requests_per_s = static_cast<double>(completed.load()) / elapsed;
  result.tokens_per_s = result.requests_per_s * flags.max_new_tokens;
  result.errors = errors.load();
  return result;
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app("Load bench of the emulated SGLang fleet (router + unpaced engines)");
  app.add_option("--engines", flags.engines)->capture_default_str();
  app.add_option("--policy", flags.policy)->capture_default_str();
  app.add_option("--concurrency", flags.concurrency)->capture_default_str();
  app.add_option("--sessions", flags.sessions)->capture_default_str();
  app.add_option("--prompt-tokens", flags.prompt_tokens)->capture_default_str();
  app.add_option("--max-new-tokens", flags.max_new_tokens)->capture_default_str();
  app.add_option("--seconds", flags.seconds)->capture_default_str();
  app.add_option("--runs", flags.runs)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::unique_ptr<EngineEmulator>> engines;
  RouterEmulatorOptions router_options;
  StatusOr<routing::RouterPolicy> policy = routing::ParseRouterPolicy(flags.policy);
  if (!policy.ok()) {
    std::fprintf(stderr, "emulator_load: --policy: %s\n", policy.status().message().c_str());
    return 2;
  }
  router_options.policy = *policy;
  router_options.health_check_interval = std::chrono::milliseconds(0);
  router_options.client.max_connections_per_host = static_cast<size_t>(flags.concurrency);
  for (int i = 0; i < flags.engines; ++i) {
    EngineEmulatorOptions options;
    options.runtime.paced = false;
    options.runtime.enable_session_radix_cache = true;
    StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
    if (!engine.ok()) {
      std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
      return 1;
    }
    router_options.worker_urls.push_back((*engine)->base_url());
    engines.push_back(*std::move(engine));
  }
  StatusOr<std::unique_ptr<RouterEmulator>> router = RouterEmulator::Start(router_options);
  if (!router.ok()) {
    std::fprintf(stderr, "%s\n", router.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "emulator_load: %d engines (unpaced) behind a %s router; %d in flight, %d-token "
      "prompts, %d output tokens\n",
      flags.engines, flags.policy.c_str(), flags.concurrency, flags.prompt_tokens,
      flags.max_new_tokens);
  std::vector<double> rates;
  for (int run = 0; run < flags.runs; ++run) {
    const RunResult r = RunOnce(flags, (*router)->base_url());
    rates.push_back(r.requests_per_s);
    std::printf("  run %d: %.0f requests/s, %.0f output tokens/s, %lld errors\n", run + 1,
                r.requests_per_s, r.tokens_per_s, static_cast<long long>(r.errors));
  }
  std::sort(rates.begin(), rates.end());
  int64_t prompt = 0;
  int64_t cached = 0;
  for (const auto& engine : engines) {
    const RuntimeSnapshot s = engine->runtime().Snapshot();
    prompt += s.prompt_tokens_total;
    cached += s.cached_tokens_device_total + s.cached_tokens_host_total;
  }
  std::printf("median: %.0f requests/s; engines' prefix hit rate %.3f\n", rates[rates.size() / 2],
              prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0.0);
  (*router)->Shutdown(std::chrono::milliseconds(1000));
  for (auto& engine : engines) engine->Shutdown(std::chrono::milliseconds(1000));
  return 0;
}

}  // namespace
}  // namespace agentkv::service

int main(int argc, char** argv) { return agentkv::service::Main(argc, argv); }
