// End-to-end tests of the agentkv gateway on 127.0.0.1: clients -> gateway -> sgl-router
// emulator -> engine emulators, plus a small recording engine (FakeEngine) where a test needs
// to hold requests or read exactly what an engine received.
#include "agentkv/service/gateway/gateway.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
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
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/admission/admission_remote.h"
#include "agentkv/service/coordinator/coordinator_server.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "gateway_test_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
namespace http = net::http;
namespace json = boost::json;

TEST(GatewayTest, SessionTurnsCarryTheSessionAndCloseReleasesItsKvOnEveryEngine) {
  Fleet fleet = StartFleet(3, "consistent_hashing");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.router_policy = SglRouterPolicy::kConsistentHashing;
  options.agentic.agentic_session_lifecycle = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  EXPECT_TRUE(gateway->lifecycle_enabled());
  net::HttpClient client(ClientOptions());

  for (int turn = 0; turn < 2; ++turn) {
    const std::string body = R"({"input_ids": )" + InputIds(1, 200 + 64 * turn) +
                             R"(, "sampling_params": {"max_new_tokens": 8}, "rid": "turn-)" +
                             std::to_string(turn) + "\"}";
    const net::ClientResponse r =
        Post(client, gateway->base_url(), "/generate", body, {{"X-Session-Id", "agent-1"}});
    ASSERT_EQ(r.status, 200) << r.body;
    StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->meta_info.id, "turn-" + std::to_string(turn) + ":0");
    if (turn == 1) {
      EXPECT_GT(response->meta_info.cached_tokens, 0);
    }
  }
  // The router saw the session as its routing key and kept it on one engine.
  const net::ClientResponse routed =
      Call(client, http::verb::get, fleet.router->base_url(), "/agentkv/requests");
  std::set<std::string> workers;
  const json::value routed_entries = json::parse(routed.body);
  for (const json::value& entry : routed_entries.as_array()) {
    EXPECT_EQ(entry.at("routing_key").as_string(), "agent-1");
    workers.insert(std::string(entry.at("worker").as_string()));
  }
  ASSERT_EQ(workers.size(), 1u);
  const std::string holder = *workers.begin();
  const double available_before = Gauges(client, holder).at("sglang:kv_available_tokens");

  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/agent-1/close", "");
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"agent-1","closed":true,"aborted":0})"));
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "agent-1"), 1) << engine->base_url();
  }
  // Only a session-tagged request makes the close release KV: the session_id reached it.
  EXPECT_GT(Gauges(client, holder).at("sglang:kv_available_tokens"), available_before);

  // Idempotent: the same answer, no second fan-out.
  const net::ClientResponse again =
      Post(client, gateway->base_url(), "/v1/sessions/agent-1/close", "");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(json::parse(again.body).at("closed").as_bool(), true);
  for (const auto& engine : fleet.engines)
    EXPECT_EQ(CloseCount(client, engine->base_url(), "agent-1"), 1);
  EXPECT_EQ(gateway->stats().session_close, 1);
  EXPECT_EQ(gateway->stats().session_close_failure, 0);
  const json::value series =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/session/lifecycle_enabled").as_double(), 1.0);
  EXPECT_EQ(series.at("agentic_kv/session/close").as_double(), 1.0);
  const net::ClientResponse health = Call(client, http::verb::get, gateway->base_url(), "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  gateway->Shutdown(2s);
  EXPECT_EQ(Call(client, http::verb::get, fleet.router->base_url(), "/health").status, 200);
}

// GET /v1/models (OpenAI clients call it first) passes through the gateway and the router to an
// engine unchanged: SGLang's model list of the served model.
TEST(GatewayTest, TheModelListPassesThroughFromAnEngine) {
  EngineEmulatorOptions engine_options = EngineOptions();
  engine_options.served_model_name = "org/served-model";
  Fleet fleet = StartFleet(2, "round_robin", engine_options);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.router_policy = SglRouterPolicy::kRoundRobin;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  for (const std::string& base : {fleet.router->base_url(), gateway->base_url()}) {
    StatusOr<net::ClientResponse> r = client.Request(http::verb::get, base, "/v1/models");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << r->body;
    const boost::json::value v = boost::json::parse(r->body);
    EXPECT_EQ(v.at("object").as_string(), "list") << base;
    ASSERT_EQ(v.at("data").as_array().size(), 1U) << base;
    EXPECT_EQ(v.at("data").as_array()[0].at("id").as_string(), "org/served-model") << base;
    EXPECT_EQ(v.at("data").as_array()[0].at("owned_by").as_string(), "sglang") << base;
  }
}

