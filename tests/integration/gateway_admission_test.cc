// End-to-end tests of the agentkv gateway's admission on 127.0.0.1: requests queue beyond the
// budget and are admitted in order as leases return, a client leaving or a close cancels a
// wait, shutdown drains; and under faults (a dead router, stalled engine metrics, a coordinator
// restart) admission fails open and recovers.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/net/http_client.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/admission/admission_remote.h"
#include "agentkv/service/coordinator/coordinator_server.h"
#include "agentkv/service/gateway/gateway.h"
#include "gateway_test_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
namespace http = net::http;
namespace json = boost::json;

TEST(GatewayTest, AdmissionQueuesBeyondTheBudgetAndAdmitsFifoAsLeasesReturn) {
  AdmissionSetup setup;
  ASSERT_NE(setup.gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::vector<std::promise<StatusOr<net::ClientResponse>>> answers(3);
  auto send = [&](int i, const std::string& rid) {
    client.AsyncRequest(
        http::verb::post, setup.gateway->base_url(), "/generate",
        {{"Content-Type", "application/json"}}, AdmissionSetup::Body(rid),
        [&answers, i](StatusOr<net::ClientResponse> r) { answers[i].set_value(std::move(r)); });
  };
  send(0, "a");
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  send(1, "b");
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }));
  send(2, "c");
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 2; }));
  EXPECT_EQ(setup.gateway->stats().awaiting_admission, 2);
  EXPECT_EQ(setup.admission->reserved(), 600);
  const std::string metrics =
      Call(client, http::verb::get, setup.gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("agentic_kv_admission_waiting 2.0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("agentic_kv_budget_ceiling 1000.0"), std::string::npos) << metrics;

  for (const char* next : {"b:0", "c:0"}) {
    ASSERT_TRUE(setup.engine->Answer());  // The running request ends; its lease returns.
    ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; })) << next;
    EXPECT_EQ(setup.engine->generates().back().rid, next);
  }
  ASSERT_TRUE(setup.engine->Answer());
  for (auto& answer : answers) {
    auto future = answer.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    StatusOr<net::ClientResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
  }
  EXPECT_TRUE(WaitFor(
      [&] { return setup.admission->reserved() == 0 && setup.admission->lease_count() == 0; }));
  // The answer is written before the exchange's bookkeeping ends.
  EXPECT_TRUE(WaitFor([&] { return setup.gateway->stats().in_flight == 0; }));
  const json::value series =
      json::parse(Call(client, http::verb::get, setup.gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/admission/admit").as_double(), 1.0);
  EXPECT_EQ(series.at("agentic_kv/admission/wait").as_double(), 2.0);
}

// Admission v2 in front of an unmodified engine: a continuing session reserves only what its
// last prompt did not hold and goes before a new session's first request; a shared prefix
// named by the client is reserved once; a request no engine can hold is refused at once.
TEST(GatewayTest, AdmissionV2ReservesUncachedTokensAndFinishesProgramsFirst) {
  AdmissionSetup setup(/*max_wait_s=*/30, control::AdmissionPolicy::kV2);
  ASSERT_NE(setup.gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::map<std::string, std::promise<StatusOr<net::ClientResponse>>> answers;
  auto send = [&](const std::string& rid, const std::string& body, net::HeaderList headers = {}) {
    headers.emplace_back("Content-Type", "application/json");
    client.AsyncRequest(
        http::verb::post, setup.gateway->base_url(), "/generate", std::move(headers), body,
        [&answers, rid](StatusOr<net::ClientResponse> r) { answers[rid].set_value(std::move(r)); });
  };
  auto expect_ok = [&](const std::string& rid) {
    auto future = answers[rid].get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready) << rid;
    StatusOr<net::ClientResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << rid << ": " << r->body;
  };
  for (const char* rid : {"s1", "s2", "t1", "s3", "p1", "p2"}) answers[rid];
  // s's first request reserves its whole prompt plus decode.
  send("s1", AdmissionSetup::SessionBody("s1", "s", 100, 500));
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  EXPECT_EQ(setup.admission->reserved(), 600);
  ASSERT_TRUE(setup.engine->Answer("s1:0"));
  expect_ok("s1");
  ASSERT_TRUE(WaitFor([&] { return setup.admission->reserved() == 0; }));
  // Its second reserves the 50 new prompt tokens plus decode.
  send("s2", AdmissionSetup::SessionBody("s2", "s", 150, 500));
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  EXPECT_EQ(setup.admission->reserved(), 550);
  // A new session's first (600) waits; s's next (10 + 500) arrives later and goes first.
  send("t1", AdmissionSetup::SessionBody("t1", "t", 100, 500));
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }));
  send("s3", AdmissionSetup::SessionBody("s3", "s", 160, 500));
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 2; }));
  ASSERT_TRUE(setup.engine->Answer("s2:0"));
  expect_ok("s2");
  ASSERT_TRUE(
      WaitFor([&] { return setup.engine->held() == 1 && setup.admission->waiting() == 1; }));
  EXPECT_EQ(setup.engine->generates().back().rid, "s3:0");
  EXPECT_EQ(setup.admission->reserved(), 510);
  ASSERT_TRUE(setup.engine->Answer("s3:0"));
  expect_ok("s3");
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  EXPECT_EQ(setup.engine->generates().back().rid, "t1:0");
  ASSERT_TRUE(setup.engine->Answer("t1:0"));
  expect_ok("t1");
  ASSERT_TRUE(WaitFor([&] { return setup.admission->reserved() == 0; }));
  // Two new sessions naming one 80-token prefix reserve it once: 80 + 2 x (20 + 100).
  const net::HeaderList prefix = {{"X-Agentkv-Prefix-Key", "group-1"},
                                  {"X-Agentkv-Prefix-Tokens", "80"}};
  send("p1", AdmissionSetup::SessionBody("p1", "p1", 100, 100), prefix);
  send("p2", AdmissionSetup::SessionBody("p2", "p2", 100, 100), prefix);
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 2; }));
  EXPECT_EQ(setup.admission->reserved(), 320);
  ASSERT_TRUE(setup.engine->Answer());
  ASSERT_TRUE(setup.engine->Answer());
  expect_ok("p1");
  expect_ok("p2");
  // More than the engine's whole KV: refused at once, naming the value and the limit.
  const net::ClientResponse huge = Post(client, setup.gateway->base_url(), "/generate",
                                        AdmissionSetup::SessionBody("u1", "u", 900, 200));
  EXPECT_EQ(huge.status, 400);
  EXPECT_NE(huge.body.find("1100 tokens"), std::string::npos) << huge.body;
  EXPECT_NE(huge.body.find("1000 tokens of KV"), std::string::npos) << huge.body;
  EXPECT_TRUE(WaitFor(
      [&] { return setup.admission->reserved() == 0 && setup.admission->lease_count() == 0; }));
  EXPECT_EQ(setup.admission->waiting(), 0);
}

