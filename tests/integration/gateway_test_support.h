// Shared support for the tests that run the agentkv gateway end to end on 127.0.0.1
// (tests/integration/gateway_*_test.cc and the chaos suite): client calls with timeouts, a
// recording engine that can hold requests (FakeEngine), emulated fleets, log capture, and an
// admission setup whose ledger fits one request at a time.
#ifndef AGENTKV_TESTS_INTEGRATION_GATEWAY_TEST_SUPPORT_H_
#define AGENTKV_TESTS_INTEGRATION_GATEWAY_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/protocol/sse.h"
#include "agentkv/routing/router.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/admission/admission_remote.h"
#include "agentkv/service/coordinator/coordinator_server.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_request.h"

namespace agentkv::service::gateway_testing {

using namespace std::chrono_literals;
namespace http = net::http;
namespace json = boost::json;

// Polls `condition` every 10 ms for up to `limit`.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

inline net::HttpClientOptions ClientOptions() {
  net::HttpClientOptions options;
  options.connect_timeout = 2s;
  options.header_timeout = 15s;
  options.body_timeout = 15s;
  return options;
}

inline net::ClientResponse Call(net::HttpClient& client, http::verb verb, const std::string& base,
                                const std::string& path, const std::string& body = "",
                                net::HeaderList headers = {}) {
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  StatusOr<net::ClientResponse> r = client.Request(verb, base, path, headers, body);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : net::ClientResponse{};
}

inline net::ClientResponse Post(net::HttpClient& client, const std::string& base,
                                const std::string& path, const std::string& body,
                                net::HeaderList headers = {}) {
  return Call(client, http::verb::post, base, path, body, std::move(headers));
}

inline std::string InputIds(int64_t first, int64_t n) {
  json::array ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + i);
  return json::serialize(ids);
}

inline std::map<std::string, double> Gauges(net::HttpClient& client, const std::string& base) {
  const net::ClientResponse r = Call(client, http::verb::get, base, "/metrics");
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(r.body);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? protocol::MaxByName(*samples) : std::map<std::string, double>{};
}

// The control requests an engine emulator received: (path, body).
inline std::vector<std::pair<std::string, std::string>> Recorded(net::HttpClient& client,
                                                                 const std::string& base) {
  std::vector<std::pair<std::string, std::string>> out;
  const net::ClientResponse r = Call(client, http::verb::get, base, "/agentkv/requests");
  const json::value parsed = json::parse(r.body);
  for (const json::value& entry : parsed.as_array()) {
    out.emplace_back(std::string(entry.at("path").as_string()),
                     std::string(entry.at("body").as_string()));
  }
  return out;
}

inline int64_t CloseCount(net::HttpClient& client, const std::string& base,
                          const std::string& session) {
  int64_t n = 0;
  for (const auto& [path, body] : Recorded(client, base)) {
    if (path == "/close_session" && json::parse(body).at("session_id").as_string() == session) ++n;
  }
  return n;
}

// A recording engine: answers /metrics, /server_info, /abort_request and /close_session, and
// records every /generate (body and headers), answering at once or holding it until released.
class FakeEngine {
 public:
  struct Received {
    std::string body;
    net::HeaderList headers;
    std::string rid;
  };