TEST(GatewayTest, StreamsPassThroughChunkByChunkEndingWithDone) {
  Fleet fleet = StartFleet(2, "round_robin");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  for (
      const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
          {"/generate",
           R"({"input_ids": [1,2,3,4,5,6,7,8], "sampling_params": {"max_new_tokens": 5}, "stream": true})"},
          {"/v1/chat/completions",
           R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true})"}}) {
    protocol::SseParser parser;
    std::vector<std::string> events;
    std::promise<Status> done;
    int status = 0;
    client.AsyncStream(
        http::verb::post, gateway->base_url(), path, {{"Content-Type", "application/json"}}, body,
        [&status](int s, const net::HeaderList&) { status = s; },
        [&](std::string_view chunk) {
          for (std::string& e : parser.Feed(chunk)) events.push_back(std::move(e));
        },
        [&done](Status s) { done.set_value(s); });
    auto future = done.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready) << path;
    EXPECT_TRUE(future.get().ok());
    EXPECT_EQ(status, 200);
    EXPECT_TRUE(parser.done()) << path << ": the stream must end with data: [DONE]";
    EXPECT_GE(events.size(), 2u) << path;
  }
  // A non-streamed OpenAI request goes through too.
  const net::ClientResponse completion = Post(client, gateway->base_url(), "/v1/completions",
                                              R"({"prompt": [1, 2, 3], "max_tokens": 2})");
  EXPECT_EQ(completion.status, 200) << completion.body;
}

TEST(GatewayTest, InvalidBodiesAre400AndReachNoEngine) {
  Fleet fleet = StartFleet(2, "round_robin");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.agentic.agentic_session_lifecycle = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/generate", "not json"},
           {"/generate", R"({"text": "a", "input_ids": [1]})"},
           {"/generate", R"({"input_ids": [[1, 2], [3]]})"},
           {"/v1/chat/completions", "[1, 2]"},
           {"/v1/completions", R"({"prompt": "x", "stream": "yes"})"}}) {
    const net::ClientResponse r = Post(client, gateway->base_url(), path, body);
    EXPECT_EQ(r.status, 400) << path << " " << body;
    EXPECT_TRUE(protocol::ParseErrorMessage(r.body).has_value()) << r.body;
  }
  EXPECT_EQ(
      Post(client, gateway->base_url(), "/generate", R"({"text": "a"})", {{"X-Session-Id", "a b"}})
          .status,
      400);
  EXPECT_EQ(Call(client, http::verb::get, fleet.router->base_url(), "/agentkv/requests").body,
            "[]");
  for (const auto& engine : fleet.engines)
    EXPECT_EQ(engine->runtime().Snapshot().num_requests_total, 0);
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("agentkv_gateway_requests_total{route=\"/generate\",code=\"400\"} 4.0"),
            std::string::npos)
      << metrics;
}

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

TEST(GatewayTest, AFailedCloseOnOneEngineStillEndsTheSession) {
  Fleet fleet = StartFleet(2, "round_robin");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.agentic.agentic_session_lifecycle = true;
  std::mutex mu;
  std::vector<bool> hook;
  options.on_session_close = [&](bool ok) {
    std::lock_guard<std::mutex> lock(mu);
    hook.push_back(ok);
  };
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(Post(client, fleet.engines[1]->base_url(), "/agentkv/faults",
                 R"({"close_session_status": 500})")
                .status,
            200);
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate",
                 R"({"input_ids": [1, 2, 3], "session_id": "s-9"})")
                .status,
            200);
  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/s-9/close", "");
  ASSERT_EQ(closed.status, 200);
  EXPECT_EQ(json::parse(closed.body).at("closed").as_bool(), false);
  EXPECT_EQ(CloseCount(client, fleet.engines[0]->base_url(), "s-9"), 1);
  EXPECT_EQ(gateway->stats().session_close, 1);
  EXPECT_EQ(gateway->stats().session_close_failure, 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(hook, std::vector<bool>{false});
  }
  const json::value series =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/session/close_failure").as_double(), 1.0);
  // Ended all the same: a second close answers the remembered outcome without a fan-out, and
  // the id starts a new session.
  EXPECT_EQ(json::parse(Post(client, gateway->base_url(), "/v1/sessions/s-9/close", "").body)
                .at("closed")
                .as_bool(),
            false);
  EXPECT_EQ(CloseCount(client, fleet.engines[0]->base_url(), "s-9"), 1);
  EXPECT_EQ(gateway->stats().sessions_active, 0);
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate",
                 R"({"input_ids": [1, 2, 3], "session_id": "s-9"})")
                .status,
            200);
  EXPECT_EQ(gateway->stats().sessions_active, 1);
}