TEST(GatewayTest, AClientLeavingWhileQueuedCancelsItsWait) {
  AdmissionSetup setup;
  ASSERT_NE(setup.gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::promise<StatusOr<net::ClientResponse>> first;
  client.AsyncRequest(http::verb::post, setup.gateway->base_url(), "/generate",
                      {{"Content-Type", "application/json"}}, AdmissionSetup::Body("a"),
                      [&first](StatusOr<net::ClientResponse> r) { first.set_value(std::move(r)); });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  {
    net::HttpClient leaving(ClientOptions());
    leaving.AsyncRequest(http::verb::post, setup.gateway->base_url(), "/generate",
                         {{"Content-Type", "application/json"}}, AdmissionSetup::Body("b"),
                         [](StatusOr<net::ClientResponse>) {});
    ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }));
  }  // The client is destroyed: its connection closes while the request waits.
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 0; }));
  ASSERT_TRUE(WaitFor([&] { return setup.gateway->stats().in_flight == 1; }));
  EXPECT_EQ(setup.gateway->stats().awaiting_admission, 0);
  ASSERT_TRUE(setup.engine->Answer());
  auto future = first.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get()->status, 200);
  EXPECT_EQ(setup.engine->generates().size(), 1u)
      << "the cancelled request never reached the engine";
  EXPECT_TRUE(WaitFor([&] { return setup.admission->reserved() == 0; }));
  const json::value series =
      json::parse(Call(client, http::verb::get, setup.gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/admission/cancelled").as_double(), 1.0);
  const std::string metrics =
      Call(client, http::verb::get, setup.gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("code=\"499\"} 1.0"), std::string::npos) << metrics;
}

TEST(GatewayTest, ClosingASessionCancelsItsRequestWaitingForAdmission) {
  AdmissionSetup setup;
  ASSERT_NE(setup.gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::vector<std::promise<StatusOr<net::ClientResponse>>> answers(2);
  for (int i = 0; i < 2; ++i) {
    client.AsyncRequest(
        http::verb::post, setup.gateway->base_url(), "/generate",
        {{"Content-Type", "application/json"}, {"X-Session-Id", i == 0 ? "busy" : "waiting"}},
        AdmissionSetup::Body(i == 0 ? "a" : "b"),
        [&answers, i](StatusOr<net::ClientResponse> r) { answers[i].set_value(std::move(r)); });
    if (i == 0) {
      ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
    }
  }
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }));
  const net::ClientResponse closed =
      Post(client, setup.gateway->base_url(), "/v1/sessions/waiting/close", "");
  ASSERT_EQ(closed.status, 200);
  EXPECT_EQ(json::parse(closed.body).at("aborted").as_int64(), 0);
  auto cancelled = answers[1].get_future();
  ASSERT_EQ(cancelled.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(cancelled.get()->status, 409);
  EXPECT_EQ(setup.admission->waiting(), 0);
  ASSERT_TRUE(setup.engine->Answer());
  auto running = answers[0].get_future();
  ASSERT_EQ(running.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(running.get()->status, 200);
  EXPECT_EQ(setup.engine->generates().size(), 1u);
  EXPECT_TRUE(WaitFor([&] { return setup.admission->reserved() == 0; }));
}

TEST(GatewayTest, ShutdownCancelsQueuedRequestsAndLetsInFlightOnesFinish) {
  AdmissionSetup setup;
  ASSERT_NE(setup.gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::vector<std::promise<StatusOr<net::ClientResponse>>> answers(2);
  for (int i = 0; i < 2; ++i) {
    client.AsyncRequest(
        http::verb::post, setup.gateway->base_url(), "/generate",
        {{"Content-Type", "application/json"}}, AdmissionSetup::Body(i == 0 ? "a" : "b"),
        [&answers, i](StatusOr<net::ClientResponse> r) { answers[i].set_value(std::move(r)); });
    if (i == 0) {
      ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
    }
  }
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }));
  const std::string base = setup.gateway->base_url();
  std::thread stopper([&] { setup.gateway->Shutdown(10s); });
  auto queued = answers[1].get_future();
  ASSERT_EQ(queued.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(queued.get()->status, 503);
  // The in-flight request holds the HTTP server's drain open; meanwhile its listener still
  // answers /health 503 (it used to refuse connections once the drain began).
  net::HttpClient probe(ClientOptions());
  for (const auto until = std::chrono::steady_clock::now() + 500ms;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms)) {
    const StatusOr<net::ClientResponse> health = probe.Request(http::verb::get, base, "/health");
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(health->status, 503);
    EXPECT_EQ(health->body, R"({"status":"shutting_down"})");
  }
  ASSERT_TRUE(setup.engine->Answer());
  auto running = answers[0].get_future();
  ASSERT_EQ(running.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(running.get()->status, 200);
  stopper.join();
  EXPECT_EQ(setup.engine->generates().size(), 1u);
  EXPECT_EQ(setup.admission->reserved(), 0);
}