  explicit FakeEngine(bool hold, int64_t capacity = 1000) : hold_(hold), capacity_(capacity) {
    net::Router router;
    router.Add(http::verb::post, "/generate",
               [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                 Received received;
                 received.body = q.body();
                 for (const auto& field : q) {
                   received.headers.emplace_back(std::string(field.name_string()),
                                                 std::string(field.value()));
                 }
                 received.rid = std::string(json::parse(q.body()).at("rid").as_string());
                 std::lock_guard<std::mutex> lock(mu_);
                 if (record_.load()) generates_.push_back(received);
                 if (hold_) {
                   held_.push_back(Held{received.rid, std::make_shared<net::Request>(std::move(q)),
                                        std::move(w)});
                 } else {
                   w->Reply(net::MakeResponse(q, http::status::ok, ResponseBody(received.rid)));
                 }
               });
    router.Add(http::verb::get, "/metrics",
               [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                 if (stall_metrics_.load()) {
                   std::lock_guard<std::mutex> lock(mu_);
                   stalled_.push_back(std::move(w));  // Never answered.
                   return;
                 }
                 w->Reply(net::MakeResponse(q, http::status::ok,
                                            "sglang:max_total_num_tokens{tp_rank=\"0\"} " +
                                                std::to_string(capacity_) +
                                                "\nsglang:token_usage{tp_rank=\"0\"} "
                                                "0\nsglang:num_used_tokens{tp_rank=\"0\"} 0\n",
                                            "text/plain"));
               });
    router.Add(
        http::verb::get, "/server_info",
        [this](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
          protocol::ServerInfo info;
          info.enable_metrics = true;
          info.enable_session_radix_cache = true;
          info.radix_eviction_policy = "priority";
          info.max_total_num_tokens = capacity_;
          w->Reply(net::MakeResponse(q, http::status::ok, protocol::SerializeServerInfo(info)));
        });
    for (const char* path : {"/abort_request", "/close_session"}) {
      router.Add(http::verb::post, path,
                 [this, path](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                   {
                     std::lock_guard<std::mutex> lock(mu_);
                     if (record_.load()) control_.emplace_back(path, q.body());
                   }
                   if (std::string(path) == "/abort_request" && !hung_.load()) {
                     Answer(std::string(json::parse(q.body()).at("rid").as_string()));
                   }
                   w->Reply(net::MakeResponse(q, http::status::ok, "", "text/plain"));
                 });
    }
    StatusOr<std::unique_ptr<net::HttpServer>> server =
        net::HttpServer::Start({}, router.AsHandler());
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  ~FakeEngine() { server_->Shutdown(0ms); }

  // While set, GET /metrics is accepted and never answered (a stalled engine).
  void StallMetrics(bool stall) { stall_metrics_.store(stall); }
  // While set, an abort does not end the held request it names (a hung engine).
  void SetHung(bool hung) { hung_.store(hung); }
  // While unset, nothing is recorded (soak tests: the engine's memory stays flat).
  void SetRecording(bool record) { record_.store(record); }

  std::string base_url() const { return server_->base_url(); }
  std::vector<Received> generates() const {
    std::lock_guard<std::mutex> lock(mu_);
    return generates_;
  }
  std::vector<std::pair<std::string, std::string>> control() const {
    std::lock_guard<std::mutex> lock(mu_);
    return control_;
  }
  size_t held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  // Answers the held request `rid` (the oldest one when empty); false when none.
  bool Answer(const std::string& rid = "") {
    Held held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find_if(held_.begin(), held_.end(),
                             [&rid](const Held& h) { return rid.empty() || h.rid == rid; });
      if (it == held_.end()) return false;
      held = std::move(*it);
      held_.erase(it);
    }
    held.writer->Reply(net::MakeResponse(*held.request, http::status::ok, ResponseBody(held.rid)));
    return true;
  }

 private:
  struct Held {
    std::string rid;
    std::shared_ptr<net::Request> request;
    std::shared_ptr<net::ResponseWriter> writer;
  };
  static std::string ResponseBody(const std::string& rid) {
    return R"({"text":"","output_ids":[],"meta_info":{"id":")" + rid +
           R"(","finish_reason":null}})";
  }

  const bool hold_;
  const int64_t capacity_;
  std::atomic<bool> stall_metrics_{false};
  std::atomic<bool> hung_{false};
  std::atomic<bool> record_{true};
  std::vector<std::shared_ptr<net::ResponseWriter>> stalled_;  // Guarded by mu_.
  mutable std::mutex mu_;
  std::vector<Received> generates_;
  std::vector<std::pair<std::string, std::string>> control_;
  std::deque<Held> held_;
  std::unique_ptr<net::HttpServer> server_;
};