TEST(GatewayTest, ClosingASessionAbortsItsInFlightRequestBeforeClosingIt) {
  FakeEngine engine(/*hold=*/true);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::promise<StatusOr<net::ClientResponse>> running;
  client.AsyncRequest(
      http::verb::post, gateway->base_url(), "/generate",
      {{"Content-Type", "application/json"}, {"X-Session-Id", "s-1"}},
      R"({"text": "long task", "rid": "job"})",
      [&running](StatusOr<net::ClientResponse> r) { running.set_value(std::move(r)); });
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/s-1/close", "");
  ASSERT_EQ(closed.status, 200);
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"s-1","closed":true,"aborted":1})"));
  const auto control = engine.control();
  ASSERT_EQ(control.size(), 2u);
  EXPECT_EQ(control[0].first, "/abort_request");
  EXPECT_EQ(json::parse(control[0].second), json::parse(R"({"rid":"job:0"})"));
  EXPECT_EQ(control[1].first, "/close_session");
  EXPECT_EQ(json::parse(control[1].second), json::parse(R"({"session_id":"s-1"})"));
  auto future = running.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get()->status, 200);
  // The request reached the engine with the gateway's rid and the session, nothing else changed.
  EXPECT_EQ(engine.generates()[0].body,
            R"({"text": "long task", "rid": "job:0","session_id":"s-1"})");
}

TEST(GatewayTest, IdleSessionsAreClosedByTheTimer) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.session_idle_timeout_s = 0.2;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})",
                 {{"X-Session-Id", "quiet"}})
                .status,
            200);
  EXPECT_EQ(gateway->stats().sessions_active, 1);
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().session_close == 1; }));
  const auto control = engine.control();
  ASSERT_EQ(control.size(), 1u);
  EXPECT_EQ(json::parse(control[0].second), json::parse(R"({"session_id":"quiet"})"));
  EXPECT_EQ(gateway->stats().sessions_active, 0);
}

// X-Agentkv-Session-Retain: 1 (a partial rollout kept across steps): the retained session
// outlives the idle timeout with its KV on its engine, where a plain session beside it is
// closed and loses its KV; a mark past --max-retained-sessions is a 429, one without a session
// a 400; the explicit close ends the retained session on every engine.
TEST(GatewayTest, ARetainedSessionOutlivesTheIdleTimeoutUntilItsClose) {
  Fleet fleet = StartFleet(2, "consistent_hashing");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.router_policy = SglRouterPolicy::kConsistentHashing;
  options.agentic.agentic_session_lifecycle = true;
  options.session_idle_timeout_s = 0.2;
  options.max_retained_sessions = 1;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const auto turn = [&](const std::string& session, int64_t first, int64_t n,
                        const std::string& retain) {
    net::HeaderList headers = {{"X-Session-Id", session}};
    if (!retain.empty()) headers.emplace_back("X-Agentkv-Session-Retain", retain);
    return Post(
        client, gateway->base_url(), "/generate",
        R"({"input_ids": )" + InputIds(first, n) + R"(, "sampling_params": {"max_new_tokens": 4}})",
        headers);
  };
  const auto cached = [](const net::ClientResponse& r) {
    StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
    EXPECT_TRUE(response.ok()) << response.status() << " " << r.body;
    return response.ok() ? response->meta_info.cached_tokens : -1;
  };
  ASSERT_EQ(turn("kept", 1, 256, "1").status, 200);
  ASSERT_EQ(turn("plain", 5000, 256, "").status, 200);
  EXPECT_EQ(gateway->stats().sessions_retained, 1);

  // Past the bound, and without a session: refused before anything is reserved or sent.
  const net::ClientResponse over = turn("other", 9000, 64, "1");
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_NE(over.body.find("--max-retained-sessions 1"), std::string::npos) << over.body;
  const net::ClientResponse sessionless =
      Post(client, gateway->base_url(), "/generate", SmallGenerate("n"),
           {{"X-Agentkv-Session-Retain", "1"}});
  EXPECT_EQ(sessionless.status, 400) << sessionless.body;
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("m"),
                 {{"X-Session-Id", "x"}, {"X-Agentkv-Session-Retain", "yes"}})
                .status,
            400);

  // The idle timeout closes the plain session on every engine, never the kept one.
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().session_close == 1; }));
  std::this_thread::sleep_for(600ms);  // Three more idle timeouts.
  EXPECT_EQ(gateway->stats().session_close, 1);
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "plain"), 1);
    EXPECT_EQ(CloseCount(client, engine->base_url(), "kept"), 0);
  }
  EXPECT_EQ(gateway->stats().sessions_active, 1);
  const std::map<std::string, double> gauges = Gauges(client, gateway->base_url());
  EXPECT_EQ(gauges.at("agentkv_gateway_sessions_retained"), 1.0);
  EXPECT_EQ(gauges.at("agentkv_gateway_sessions_retain_refused_total"), 1.0);

  // Back from its long pause, the retained session finds its KV; the closed one does not.
  EXPECT_GE(cached(turn("kept", 1, 320, "")), 256);
  EXPECT_EQ(cached(turn("plain", 5000, 320, "")), 0);

  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/kept/close", "");
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"kept","closed":true,"aborted":0})"));
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "kept"), 1) << engine->base_url();
  }
  EXPECT_EQ(gateway->stats().sessions_retained, 0);
  gateway->Shutdown(2s);
}