// ---- Faults: admission fails open, and recovers ----

// The gateway's admission backend asking `coordinator` (RemoteAdmission), or null (with a
// test failure) when it cannot be built.
std::shared_ptr<RemoteAdmission> RemoteBackendOver(const CoordinatorServer& coordinator,
                                                   double max_wait_s) {
  RemoteAdmissionOptions remote_options;
  remote_options.coordinator_url = coordinator.base_url();
  remote_options.max_wait_s = max_wait_s;
  StatusOr<std::unique_ptr<RemoteAdmission>> remote = RemoteAdmission::Create(remote_options);
  EXPECT_TRUE(remote.ok()) << remote.status();
  if (!remote.ok()) return nullptr;
  return std::shared_ptr<RemoteAdmission>(*std::move(remote));
}

// A gateway in front of `fleet`'s engines with admission on and no metrics polling of its own:
// the coordinator polls the fleet, as in gateway_command.
GatewayOptions CoordinatedGatewayOptions(LogCapture& logs, const Fleet& fleet) {
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_program_admission = true;
  options.poll_fleet_metrics = false;
  return options;
}

// Relax's deployment: the gateway sends the data path straight to the engines and asks a
// shared coordinator for admission. The coordinator's router is unreachable, so it never gets
// a capacity signal: every acquire is answered bypass `degraded` (admission fails open) and
// every request, concurrent or not, still completes on the engines.
TEST(GatewayTest, AnUnreachableRouterDegradesTheCoordinatorAndEveryRequestBypassesAndCompletes) {
  Fleet fleet = StartFleet(2, "round_robin");  // Only its engines are used.
  LogCapture coordinator_logs;
  CoordinatorOptions coordinator_options;
  coordinator_options.router_url = DeadUrl();
  coordinator_options.agentic.poll_interval_s = 0.1;
  coordinator_options.agentic.staleness_s = 1.0;
  coordinator_options.metrics_timeout_s = 0.4;
  coordinator_options.log = coordinator_logs.Sink();
  StatusOr<std::unique_ptr<CoordinatorServer>> started =
      CoordinatorServer::Start(coordinator_options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<CoordinatorServer> coordinator = *std::move(started);
  ASSERT_TRUE(WaitFor([&] { return coordinator->polls() >= 2; }));
  EXPECT_TRUE(coordinator->admission().degraded());
  EXPECT_TRUE(Logged(coordinator_logs, "event=engine_discovery_failed"));

  std::shared_ptr<RemoteAdmission> backend =
      RemoteBackendOver(*coordinator, coordinator_options.agentic.agentic_admission_max_wait_s);
  ASSERT_NE(backend, nullptr);
  LogCapture logs;
  const GatewayOptions options = CoordinatedGatewayOptions(logs, fleet);
  auto gateway = StartGateway(options, backend);
  ASSERT_NE(gateway, nullptr);
  EXPECT_TRUE(gateway->admission_enabled());

  // Four at once, then four one after the other.
  std::vector<std::promise<StatusOr<net::ClientResponse>>> answers(4);
  net::HttpClient client(ClientOptions());
  for (int i = 0; i < 4; ++i) {
    client.AsyncRequest(
        http::verb::post, gateway->base_url(), "/generate", {{"Content-Type", "application/json"}},
        SmallGenerate("burst-" + std::to_string(i)),
        [&answers, i](StatusOr<net::ClientResponse> r) { answers[i].set_value(std::move(r)); });
  }
  for (auto& answer : answers) {
    auto future = answer.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    StatusOr<net::ClientResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
  }
  for (int i = 0; i < 4; ++i) {
    const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                       SmallGenerate("serial-" + std::to_string(i)));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // Round robin over the engines, each request exactly once.
  for (const auto& engine : fleet.engines)
    EXPECT_EQ(engine->runtime().Snapshot().num_requests_total, 4) << engine->base_url();

  // Each decision was the coordinator's answer, not a transport failure of the client.
  EXPECT_EQ(backend->failures().total(), 0);
  LocalAdmission& ledger = coordinator->admission();
  EXPECT_EQ(Series(ledger, control::kBypassDegradedMetric), 8.0);
  EXPECT_EQ(Series(ledger, control::kBypassMetric), 8.0);
  EXPECT_EQ(Series(ledger, control::kAdmitMetric), 0.0);
  EXPECT_EQ(Series(ledger, control::kWaitMetric), 0.0);
  EXPECT_EQ(Series(ledger, control::kDegradedRateMetric), 1.0);
  EXPECT_EQ(Series(ledger, control::kDegradedMetric), 1.0);
  EXPECT_EQ(Series(ledger, control::kReservedMetric), 0.0);
  EXPECT_EQ(Series(ledger, control::kLeaseCountMetric), 0.0);
  // The gateway's /agentic_kv shows the coordinator's series.
  const json::value series =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at(std::string(control::kBypassDegradedMetric)).as_double(), 8.0);
  EXPECT_EQ(series.at(std::string(control::kDegradedMetric)).as_double(), 1.0);
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }));
  ExpectLedgerAtRest(ledger);
  gateway->Shutdown(2s);
  coordinator->Shutdown(1s);
}

