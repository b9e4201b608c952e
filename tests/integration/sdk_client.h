// What an OpenAI SDK sends and reads, over plain HTTP: its headers, a call, a stream collected
// up to [DONE], and how it reads an error's message; and the fixture that runs a call against an
// engine and through the gateway. For the client-compatibility suite.
#ifndef AGENTKV_TESTS_INTEGRATION_SDK_CLIENT_H_
#define AGENTKV_TESTS_INTEGRATION_SDK_CLIENT_H_

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "gateway_test_support.h"

namespace agentkv::service::sdk_client {

using namespace gateway_testing;  // NOLINT(google-build-using-namespace): test support.

// The headers the OpenAI Python SDK sends with every call.
inline net::HeaderList SdkHeaders() {
  return {{"Content-Type", "application/json"},   {"Accept", "application/json"},
          {"User-Agent", "OpenAI/Python 1.54.0"}, {"X-Stainless-Lang", "python"},
          {"X-Stainless-Retry-Count", "0"},       {"Authorization", "Bearer sk-no-key-required"}};
}

inline net::ClientResponse SdkCall(net::HttpClient& client, http::verb verb,
                                   const std::string& base, const std::string& path,
                                   const std::string& body = "",
                                   net::HeaderList headers = SdkHeaders()) {
  StatusOr<net::ClientResponse> r = client.Request(verb, base, path, headers, body);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : net::ClientResponse{};
}

// What the SDK does with a stream: collects the `data:` events up to [DONE].
struct Stream {
  int status = 0;
  std::vector<json::value> events;
  bool done = false;
};

inline Stream SdkStream(net::HttpClient& client, const std::string& base, const std::string& path,
                        const std::string& body) {
  protocol::SseParser parser;
  Stream stream;
  std::promise<Status> finished;
  client.AsyncStream(
      http::verb::post, base, path, SdkHeaders(), body,
      [&stream](int status, const auto&) { stream.status = status; },
      [&](std::string_view chunk) {
        for (const std::string& event : parser.Feed(chunk)) {
          stream.events.push_back(json::parse(event));
        }
      },
      [&finished](Status status) { finished.set_value(status); });
  auto future = finished.get_future();
  EXPECT_EQ(future.wait_for(15s), std::future_status::ready);
  stream.done = parser.done();
  return stream;
}

// How the SDK reads an error: `error` when present, else the body itself; then its message.
inline std::string SdkErrorMessage(const json::value& body) {
  const json::object& object = body.as_object();
  const json::value& error = object.contains("error") ? object.at("error") : body;
  return std::string(error.at("message").as_string());
}

// One engine (the parameter false), or a gateway in front of a router in front of one engine
// (true): a client-compatibility test checks every call against both, with the same
// expectations, at `base_`.
class EngineOrGatewayTest : public ::testing::TestWithParam<bool> {
 protected:
  void StartServers(const EngineEmulatorOptions& engine_options) {
    if (GetParam()) {
      fleet_ = StartFleet(1, "cache_aware", engine_options);
      GatewayOptions options = BaseOptions(logs_);
      options.router_url = fleet_.router->base_url();
      options.router_policy = SglRouterPolicy::kCacheAware;
      gateway_ = StartGateway(options);
      ASSERT_NE(gateway_, nullptr);
      base_ = gateway_->base_url();
    } else {
      StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(engine_options);
      ASSERT_TRUE(engine.ok()) << engine.status();
      engine_ = *std::move(engine);
      base_ = engine_->base_url();
    }
  }

  net::HttpClient client_{ClientOptions()};
  LogCapture logs_;
  Fleet fleet_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<EngineEmulator> engine_;
  std::string base_;
};

// The parameter's name in a test's name.
inline std::string EngineOrGatewayName(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "ThroughTheGateway" : "Engine";
}
}  // namespace agentkv::service::sdk_client

#endif  // AGENTKV_TESTS_INTEGRATION_SDK_CLIENT_H_