TEST(GatewayTest, TheBearerTokenGuardsTheCloseEndpointAndIsNeverForwarded) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.bearer_token = "t0k3n";
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string close = "/v1/sessions/s/close";
  EXPECT_EQ(Post(client, gateway->base_url(), close, "").status, 401);
  EXPECT_EQ(
      Post(client, gateway->base_url(), close, "", {{"Authorization", "Bearer wrong"}}).status,
      401);
  EXPECT_EQ(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv?reset=1").status, 401);
  EXPECT_TRUE(engine.control().empty());
  EXPECT_EQ(
      Post(client, gateway->base_url(), close, "", {{"Authorization", "Bearer t0k3n"}}).status,
      200);
  const net::ClientResponse wrong_method =
      Call(client, http::verb::get, gateway->base_url(), "/v1/sessions/s/close");
  EXPECT_EQ(wrong_method.status, 405);
  // Built like every error the gateway answers itself: the method to use, and no retry.
  EXPECT_THAT(wrong_method.headers,
              ::testing::Contains(std::pair<std::string, std::string>("Allow", "POST")));
  EXPECT_THAT(wrong_method.headers,
              ::testing::Contains(std::pair<std::string, std::string>("x-should-retry", "false")));
  EXPECT_EQ(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv?reset=1", "",
                 {{"Authorization", "Bearer t0k3n"}})
                .status,
            200);
  // The data path is open; the gateway's token stays here, tracing headers go on, others not.
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})",
           {{"Authorization", "Bearer t0k3n"}, {"traceparent", "00-1-2-01"}, {"Cookie", "c=1"}})
          .status,
      200);
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})",
                 {{"Authorization", "Bearer router-key"}})
                .status,
            200);
  const auto generates = engine.generates();
  ASSERT_EQ(generates.size(), 2u);
  auto has = [](const net::HeaderList& headers, std::string_view name, std::string_view value) {
    return std::any_of(headers.begin(), headers.end(), [&](const auto& h) {
      return boost::beast::iequals(h.first, name) && h.second == value;
    });
  };
  EXPECT_FALSE(has(generates[0].headers, "authorization", "Bearer t0k3n"));
  EXPECT_TRUE(has(generates[0].headers, "traceparent", "00-1-2-01"));
  EXPECT_FALSE(has(generates[0].headers, "cookie", "c=1"));
  EXPECT_TRUE(has(generates[1].headers, "authorization", "Bearer router-key"));
  for (const std::string& line : logs.lines)
    EXPECT_EQ(line.find("t0k3n"), std::string::npos) << line;
}