// In-process admission with the router down: discovery fails, so the ledger has no capacity
// and stays degraded. Under --prerequisite-policy refuse the gateway does not start (no
// engine to check); under disable it starts, requests bypass admission, and forwarding to the
// dead router fails at once with 502, streamed or not, holding nothing in the ledger.
TEST(GatewayTest, ADeadRouterWithLocalAdmissionAnswers502AtOnceAndReservesNothing) {
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = DeadUrl();
  options.agentic.agentic_program_admission = true;
  options.agentic.poll_interval_s = 0.05;
  options.agentic.staleness_s = 1.0;
  options.control_timeout_s = 0.5;
  options.metrics_timeout_s = 0.4;
  std::shared_ptr<LocalAdmission> admission = StartLocalAdmission(options.agentic);
  ASSERT_NE(admission, nullptr);
  StatusOr<std::unique_ptr<Gateway>> refused = Gateway::Start(options, admission);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();

  options.prerequisite_policy = PrerequisitePolicy::kDisable;
  auto gateway = StartGateway(options, admission);
  ASSERT_NE(gateway, nullptr);
  EXPECT_TRUE(gateway->admission_enabled());
  EXPECT_TRUE(admission->degraded());
  EXPECT_TRUE(Logged(logs, "event=engine_discovery_failed"));

  net::HttpClient client(ClientOptions());
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/generate", SmallGenerate("plain")},
           {"/generate", R"({"input_ids": [1, 2, 3], "stream": true})"},
           {"/v1/chat/completions",
            R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})"}}) {
    const net::ClientResponse r = Post(client, gateway->base_url(), path, body);
    EXPECT_EQ(r.status, 502) << path << " " << r.body;
    EXPECT_TRUE(protocol::ParseErrorMessage(r.body).has_value()) << r.body;
  }
  EXPECT_TRUE(Logged(logs, "event=upstream_failed"));
  EXPECT_EQ(Series(*admission, control::kBypassDegradedMetric), 3.0);
  EXPECT_EQ(Series(*admission, control::kAdmitMetric), 0.0);
  EXPECT_EQ(Series(*admission, control::kDegradedMetric), 1.0);
  EXPECT_TRUE(admission->degraded());
  // The answer is written before the exchange's bookkeeping (and its metrics) ends.
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }));
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("agentkv_gateway_requests_total{route=\"/generate\",code=\"502\"} 2.0"),
            std::string::npos)
      << metrics;
  ExpectLedgerAtRest(*admission);
  gateway->Shutdown(2s);
}

