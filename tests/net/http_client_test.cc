// HttpClient's API: round trips, keep-alive reuse, argument errors, per-upstream connection
// limits and queueing, and destruction with requests in flight. Phase-level behaviour
// (timeouts, limits, streaming, retries) is in client_call_test.cc.
#include "agentkv/net/http_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agentkv/net/http_server.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::StartServer;
using testing::WaitFor;

Handler Echo() {
  return [](Request request, std::shared_ptr<ResponseWriter> writer) {
    Response response =
        MakeResponse(request, http::status::ok, std::string(request.target()), "text/plain");
    response.set("X-Method", request.method_string());
    response.set("X-Host", request[http::field::host]);
    writer->Reply(std::move(response));
  };
}

std::string Header(const ClientResponse& response, std::string_view name) {
  for (const auto& [key, value] : response.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST(HttpClientOptionsTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(HttpClientOptions{}.Validate().ok());
  HttpClientOptions options;
  options.connect_timeout = milliseconds(0);
  EXPECT_THAT(options.Validate().message(), HasSubstr("connect_timeout"));
  options = {};
  options.max_connections_per_host = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("max_connections_per_host"));
  options = {};
  options.threads = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("threads"));
}

TEST(HttpClientTest, RoundTripSetsHostAndKeepsTheQuery) {
  auto server = StartServer({}, Echo());
  HttpClient client;
  auto response = client.Request(http::verb::get, server->base_url(), "/v1/x?stream=1");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "/v1/x?stream=1");
  EXPECT_EQ(Header(*response, "X-Method"), "GET");
  EXPECT_EQ(Header(*response, "X-Host"), "127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(Header(*response, "Content-Type"), "text/plain");
}

TEST(HttpClientTest, BaseUrlPrefixIsPrepended) {
  auto server = StartServer({}, Echo());
  HttpClient client;
  auto response = client.Request(http::verb::get, server->base_url() + "/api/", "/x");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "/api/x");
}

TEST(HttpClientTest, HttpErrorStatusIsAResponseNotAnError) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeErrorResponse(request, http::status::service_unavailable, "busy"));
  });
  HttpClient client;
  auto response = client.Request(http::verb::get, server->base_url(), "/");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->body, R"({"error":{"message":"busy","code":503}})");
}

TEST(HttpClientTest, KeepAliveReusesOneConnectionForSequentialRequests) {
  auto server = StartServer({}, Echo());
  HttpClient client;
  for (int i = 0; i < 10; ++i) {
    auto response = client.Request(http::verb::post, server->base_url(), "/r", {}, "body");
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
  }
  EXPECT_EQ(client.connections_opened(), 1);
  EXPECT_EQ(client.pooled_connections(), 1);
  EXPECT_TRUE(WaitFor([&] { return server->requests_served() == 10; }));
}

TEST(HttpClientTest, ConnectionCloseResponsesAreNotPooled) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    Response response = MakeResponse(request, http::status::ok, "bye");
    response.keep_alive(false);
    writer->Reply(std::move(response));
  });
  HttpClient client;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Request(http::verb::get, server->base_url(), "/").ok());
  }
  EXPECT_EQ(client.connections_opened(), 3);
  EXPECT_EQ(client.pooled_connections(), 0);
}

TEST(HttpClientTest, BadUrlsAndTargetsAreInvalidArgument) {
  HttpClient client;
  EXPECT_EQ(client.Request(http::verb::get, "https://127.0.0.1:1", "/").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request(http::verb::get, "nonsense", "/").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request(http::verb::get, "http://127.0.0.1:1", "relative").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Request(http::verb::get, "http://127.0.0.1:1", "/", {{"X", "a\r\nB: c"}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(HttpClientTest, HeadRequestHasNoBody) {
  auto server = StartServer({}, Echo());
  HttpClient client;
  auto response = client.Request(http::verb::head, server->base_url(), "/abc");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "");
  EXPECT_EQ(Header(*response, "Content-Length"), "4");
  // The connection stays usable.
  auto next = client.Request(http::verb::get, server->base_url(), "/next");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->body, "/next");
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST(HttpClientTest, RequestsBeyondThePerHostLimitWaitForAConnection) {
  std::atomic<int> active{0};
  std::atomic<int> peak{0};
  HttpServer* raw = nullptr;
  auto server = StartServer({}, [&](Request request, std::shared_ptr<ResponseWriter> writer) {
    const int now = active.fetch_add(1) + 1;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(raw->executor(), milliseconds(50));
    timer->async_wait([&active, timer, writer, request = std::move(request)](auto) {
      active.fetch_sub(1);
      writer->Reply(MakeResponse(request, http::status::ok, "ok"));
    });
  });
  raw = server.get();
  HttpClientOptions options;
  options.max_connections_per_host = 2;
  HttpClient client(options);
  std::atomic<int> ok{0};
  std::atomic<int> done{0};
  for (int i = 0; i < 8; ++i) {
    client.AsyncRequest(http::verb::get, server->base_url(), "/", {}, "",
                        [&](StatusOr<ClientResponse> response) {
                          if (response.ok() && response->status == 200) ok.fetch_add(1);
                          done.fetch_add(1);
                        });
  }
  ASSERT_TRUE(WaitFor([&] { return done.load() == 8; }));
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(peak.load(), 2);
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(HttpClientTest, QueueTimeoutIsDeadlineExceeded) {
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  auto server = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    std::lock_guard lock(mu);
    writers.push_back(std::move(writer));
  });
  HttpClientOptions options;
  options.max_connections_per_host = 1;
  options.queue_timeout = milliseconds(100);
  HttpClient client(options);
  client.AsyncRequest(http::verb::get, server->base_url(), "/", {}, "", [](auto) {});
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return writers.size() == 1;
  }));
  auto queued = client.Request(http::verb::get, server->base_url(), "/");
  EXPECT_EQ(queued.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(queued.status().message(), HasSubstr("waiting for a connection"));
}

TEST(HttpClientTest, DestructionFailsRequestsInFlight) {
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  auto server = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    std::lock_guard lock(mu);
    writers.push_back(std::move(writer));
  });
  std::promise<Status> result;
  auto client = std::make_unique<HttpClient>();
  client->AsyncRequest(
      http::verb::get, server->base_url(), "/", {}, "",
      [&](StatusOr<ClientResponse> response) { result.set_value(response.status()); });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return writers.size() == 1;
  }));
  client.reset();
  const Status status = result.get_future().get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("destroyed"));
}

TEST(HttpClientTest, ManyThreadsShareOneClient) {
  auto server = StartServer({}, Echo());
  HttpClientOptions options;
  options.threads = 2;
  HttpClient client(options);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string target = "/t" + std::to_string(t) + "/" + std::to_string(i);
        auto response = client.Request(http::verb::get, server->base_url(), target);
        if (response.ok() && response->body == target) ok.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_LE(client.connections_opened(), 4);
}

}  // namespace
}  // namespace agentkv::net