TEST(GatewayTest, OnlyACorrectlySignedParentHintIsForwarded) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.parent_hint_key = "hint-key";
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string good = SignParentHint("hint-key", "child-1", "parent-0");
  const std::vector<net::HeaderList> attempts = {
      {{"X-Session-Id", "child-1"}, {"X-Agentkv-Parent-Session", "parent-0"}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-0"},
       {"X-Agentkv-Parent-Signature", SignParentHint("other-key", "child-1", "parent-0")}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-1"},
       {"X-Agentkv-Parent-Signature", good}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-0"},
       {"X-Agentkv-Parent-Signature", good}}};
  for (size_t i = 0; i < attempts.size(); ++i) {
    ASSERT_EQ(
        Post(client, gateway->base_url(), "/generate", R"({"rid": "r", "text": "hi"})", attempts[i])
            .status,
        200);
  }
  const auto generates = engine.generates();
  ASSERT_EQ(generates.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(generates[i].body,
              R"({"rid": "r:)" + std::to_string(i) + R"(", "text": "hi","session_id":"child-1"})");
  }
  EXPECT_EQ(
      generates[3].body,
      R"({"rid": "r:3", "text": "hi","session_id":"child-1","agentkv_parent_session":"parent-0"})");
  EXPECT_EQ(gateway->stats().parent_hint_rejected, 3);
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("agentkv_gateway_parent_hint_rejected_total 3.0"), std::string::npos);
  for (const std::string& line : logs.lines) EXPECT_EQ(line.find(good), std::string::npos) << line;
}

// --agentic-subagent-demotion: the parent's return reaches the engine that holds its sub-agent.
// The gateway forwards round robin over two emulated engines that demote finished sub-agents,
// so the child runs on the other engine than the parent's first turn; when the parent sends
// its next request, the gateway posts /demote_finished_subagents to every engine and the
// child's engine demotes it. Only the parent's requests are delivered.
TEST(GatewayTest, AParentsReturnIsDeliveredToTheEngineHoldingItsSubagent) {
  EngineEmulatorOptions engine_options = EngineOptions();
  kv::KvCacheOptions& cache = engine_options.runtime.engine.cache;
  cache.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
  cache.finished_subagent_priority = 1;
  cache.finished_subagent_min_idle_iterations = 0;
  Fleet fleet = StartFleet(2, "round_robin", engine_options);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_session_lifecycle = true;
  options.parent_hint_key = "hint-key";
  options.agentic_subagent_demotion = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const auto requests_on = [&fleet](size_t e) {
    return fleet.engines[e]->runtime().Snapshot().num_requests_total;
  };
  const auto demoted_on = [&fleet](size_t e) {
    return fleet.engines[e]->runtime().Snapshot().cache.demoted_children;
  };
  const auto body = [](const std::string& rid, int64_t first) {
    return R"({"input_ids": )" + InputIds(first, 100) +
           R"(, "sampling_params": {"max_new_tokens": 4}, "rid": ")" + rid + "\"}";
  };
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("p1", 1), {{"X-Session-Id", "parent-0"}})
          .status,
      200);
  const size_t parent_engine = requests_on(0) == 1 ? 0 : 1;
  const size_t child_engine = 1 - parent_engine;
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("c1", 1000),
           {{"X-Session-Id", "child-1"},
            {"X-Agentkv-Parent-Session", "parent-0"},
            {"X-Agentkv-Parent-Signature", SignParentHint("hint-key", "child-1", "parent-0")}})
          .status,
      200);
  ASSERT_EQ(requests_on(child_engine), 1) << "round robin put the child on the other engine";
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 0);

  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("p2", 1), {{"X-Session-Id", "parent-0"}})
          .status,
      200);
  EXPECT_TRUE(WaitFor([&] { return demoted_on(child_engine) == 1; }));
  EXPECT_EQ(demoted_on(parent_engine), 0);
  EXPECT_GT(fleet.engines[child_engine]->runtime().Snapshot().cache.demoted_blocks, 0);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  for (const auto& engine : fleet.engines) {
    const std::string recorded =
        Call(client, http::verb::get, engine->base_url(), "/agentkv/requests").body;
    EXPECT_NE(recorded.find(R"(/demote_finished_subagents)"), std::string::npos) << recorded;
    EXPECT_NE(recorded.find(R"(\"parent_session_id\":\"parent-0\")"), std::string::npos)
        << recorded;
  }
  // The child's own next request is not a parent's: nothing more is delivered.
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", body("c2", 1000),
                 {{"X-Session-Id", "child-1"}})
                .status,
            200);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  // Issue 29: once per return. More turns of the parent with no sub-agent activity between
  // them post nothing more (they used to post to every engine on every request).
  for (int turn = 3; turn <= 5; ++turn) {
    ASSERT_EQ(Post(client, gateway->base_url(), "/generate", body("p" + std::to_string(turn), 1),
                   {{"X-Session-Id", "parent-0"}})
                  .status,
              200);
  }
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  // A sub-agent ran again (a hinted request): the parent's next turn is a return again.
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("c3", 1000),
           {{"X-Session-Id", "child-1"},
            {"X-Agentkv-Parent-Session", "parent-0"},
            {"X-Agentkv-Parent-Signature", SignParentHint("hint-key", "child-1", "parent-0")}})
          .status,
      200);
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("p6", 1), {{"X-Session-Id", "parent-0"}})
          .status,
      200);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 2);
  gateway->Shutdown(2s);
}