// Engines whose /metrics stalls past the control timeout make every scrape fail, so the
// ledger goes degraded and requests bypass admission (and still complete). When the scrapes
// answer again, the ledger recovers and requests are admitted with a lease again.
TEST(GatewayTest, StalledEngineMetricsDegradeAdmissionToBypassUntilTheScrapesRecover) {
  Fleet fleet = StartFleet(2, "round_robin");  // Only its engines are used.
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_program_admission = true;
  options.agentic.poll_interval_s = 0.05;
  options.agentic.staleness_s = 1.0;
  options.metrics_timeout_s = 0.4;  // A scrape stalled for 2 s fails after 0.4 s.
  std::shared_ptr<LocalAdmission> admission = StartLocalAdmission(options.agentic);
  ASSERT_NE(admission, nullptr);
  auto gateway = StartGateway(options, admission);
  ASSERT_NE(gateway, nullptr);
  ASSERT_TRUE(WaitFor([&] { return !admission->degraded(); }));
  net::HttpClient client(ClientOptions());

  // Healthy: admitted with a lease.
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("before")).status, 200);
  EXPECT_EQ(Series(*admission, control::kAdmitMetric), 1.0);
  EXPECT_EQ(Series(*admission, control::kBypassMetric), 0.0);
  EXPECT_GT(Series(*admission, control::kCeilingMetric), 0.0);

  InjectFaults(client, fleet, R"({"metrics_delay_ms": 2000})");
  // The poll under way may have scraped an engine before its fault; the one after it cannot.
  const int64_t polls_at_fault = gateway->stats().polls;
  ASSERT_TRUE(WaitFor(
      [&] { return admission->degraded() && gateway->stats().polls >= polls_at_fault + 2; }, 10s))
      << "the ledger did not degrade";
  for (const auto& engine : fleet.engines) {
    EXPECT_TRUE(Logged(logs, "event=metrics_scrape_failed engine=" + engine->base_url()));
  }
  for (int i = 0; i < 3; ++i) {
    const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                       SmallGenerate("stalled-" + std::to_string(i)));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(Series(*admission, control::kBypassDegradedMetric), 3.0);
  EXPECT_EQ(Series(*admission, control::kAdmitMetric), 1.0);
  EXPECT_EQ(Series(*admission, control::kDegradedMetric), 1.0);
  // Bypassed requests hold no lease (the first request's lease returns when it ends).
  EXPECT_TRUE(WaitFor([&] { return admission->reserved() == 0; }));

  InjectFaults(client, fleet, "{}");
  ASSERT_TRUE(WaitFor([&] { return !admission->degraded(); }, 10s)) << "the ledger did not recover";
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("after")).status, 200);
  EXPECT_EQ(Series(*admission, control::kAdmitMetric), 2.0);
  EXPECT_EQ(Series(*admission, control::kBypassDegradedMetric), 3.0);
  EXPECT_EQ(Series(*admission, control::kDegradedMetric), 0.0);
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }));
  ExpectLedgerAtRest(*admission);
  gateway->Shutdown(2s);
}

