// HttpServer lifecycle: options, start-up, counters, graceful and forced shutdown, and many
// concurrent held requests on two threads. Requests go through HttpClient over 127.0.0.1.
#include "agentkv/net/http_server.h"

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "agentkv/net/http_client.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using ::testing::HasSubstr;
using testing::StartServer;
using testing::WaitFor;

int ThreadsInProcess() {
  int count = 0;
  if (DIR* dir = ::opendir("/proc/self/task")) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++count;
    }
    ::closedir(dir);
  }
  return count;
}

// Answers after `delay`, from a timer on the server's executor (no thread is held).
Handler AnswerAfter(HttpServer** server, milliseconds delay) {
  return [server, delay](Request request, std::shared_ptr<ResponseWriter> writer) {
    auto timer = std::make_shared<boost::asio::steady_timer>((*server)->executor(), delay);
    timer->async_wait([timer, writer, request = std::move(request)](auto) {
      writer->Reply(MakeResponse(request, http::status::ok, "done", "text/plain"));
    });
  };
}

TEST(HttpServerOptionsTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(HttpServerOptions{}.Validate().ok());
  auto check = [](auto mutate, const char* field) {
    HttpServerOptions options;
    mutate(options);
    const Status status = options.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(status.message(), HasSubstr(field));
  };
  check([](HttpServerOptions& o) { o.threads = 0; }, "threads");
  check([](HttpServerOptions& o) { o.address = "localhost"; }, "address");
  check([](HttpServerOptions& o) { o.max_header_bytes = 10; }, "max_header_bytes");
  check([](HttpServerOptions& o) { o.header_timeout = milliseconds(0); }, "header_timeout");
  check([](HttpServerOptions& o) { o.idle_timeout = milliseconds(-1); }, "idle_timeout");
  check([](HttpServerOptions& o) { o.max_stream_buffer_bytes = 0; }, "max_stream_buffer_bytes");
  check([](HttpServerOptions& o) { o.backlog = 0; }, "backlog");
}

TEST(HttpServerTest, StartRejectsBadOptionsAndAnEmptyHandler) {
  HttpServerOptions options;
  options.threads = 0;
  EXPECT_EQ(
      HttpServer::Start(options, [](Request, std::shared_ptr<ResponseWriter>) {}).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start(HttpServerOptions{}, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, BindFailureIsUnavailableWithTheSystemError) {
  auto first = StartServer({}, [](Request, std::shared_ptr<ResponseWriter>) {});
  HttpServerOptions options;
  options.port = first->port();
  auto second = HttpServer::Start(options, [](Request, std::shared_ptr<ResponseWriter>) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("Address already in use"));
}

TEST(HttpServerTest, ServesARoundTripOnAnEphemeralPort) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok,
                               std::string(request.method_string()) + " " + request.body()));
  });
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->base_url(), "http://127.0.0.1:" + std::to_string(server->port()));
  HttpClient client;
  auto response = client.Request(http::verb::post, server->base_url(), "/x",
                                 {{"Content-Type", "text/plain"}}, "payload");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "POST payload");
  EXPECT_TRUE(WaitFor([&] { return server->requests_served() == 1; }));
}

TEST(HttpServerTest, HandlerAnswersLaterFromATimerOnTheServerExecutor) {
  HttpServer* raw = nullptr;
  auto server = StartServer({}, AnswerAfter(&raw, milliseconds(100)));
  raw = server.get();
  HttpClient client;
  const auto start = Clock::now();
  auto response = client.Request(http::verb::get, server->base_url(), "/");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "done");
  EXPECT_GE(Clock::now() - start, milliseconds(90));
}

TEST(HttpServerTest, LimitsSeenThroughTheClient) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  options.max_body_bytes = 1024;
  auto server = StartServer(options, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, "ok"));
  });
  HttpClient client;
  auto big_header =
      client.Request(http::verb::get, server->base_url(), "/", {{"X-Big", std::string(4096, 'h')}});
  ASSERT_TRUE(big_header.ok()) << big_header.status();
  EXPECT_EQ(big_header->status, 431);
  auto big_body =
      client.Request(http::verb::post, server->base_url(), "/", {}, std::string(64 * 1024, 'b'));
  ASSERT_TRUE(big_body.ok()) << big_body.status();
  EXPECT_EQ(big_body->status, 413);
  auto fine = client.Request(http::verb::post, server->base_url(), "/", {}, "small");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->status, 200);
}