// Gap-aware retention on an unmodified SGLang: the expected pause becomes the request's
// `priority` (what --radix-eviction-policy priority orders by); a client's own priority wins,
// requests without a known pause get none, and a bad X-Agentkv-Pause is a 400 that reaches no
// engine.
TEST(GatewayTest, TheExpectedPauseIsForwardedAsTheRequestPriority) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.pause_priority = *protocol::ParsePausePriorities("tool_call=10,human_turn=0");
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  // A distinct rid per request: a rid still in flight at the gateway gets the next attempt
  // number.
  const auto body = [](std::string_view rid) {
    return R"({"rid": ")" + std::string(rid) + R"(", "text": "hi"})";
  };
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("a"), {{"X-Agentkv-Pause", "tool_call"}})
          .status,
      200);
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("b"), {{"X-Agentkv-Pause", "human_turn"}})
          .status,
      200);
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", body("c"),
                 {{"X-Agentkv-Pause", "subagent_wait"}})
                .status,
            200);
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate",
           R"({"rid": "d", "text": "hi", "priority": 99})", {{"X-Agentkv-Pause", "tool_call"}})
          .status,
      200);
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", body("e"), {{"X-Agentkv-Pause", "soon"}})
                .status,
            400);
  // Without a session an attempt of rid "x" is "x:0".
  const auto generates = engine.generates();
  ASSERT_EQ(generates.size(), 4u);
  EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi","priority":10})");
  EXPECT_EQ(generates[1].body, R"({"rid": "b:0", "text": "hi","priority":0})");
  EXPECT_EQ(generates[2].body, R"({"rid": "c:0", "text": "hi"})");
  EXPECT_EQ(generates[3].body, R"({"rid": "d:0", "text": "hi", "priority": 99})");
}

// Program-level FCFS on an unmodified SGLang (--agentic-program-fcfs): each forwarded body gets
// the `priority` of its program's arrival, older programs higher (a continuing session keeps
// its program's value, a sub-agent takes its parent's, a closed session's next request is a
// new program); an untrusted caller's own priority is replaced, a trusted caller's kept. Off,
// the body is forwarded as before.
TEST(GatewayTest, ProgramFcfsStampsOlderProgramsWithHigherPriorities) {
  for (const bool program_fcfs : {false, true}) {
    SCOPED_TRACE(program_fcfs ? "program_fcfs" : "off");
    FakeEngine engine(/*hold=*/false);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = {engine.base_url()};
    options.bearer_token = "t0k3n";
    options.parent_hint_key = "hint-key";
    options.program_fcfs = program_fcfs;
    auto gateway = StartGateway(options);
    ASSERT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto post = [&](std::string body, net::HeaderList headers) {
      ASSERT_EQ(Post(client, gateway->base_url(), "/generate", std::move(body), headers).status,
                200);
    };
    const auto text = [](std::string_view rid) {
      return R"({"rid": ")" + std::string(rid) + R"(", "text": "hi"})";
    };
    post(text("a"), {{"X-Session-Id", "old"}});  // Program 0.
    post(text("b"), {{"X-Session-Id", "new"}});  // Program 1.
    post(text("c"), {{"X-Session-Id", "old"}});  // Program 0 continues.
    post(text("d"), {});                         // Program 2: no session.
    post(text("e"), {{"X-Session-Id", "child"},  // Program 3's session, parent "old".
                     {"X-Agentkv-Parent-Session", "old"},
                     {"X-Agentkv-Parent-Signature", SignParentHint("hint-key", "child", "old")}});
    post(R"({"rid": "f", "text": "hi", "priority": 2000000000})", {{"X-Session-Id", "new"}});
    post(R"({"rid": "g", "text": "hi", "priority": 5})",
         {{"X-Session-Id", "new"}, {"Authorization", "Bearer t0k3n"}});
    ASSERT_EQ(Post(client, gateway->base_url(), "/v1/sessions/old/close", "",
                   {{"Authorization", "Bearer t0k3n"}})
                  .status,
              200);
    post(text("h"), {{"X-Session-Id", "old"}});  // Program 4: a new incarnation.
    const auto generates = engine.generates();
    ASSERT_EQ(generates.size(), 8u);
    if (!program_fcfs) {
      EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi"})");
      EXPECT_EQ(generates[5].body, R"({"rid": "f:0", "text": "hi", "priority": 2000000000})");
      for (const auto& generate : generates) {
        if (generate.body.find("\"rid\": \"f") == std::string::npos &&
            generate.body.find("\"rid\": \"g") == std::string::npos) {
          EXPECT_EQ(generate.body.find("priority"), std::string::npos) << generate.body;
        }
      }
      continue;
    }
    constexpr int64_t kTop = int64_t{1} << 30;
    const auto priority = [&](size_t i) {
      return json::parse(generates[i].body).at("priority").as_int64();
    };
    EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi","priority":1073741824})");
    EXPECT_EQ(priority(0), kTop);      // a: the oldest program.
    EXPECT_EQ(priority(1), kTop - 1);  // b.
    EXPECT_EQ(priority(2), kTop);      // c: old's program still.
    EXPECT_EQ(priority(3), kTop - 2);  // d.
    EXPECT_EQ(priority(4), kTop);      // e: its parent's program.
    EXPECT_EQ(priority(5), kTop - 1);  // f: an untrusted priority replaced.
    EXPECT_EQ(generates[6].body, R"({"rid": "g:0", "text": "hi", "priority": 5})");
    EXPECT_EQ(priority(7), kTop - 4);  // h: old ended; a new program.
    gateway->Shutdown(2s);
  }
}