// The aged bypass through the gateway: a request queued behind a lease that is not returned
// is dispatched without a lease once it has waited --agentic-admission-max-wait-s, while the
// request holding the lease still runs.
TEST(GatewayTest, AQueuedRequestIsDispatchedAgedAtMaxWaitWhileTheLeaseIsStillHeld) {
  AdmissionSetup setup(/*max_wait_s=*/0.3);
  ASSERT_NE(setup.gateway, nullptr);
  std::vector<std::promise<StatusOr<net::ClientResponse>>> answers(2);
  net::HttpClient client(ClientOptions());
  auto send = [&](int i, const std::string& rid) {
    client.AsyncRequest(
        http::verb::post, setup.gateway->base_url(), "/generate",
        {{"Content-Type", "application/json"}}, AdmissionSetup::Body(rid),
        [&answers, i](StatusOr<net::ClientResponse> r) { answers[i].set_value(std::move(r)); });
  };
  send(0, "a");
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }));
  const auto queued_at = std::chrono::steady_clock::now();
  send(1, "b");  // 600 + 600 tokens exceed the 1000-token budget: b waits.
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 2; }))
      << "the waiter was never dispatched";
  EXPECT_GE(std::chrono::steady_clock::now() - queued_at, 300ms) << "dispatched before max_wait";
  const auto generates = setup.engine->generates();
  ASSERT_EQ(generates.size(), 2u);
  EXPECT_EQ(generates[0].rid, "a:0");
  EXPECT_EQ(generates[1].rid, "b:0");
  // a still holds its lease; b runs beside it without one.
  EXPECT_EQ(setup.admission->reserved(), 600);
  EXPECT_EQ(setup.admission->lease_count(), 1);
  EXPECT_EQ(setup.admission->waiting(), 0);
  EXPECT_EQ(Series(*setup.admission, control::kAdmitMetric), 1.0);
  EXPECT_EQ(Series(*setup.admission, control::kWaitMetric), 1.0);
  EXPECT_EQ(Series(*setup.admission, control::kBypassAgedMetric), 1.0);
  EXPECT_EQ(Series(*setup.admission, control::kBypassMetric), 1.0);
  EXPECT_EQ(Series(*setup.admission, control::kBypassDegradedMetric), 0.0);

  ASSERT_TRUE(setup.engine->Answer("b:0"));
  ASSERT_TRUE(setup.engine->Answer("a:0"));
  for (auto& answer : answers) {
    auto future = answer.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    StatusOr<net::ClientResponse> r = future.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
  }
  EXPECT_TRUE(WaitFor([&] { return setup.gateway->stats().in_flight == 0; }));
  ExpectLedgerAtRest(*setup.admission);
}

