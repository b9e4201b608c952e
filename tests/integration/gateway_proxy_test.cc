// End-to-end tests of the agentkv gateway on 127.0.0.1 (clients -> gateway -> sgl-router
// emulator -> engine emulators, or a recording FakeEngine): what passes through unchanged (the
// model list, streams), what is refused at the door (invalid bodies, a close without the bearer
// token), and what a client cannot forge in the gateway's log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/sse.h"
#include "agentkv/service/gateway/gateway.h"
#include "gateway_test_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
namespace http = net::http;
namespace json = boost::json;

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

}  // namespace
}  // namespace agentkv::service