// End to end on an engine that runs SGLang's --radix-eviction-policy priority (the emulator):
// with the pause priority, the KV of a session in a tool loop outlives that of a session
// waiting for its user, although it is older; without it, LRU evicts the older one first.
TEST(GatewayTest, ThePausePriorityKeepsAToolLoopsKvOverAHumanTurnsOnAPriorityEngine) {
  const auto cached_on_return = [](bool pause_priority) {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.engine.kv_pool.max_total_tokens = 1024;  // 64 pages of 16 tokens
    Fleet fleet = StartFleet(1, "round_robin", engine_options);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = EngineUrls(fleet);
    if (pause_priority)
      options.pause_priority = *protocol::ParsePausePriorities("tool_call=60,human_turn=20");
    auto gateway = StartGateway(options);
    EXPECT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto generate = [&](int64_t first, int64_t tokens, const std::string& pause) {
      net::HeaderList headers;
      if (!pause.empty()) headers.emplace_back("X-Agentkv-Pause", pause);
      const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                         R"({"input_ids": )" + InputIds(first, tokens) +
                                             R"(, "sampling_params": {"max_new_tokens": 8}})",
                                         headers);
      EXPECT_EQ(r.status, 200) << r.body;
      StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
      EXPECT_TRUE(response.ok()) << response.status();
      return response.ok() ? response->meta_info.cached_tokens : -1;
    };
    generate(1, 320, "tool_call");        // the older session, in a tool loop
    generate(100000, 320, "human_turn");  // the newer one, waiting for its user
    generate(200000, 400, "");            // needs room: some of the two must go
    return std::pair{generate(1, 320, "tool_call"), generate(100000, 320, "human_turn")};
  };
  const auto [tool_lru, human_lru] = cached_on_return(false);
  const auto [tool_prio, human_prio] = cached_on_return(true);
  // 19 full pages of the 320-token prompt (the last token is always computed).
  EXPECT_LT(tool_lru, 304);
  EXPECT_EQ(tool_prio, 304);
  EXPECT_LT(human_prio, 304);
  EXPECT_LE(human_prio, human_lru);
}