inline EngineEmulatorOptions EngineOptions() {
  EngineEmulatorOptions options;
  options.runtime.paced = false;
  options.runtime.engine.kv_pool.tokens_per_block = 16;
  options.runtime.engine.kv_pool.max_total_tokens = 16384;
  options.runtime.enable_session_radix_cache = true;
  options.runtime.engine.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  options.runtime.radix_eviction_policy = RadixEvictionPolicy::kPriority;
  options.runtime.engine.tp = 2;
  return options;
}

struct Fleet {
  std::vector<std::unique_ptr<EngineEmulator>> engines;
  std::unique_ptr<RouterEmulator> router;
};

inline Fleet StartFleet(int n, const std::string& policy,
                        EngineEmulatorOptions engine_options = EngineOptions()) {
  Fleet fleet;
  RouterEmulatorOptions router_options;
  router_options.policy = routing::ParseRouterPolicy(policy).value();
  router_options.health_check_interval = 0ms;
  for (int i = 0; i < n; ++i) {
    StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(engine_options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    router_options.worker_urls.push_back((*engine)->base_url());
    fleet.engines.push_back(*std::move(engine));
  }
  StatusOr<std::unique_ptr<RouterEmulator>> router = RouterEmulator::Start(router_options);
  EXPECT_TRUE(router.ok()) << router.status();
  fleet.router = *std::move(router);
  return fleet;
}

// Log lines of a gateway, for assertions on what is (not) logged.
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  LogSink Sink() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.emplace_back(line);
    };
  }
};

inline GatewayOptions BaseOptions(LogCapture& logs) {
  GatewayOptions options;
  options.log = logs.Sink();
  options.upstream.header_timeout = 15s;
  return options;
}

inline std::unique_ptr<Gateway> StartGateway(GatewayOptions options,
                                             std::shared_ptr<AdmissionBackend> backend = nullptr) {
  StatusOr<std::unique_ptr<Gateway>> gateway =
      Gateway::Start(std::move(options), std::move(backend));
  EXPECT_TRUE(gateway.ok()) << gateway.status();
  return gateway.ok() ? *std::move(gateway) : nullptr;
}

// Admission through a LocalAdmission whose ledger fits one 600-token request of a 1000-token
// engine at a time.
struct AdmissionSetup {
  std::unique_ptr<FakeEngine> engine;
  std::shared_ptr<LocalAdmission> admission;
  std::unique_ptr<Gateway> gateway;
  LogCapture logs;

  // `max_wait_s`: --agentic-admission-max-wait-s (the seed's default unless a test ages
  // waiters).
  // `policy`: --agentic-admission-policy.
  // `capacity`: the engine's KV tokens (the ceiling: headroom 1). `tweak`: changes to the
  // gateway's options before it starts.
  explicit AdmissionSetup(
      double max_wait_s = control::AgenticOptions().agentic_admission_max_wait_s,
      control::AdmissionPolicy policy = control::AdmissionPolicy::kSeed, int64_t capacity = 1000,
      const std::function<void(GatewayOptions&)>& tweak = {}) {
    engine = std::make_unique<FakeEngine>(/*hold=*/true, capacity);
    control::AgenticOptions agentic;
    agentic.agentic_program_admission = true;
    agentic.agentic_admission_policy = policy;
    agentic.agentic_admission_headroom = 1.0;
    agentic.agentic_admission_max_wait_s = max_wait_s;
    agentic.poll_interval_s = 0.05;
    agentic.staleness_s = 5.0;
    LocalAdmissionOptions local;
    local.agentic = agentic;
    StatusOr<std::unique_ptr<LocalAdmission>> created = LocalAdmission::Create(local);
    EXPECT_TRUE(created.ok()) << created.status();
    admission = std::shared_ptr<LocalAdmission>(*std::move(created));
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = {engine->base_url()};
    options.agentic = agentic;
    if (tweak) tweak(options);
    gateway = StartGateway(options, admission);
    EXPECT_TRUE(WaitFor([this] { return !admission->degraded(); }));
  }
  ~AdmissionSetup() {
    while (engine->Answer()) {
    }
    gateway->Shutdown(2s);
  }
  static std::string Body(const std::string& rid) {
    return R"({"input_ids": )" + InputIds(1, 100) +
           R"(, "sampling_params": {"max_new_tokens": 500}, "rid": ")" + rid + "\"}";
  }
  // A /generate body of session `session` with `prompt` token ids and `max_new` output tokens.
  static std::string SessionBody(const std::string& rid, const std::string& session, int64_t prompt,
                                 int64_t max_new) {
    return R"({"input_ids": )" + InputIds(1, prompt) +
           R"(, "sampling_params": {"max_new_tokens": )" + std::to_string(max_new) +
           R"(}, "rid": ")" + rid + R"(", "session_id": ")" + session + "\"}";
  }
};