// Several gateways share one coordinator; it restarts. While it is down the gateway's remote
// backend fails open (every request bypasses `degraded` and still completes, the failures are
// counted); once a coordinator serves the same address again, requests are admitted through
// it again, with no restart of the gateway.
TEST(GatewayTest, ACoordinatorRestartMakesTheGatewayFailOpenAndThenAdmitAgain) {
  Fleet fleet = StartFleet(2, "round_robin");  // Only its engines are used.
  LogCapture coordinator_logs;
  CoordinatorOptions coordinator_options;
  coordinator_options.engine_urls = EngineUrls(fleet);
  coordinator_options.agentic.poll_interval_s = 0.1;
  coordinator_options.agentic.staleness_s = 1.0;
  coordinator_options.metrics_timeout_s = 0.4;
  coordinator_options.log = coordinator_logs.Sink();
  auto start_coordinator = [&]() -> std::unique_ptr<CoordinatorServer> {
    StatusOr<std::unique_ptr<CoordinatorServer>> started =
        CoordinatorServer::Start(coordinator_options);
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return nullptr;
    std::unique_ptr<CoordinatorServer> coordinator = *std::move(started);
    EXPECT_TRUE(WaitFor([&] { return !coordinator->admission().degraded(); }));
    return coordinator;
  };
  std::unique_ptr<CoordinatorServer> coordinator = start_coordinator();
  ASSERT_NE(coordinator, nullptr);

  std::shared_ptr<RemoteAdmission> backend =
      RemoteBackendOver(*coordinator, coordinator_options.agentic.agentic_admission_max_wait_s);
  ASSERT_NE(backend, nullptr);
  LogCapture logs;
  const GatewayOptions options = CoordinatedGatewayOptions(logs, fleet);
  auto gateway = StartGateway(options, backend);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());

  // Up: admitted through the coordinator.
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("before")).status, 200);
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }));
  EXPECT_EQ(Series(coordinator->admission(), control::kAdmitMetric), 1.0);
  ExpectLedgerAtRest(coordinator->admission());
  EXPECT_EQ(backend->failures().total(), 0);

  // Down: fail open.
  coordinator_options.http.port = coordinator->port();
  coordinator.reset();
  for (const char* rid : {"down-1", "down-2"}) {
    const net::ClientResponse r =
        Post(client, gateway->base_url(), "/generate", SmallGenerate(rid));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_GE(backend->failures().total(), 2);

  // Back on the same address: admitted again, once the breaker (if the failed heartbeats
  // opened it) closed on the first answered heartbeat after its cool-down.
  coordinator = start_coordinator();
  ASSERT_NE(coordinator, nullptr);
  ASSERT_TRUE(WaitFor([&] { return !backend->breaker().open; }, 10s));
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("after")).status, 200);
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }));
  EXPECT_EQ(Series(coordinator->admission(), control::kAdmitMetric), 1.0);
  EXPECT_EQ(Series(coordinator->admission(), control::kBypassMetric), 0.0);
  ExpectLedgerAtRest(coordinator->admission());
  int64_t generated = 0;
  for (const auto& engine : fleet.engines)
    generated += engine->runtime().Snapshot().num_requests_total;
  EXPECT_EQ(generated, 4);
  gateway->Shutdown(2s);
}

}  // namespace
}  // namespace agentkv::service