// End to end on agentkv's own engines (the emulator with --eviction-order gap_aware): the
// gateway forwards the expected pause as agentkv_pause, and the blocks of a session that ended
// go before an older live session's; without the hint the engine evicts by LRU.
TEST(GatewayTest, TheForwardedPauseDrivesTheEmulatorsGapAwareOrder) {
  const auto cached_on_return = [](bool forward) {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.engine.kv_pool.max_total_tokens = 1024;  // 64 pages of 16 tokens
    engine_options.runtime.radix_eviction_policy = RadixEvictionPolicy::kLru;
    engine_options.runtime.engine.cache.eviction_order = kv::EvictionOrder::kGapAware;
    Fleet fleet = StartFleet(1, "round_robin", engine_options);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = EngineUrls(fleet);
    options.forward_pause = forward;
    auto gateway = StartGateway(options);
    EXPECT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto generate = [&](int64_t first, int64_t tokens, const std::string& pause) {
      net::HeaderList headers;
      if (!pause.empty()) headers.emplace_back("X-Agentkv-Pause", pause);
      const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                         R"({"input_ids": )" + InputIds(first, tokens) +
                                             R"(, "sampling_params": {"max_new_tokens": 8}})",
                                         headers);
      EXPECT_EQ(r.status, 200) << r.body;
      StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
      EXPECT_TRUE(response.ok()) << response.status();
      return response.ok() ? response->meta_info.cached_tokens : -1;
    };
    generate(1, 320, "tool_call");         // the older session, in a tool loop
    generate(100000, 320, "session_end");  // the newer one, which ended
    generate(200000, 400, "");             // needs room
    return generate(1, 320, "tool_call");
  };
  // 19 full pages of the 320-token prompt (the last token is always computed).
  EXPECT_LT(cached_on_return(false), 304);
  EXPECT_EQ(cached_on_return(true), 304);
}

TEST(GatewayTest, AMissingEngineFlagRefusesTheStartOrDisablesTheFeature) {
  EngineEmulatorOptions no_session_cache = EngineOptions();
  no_session_cache.runtime.enable_session_radix_cache = false;
  Fleet fleet = StartFleet(1, "round_robin", no_session_cache);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.agentic.agentic_session_lifecycle = true;
  StatusOr<std::unique_ptr<Gateway>> refused = Gateway::Start(options, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(fleet.engines[0]->base_url()), std::string::npos);
  EXPECT_NE(refused.status().message().find("--enable-session-radix-cache"), std::string::npos);
  options.prerequisite_policy = PrerequisitePolicy::kDisable;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  EXPECT_FALSE(gateway->lifecycle_enabled());
  EXPECT_FALSE(gateway->admission_enabled());
  // Admission without a backend is refused before anything starts.
  GatewayOptions admission = BaseOptions(logs);
  admission.router_url = fleet.router->base_url();
  admission.agentic.agentic_program_admission = true;
  EXPECT_EQ(Gateway::Start(admission, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// ---- Faults: admission fails open, and recovers ----

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

  RemoteAdmissionOptions remote_options;
  remote_options.coordinator_url = coordinator->base_url();
  remote_options.max_wait_s = coordinator_options.agentic.agentic_admission_max_wait_s;
  StatusOr<std::unique_ptr<RemoteAdmission>> remote = RemoteAdmission::Create(remote_options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::shared_ptr<RemoteAdmission> backend(*std::move(remote));
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_program_admission = true;
  options.poll_fleet_metrics = false;  // The coordinator polls the fleet, as in gateway_command.
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

// Log injection: a client's rid holding a newline, a forged "event=", a quote and a backslash
// stays on its own log line, escaped (log_sink.h), and forges no line or field.
TEST(GatewayTest, AClientRidWithANewlineStaysOnItsLogLineEscaped) {
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {"http://127.0.0.1:1"};  // Refused: the request fails upstream.
  options.check_prerequisites = false;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const net::ClientResponse r =
      Post(client, gateway->base_url(), "/generate",
           R"({"rid": "r1\nevent=forged level=error \"x\\", "text": "hi"})");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_TRUE(WaitFor([&] { return Logged(logs, "event=upstream_failed"); }));
  std::lock_guard<std::mutex> lock(logs.mu);
  int upstream_failed = 0;
  for (const std::string& line : logs.lines) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    EXPECT_EQ(line.rfind("event=forged", 0), std::string::npos) << line;
    if (line.rfind("event=upstream_failed ", 0) != 0) continue;
    ++upstream_failed;
    // The attempt's rid is the client's (with a suffix when it is reused), one quoted value.
    EXPECT_EQ(
        line.rfind("event=upstream_failed rid=\"r1\\x0Aevent=forged level=error \\x22x\\x5C", 0),
        0u)
        << line;
    EXPECT_NE(line.find("\" error=\""), std::string::npos) << line;
  }
  EXPECT_EQ(upstream_failed, 1);
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

  RemoteAdmissionOptions remote_options;
  remote_options.coordinator_url = coordinator->base_url();
  remote_options.max_wait_s = coordinator_options.agentic.agentic_admission_max_wait_s;
  StatusOr<std::unique_ptr<RemoteAdmission>> remote = RemoteAdmission::Create(remote_options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::shared_ptr<RemoteAdmission> backend(*std::move(remote));
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_program_admission = true;
  options.poll_fleet_metrics = false;
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