// The base URL of a port where nothing listens any more: a server bound to an ephemeral port,
// then shut down.
inline std::string DeadUrl() {
  StatusOr<std::unique_ptr<net::HttpServer>> server =
      net::HttpServer::Start({}, net::Router().AsHandler());
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return "http://127.0.0.1:1";
  const std::string url = (*server)->base_url();
  (*server)->Shutdown(0ms);
  return url;
}

inline std::vector<std::string> EngineUrls(const Fleet& fleet) {
  std::vector<std::string> urls;
  for (const auto& engine : fleet.engines) urls.push_back(engine->base_url());
  return urls;
}

inline std::shared_ptr<LocalAdmission> StartLocalAdmission(const control::AgenticOptions& agentic) {
  LocalAdmissionOptions local;
  local.agentic = agentic;
  StatusOr<std::unique_ptr<LocalAdmission>> created = LocalAdmission::Create(local);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::shared_ptr<LocalAdmission>(*std::move(created)) : nullptr;
}

// One agentic_kv series of `backend` now, without resetting the step; 0 when absent (a
// counter at zero is not reported).
inline double Series(AdmissionBackend& backend, std::string_view name) {
  for (const auto& [series, value] : backend.StepMetrics(/*reset_step=*/false)) {
    if (series == name) return value;
  }
  return 0.0;
}

// The end of every fault test: each lease returned, no waiter left, the bookkeeping
// consistent.
inline void ExpectLedgerAtRest(LocalAdmission& admission) {
  EXPECT_TRUE(WaitFor([&] { return admission.reserved() == 0 && admission.lease_count() == 0; }))
      << admission.reserved() << " tokens still reserved by " << admission.lease_count()
      << " leases";
  EXPECT_EQ(admission.waiting(), 0);
  const Status invariants = admission.CheckInvariants();
  EXPECT_TRUE(invariants.ok()) << invariants;
}

// A small /generate an emulated engine answers at once.
inline std::string SmallGenerate(const std::string& rid) {
  return R"({"input_ids": )" + InputIds(1, 32) +
         R"(, "sampling_params": {"max_new_tokens": 4}, "rid": ")" + rid + "\"}";
}

inline bool Logged(LogCapture& logs, std::string_view needle) {
  std::lock_guard<std::mutex> lock(logs.mu);
  return std::any_of(logs.lines.begin(), logs.lines.end(), [needle](const std::string& line) {
    return line.find(needle) != std::string::npos;
  });
}

// Sets `faults` (a POST /agentkv/faults body; "{}" clears them) on every engine of `fleet`.
inline void InjectFaults(net::HttpClient& client, const Fleet& fleet, const std::string& faults) {
  for (const auto& engine : fleet.engines) {
    ASSERT_EQ(Post(client, engine->base_url(), "/agentkv/faults", faults).status, 200);
  }
}

}  // namespace agentkv::service::gateway_testing

#endif  // AGENTKV_TESTS_INTEGRATION_GATEWAY_TEST_SUPPORT_H_