TEST(HttpServerTest, GracefulShutdownLetsAnInFlightRequestFinish) {
  HttpServer* raw = nullptr;
  auto server = StartServer({}, AnswerAfter(&raw, milliseconds(300)));
  raw = server.get();
  HttpClient client;
  std::promise<StatusOr<ClientResponse>> result;
  client.AsyncRequest(
      http::verb::get, server->base_url(), "/", {}, "",
      [&](StatusOr<ClientResponse> response) { result.set_value(std::move(response)); });
  ASSERT_TRUE(WaitFor([&] { return server->open_connections() == 1; }));
  std::this_thread::sleep_for(milliseconds(50));  // The request is with the handler.
  const auto start = Clock::now();
  server->Shutdown(milliseconds(5'000));
  const auto took = Clock::now() - start;
  auto response = result.get_future().get();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "done");
  bool saw_close = false;
  for (const auto& [name, value] : response->headers) {
    if (name == "Connection" && value == "close") saw_close = true;
  }
  EXPECT_TRUE(saw_close);
  EXPECT_LT(took, milliseconds(4'000));
  EXPECT_EQ(server->open_connections(), 0);
  EXPECT_EQ(server->requests_served(), 1);
  // New connections are refused.
  auto after = client.Request(http::verb::get, server->base_url(), "/");
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}

// While Shutdown waits for an in-flight request, the listener stays open: a new connection is
// answered by the server itself, 503 with Connection: close (GET /health with the services'
// {"status":"shutting_down"}), and never reaches the handler; once the drain ends, connects
// are refused.
TEST(HttpServerTest, DuringTheDrainNewRequestsAre503AndHealthSaysShuttingDown) {
  std::atomic<int> handled{0};
  std::mutex mu;
  std::shared_ptr<ResponseWriter> held;
  auto server = StartServer({}, [&](Request request, std::shared_ptr<ResponseWriter> writer) {
    ++handled;
    if (request.target() == "/hold") {
      std::lock_guard lock(mu);
      held = std::move(writer);
      return;
    }
    writer->Reply(MakeResponse(request, http::status::ok, R"({"status":"ok"})"));
  });
  HttpClient client;
  std::promise<StatusOr<ClientResponse>> in_flight;
  client.AsyncRequest(
      http::verb::get, server->base_url(), "/hold", {}, "",
      [&](StatusOr<ClientResponse> response) { in_flight.set_value(std::move(response)); });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return held != nullptr;
  }));
  HttpClient probe;
  ASSERT_EQ(probe.Request(http::verb::get, server->base_url(), "/health")->status, 200);
  std::thread shutdown([&] { server->Shutdown(milliseconds(10'000)); });
  StatusOr<ClientResponse> health = UnavailableError("not asked yet");
  EXPECT_TRUE(WaitFor([&] {  // Until the drain began.
    health = probe.Request(http::verb::get, server->base_url(), "/health?deep=1");
    return health.ok() && health->status == 503;
  }));
  ASSERT_TRUE(health.ok()) << health.status();
  const int handled_before_drain = handled.load();
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->body, R"({"status":"shutting_down"})");
  bool saw_close = false;
  for (const auto& [name, value] : health->headers) {
    if (name == "Connection" && value == "close") saw_close = true;
  }
  EXPECT_TRUE(saw_close);
  auto other = probe.Request(http::verb::post, server->base_url(), "/v1/completions", {}, "{}");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->status, 503);
  EXPECT_NE(other->body.find("shutting down"), std::string::npos) << other->body;
  auto again = probe.Request(http::verb::head, server->base_url(), "/health");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->status, 503);
  EXPECT_EQ(handled.load(), handled_before_drain);  // None reached the handler in the drain.

  {
    std::lock_guard lock(mu);
    held->Reply(Response{http::status::ok, 11});
  }
  shutdown.join();
  auto response = in_flight.get_future().get();
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(server->open_connections(), 0);
  auto after = probe.Request(http::verb::get, server->base_url(), "/health");
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}

TEST(HttpServerTest, ShutdownDeadlineCutsASlowRequest) {
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
  std::atomic<bool> gone{false};
  auto server = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->OnClientGone([&] { gone = true; });
    std::lock_guard lock(mu);
    writers.push_back(std::move(writer));  // Never answered.
  });
  HttpClient client;
  std::promise<StatusOr<ClientResponse>> result;
  client.AsyncRequest(
      http::verb::get, server->base_url(), "/", {}, "",
      [&](StatusOr<ClientResponse> response) { result.set_value(std::move(response)); });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return writers.size() == 1;
  }));
  const auto start = Clock::now();
  server->Shutdown(milliseconds(200));
  const auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(180));
  EXPECT_LT(took, milliseconds(2'000));
  EXPECT_TRUE(gone.load());
  auto response = result.get_future().get();
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable) << response.status();
  // The writer outlives the server: its calls do nothing.
  std::lock_guard lock(mu);
  EXPECT_TRUE(writers[0]->client_gone());
  writers[0]->Reply(Response{http::status::ok, 11});
  bool ran = false;
  writers[0]->OnClientGone([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(HttpServerTest, ShutdownClosesIdleKeepAliveConnectionsAtOnce) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, "ok"));
  });
  HttpClient client;
  ASSERT_TRUE(client.Request(http::verb::get, server->base_url(), "/").ok());
  EXPECT_EQ(server->open_connections(), 1);
  const auto start = Clock::now();
  server->Shutdown(milliseconds(10'000));
  EXPECT_LT(Clock::now() - start, milliseconds(2'000));
  EXPECT_EQ(server->open_connections(), 0);
  server->Shutdown(milliseconds(10'000));  // Idempotent.
}

TEST(HttpServerTest, DestructorShutsDownWithWorkStillPending) {
  HttpServer* raw = nullptr;
  auto server = StartServer({}, AnswerAfter(&raw, milliseconds(60'000)));
  raw = server.get();
  HttpClient client;
  std::promise<StatusOr<ClientResponse>> result;
  client.AsyncRequest(
      http::verb::get, server->base_url(), "/", {}, "",
      [&](StatusOr<ClientResponse> response) { result.set_value(std::move(response)); });
  ASSERT_TRUE(WaitFor([&] { return server->open_connections() == 1; }));
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = Clock::now();
  server.reset();  // The pending 60 s timer holds a writer; it is destroyed, not waited for.
  EXPECT_LT(Clock::now() - start, milliseconds(3'000));
  EXPECT_EQ(result.get_future().get().status().code(), StatusCode::kUnavailable);
}

TEST(HttpServerTest, ThousandConcurrentHeldRequestsOnTwoThreads) {
  constexpr int kRequests = 1'000;
  std::atomic<int> held{0};
  std::atomic<int> peak{0};
  HttpServer* raw = nullptr;
  HttpServerOptions options;
  options.threads = 2;
  auto server = StartServer(options, [&](Request request, std::shared_ptr<ResponseWriter> writer) {
    const int now_held = held.fetch_add(1) + 1;
    int seen = peak.load();
    while (now_held > seen && !peak.compare_exchange_weak(seen, now_held)) {
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(raw->executor(), milliseconds(200));
    timer->async_wait([&held, timer, writer, request = std::move(request)](auto) {
      held.fetch_sub(1);
      writer->Reply(MakeResponse(request, http::status::ok, "ok"));
    });
  });
  raw = server.get();
  HttpClientOptions client_options;
  client_options.threads = 2;
  client_options.max_connections_per_host = kRequests;
  client_options.max_idle_per_host = kRequests;
  HttpClient client(client_options);
  const int threads_before = ThreadsInProcess();

  std::atomic<int> ok{0};
  std::atomic<int> done{0};
  std::atomic<int> max_threads{0};
  for (int i = 0; i < kRequests; ++i) {
    client.AsyncRequest(http::verb::get, server->base_url(), "/hold", {}, "",
                        [&](StatusOr<ClientResponse> response) {
                          if (response.ok() && response->status == 200) ok.fetch_add(1);
                          done.fetch_add(1);
                        });
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        max_threads = std::max(max_threads.load(), ThreadsInProcess());
        return done.load() == kRequests;
      },
      milliseconds(30'000)));
  EXPECT_EQ(ok.load(), kRequests);
  // Held at once (not one after another), and by no more threads than before.
  EXPECT_GE(peak.load(), kRequests / 2);
  EXPECT_EQ(max_threads.load(), threads_before);
  // The server counts an answer once its last byte is written, which may trail the client.
  EXPECT_TRUE(WaitFor([&] { return server->requests_served() == kRequests; }));
}

}  // namespace
}  // namespace agentkv::net
