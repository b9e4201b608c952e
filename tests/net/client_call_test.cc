// One client request's phases (client_call.cc): connect, response headers and body deadlines,
// size limits, streaming chunk by chunk, cancellation, and the retry on a reused connection the
// upstream had closed.
#include "agentkv/net/client_call.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::StartServer;
using testing::WaitFor;

// A listening socket on 127.0.0.1:0 driven by hand.
class RawListener {
 public:
  explicit RawListener(int backlog) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd_, backlog), 0);
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~RawListener() {
    for (int fd : fillers_) ::close(fd);
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Accepts one connection within `timeout`; -1 if none came.
  int Accept(milliseconds timeout) {
    pollfd entry{fd_, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) <= 0) return -1;
    return ::accept(fd_, nullptr, nullptr);
  }

  // Opens connections that are never accepted until one no longer completes: the accept queue
  // is then full and further SYNs are dropped. False if that never happens.
  bool FillAcceptQueue() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(port_);
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
      fillers_.push_back(fd);
      pollfd entry{fd, POLLOUT, 0};
      if (::poll(&entry, 1, 200) == 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> fillers_;
};

std::string ReadRequestHead(int fd) {
  std::string data;
  char buffer[4096];
  while (data.find("\r\n\r\n") == std::string::npos) {
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, 2'000) <= 0) break;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    data.append(buffer, static_cast<size_t>(got));
  }
  return data;
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;
    data.remove_prefix(static_cast<size_t>(sent));
  }
}

// Keeps writers so that nothing is answered until the test says so.
struct HeldWriters {
  Handler handler() {
    return [this](Request, std::shared_ptr<ResponseWriter> writer) {
      std::lock_guard lock(mu);
      writers.push_back(std::move(writer));
    };
  }
  size_t size() {
    std::lock_guard lock(mu);
    return writers.size();
  }
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
};

TEST(ClientCallTest, ConnectRefusedIsUnavailable) {
  uint16_t port = 0;
  {
    auto server = StartServer({}, [](Request, std::shared_ptr<ResponseWriter>) {});
    port = server->port();
  }
  HttpClient client;
  auto response = client.Request(http::verb::get, "http://127.0.0.1:" + std::to_string(port), "/");
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("cannot connect"));
}

TEST(ClientCallTest, ConnectTimeoutWhenTheAcceptQueueIsFull) {
  RawListener listener(/*backlog=*/0);
  if (!listener.FillAcceptQueue()) GTEST_SKIP() << "the kernel accepted every connection";
  HttpClientOptions options;
  options.connect_timeout = milliseconds(300);
  HttpClient client(options);
  const auto start = testing::Clock::now();
  auto response = client.Request(http::verb::get, listener.base_url(), "/");
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("connect"));
  EXPECT_GE(testing::Clock::now() - start, milliseconds(250));
}

TEST(ClientCallTest, HeaderTimeoutWhenTheServerNeverAnswers) {
  HeldWriters held;
  auto server = StartServer({}, held.handler());
  HttpClientOptions options;
  options.header_timeout = milliseconds(200);
  HttpClient client(options);
  auto response = client.Request(http::verb::get, server->base_url(), "/");
  EXPECT_EQ(response.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(response.status().message(), HasSubstr("response headers"));
  EXPECT_EQ(client.pooled_connections(), 0);
}

TEST(ClientCallTest, BodyTimeoutWhenAStreamStalls) {
  HeldWriters held;
  auto server = StartServer({}, [&](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {{"Content-Type", "text/event-stream"}});
    writer->WriteChunk("data: first\n\n");
    held.handler()(std::move(request), std::move(writer));  // ...and nothing more.
  });
  HttpClientOptions options;
  options.body_timeout = milliseconds(200);
  HttpClient client(options);
  std::atomic<int> status{0};
  std::vector<std::string> chunks;
  std::promise<Status> done;
  client.AsyncStream(
      http::verb::get, server->base_url(), "/", {}, "",
      [&](int code, const HeaderList&) { status = code; },
      [&](std::string_view chunk) { chunks.emplace_back(chunk); },
      [&](Status result) { done.set_value(result); });
  const Status result = done.get_future().get();
  EXPECT_EQ(result.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(result.message(), HasSubstr("response body"));
  EXPECT_EQ(status.load(), 200);
  EXPECT_THAT(chunks, ::testing::ElementsAre("data: first\n\n"));
}

TEST(ClientCallTest, ResponseBodyOverMaxResponseBytesIsResourceExhausted) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, std::string(10'000, 'z')));
  });
  HttpClientOptions options;
  options.max_response_bytes = 1'000;
  HttpClient client(options);
  auto response = client.Request(http::verb::get, server->base_url(), "/");
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(response.status().message(), HasSubstr("max_response_bytes"));
  EXPECT_EQ(client.pooled_connections(), 0);
}

TEST(ClientCallTest, ResponseHeadersOverMaxHeaderBytesAreResourceExhausted) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    Response response = MakeResponse(request, http::status::ok, "x");
    response.set("X-Big", std::string(4'000, 'h'));
    writer->Reply(std::move(response));
  });
  HttpClientOptions options;
  options.max_header_bytes = 1'024;
  HttpClient client(options);
  auto response = client.Request(http::verb::get, server->base_url(), "/");
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(response.status().message(), HasSubstr("max_header_bytes"));
}

TEST(ClientCallTest, StreamPassesEachChunkOnBeforeTheStreamEnds) {
  constexpr int kChunks = 5;
  std::atomic<int> sent{0};
  HttpServer* raw = nullptr;
  auto server = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {{"Content-Type", "text/event-stream"}});
    // One event every 100 ms from a timer on the server's executor.
    // Only the pending wait owns the tick function, so nothing outlives the server.
    auto timer = std::make_shared<boost::asio::steady_timer>(raw->executor());
    auto tick = std::make_shared<std::function<void(int)>>();
    *tick = [&sent, timer, writer, weak = std::weak_ptr(tick)](int i) {
      if (i == kChunks) {
        writer->EndStream();
        return;
      }
      writer->WriteChunk("data: " + std::to_string(i) + "\n\n");
      sent.store(i + 1);
      timer->expires_after(milliseconds(100));
      timer->async_wait([self = weak.lock(), i](auto) { (*self)(i + 1); });
    };
    (*tick)(0);
  });
  raw = server.get();
  HttpClient client;
  std::mutex mu;
  std::vector<std::string> chunks;
  std::vector<int> sent_when_received;
  HeaderList headers;
  std::promise<Status> done;
  client.AsyncStream(
      http::verb::post, server->base_url(), "/generate", {}, "{\"stream\":true}",
      [&](int status, const HeaderList& received) {
        EXPECT_EQ(status, 200);
        headers = received;
      },
      [&](std::string_view chunk) {
        std::lock_guard lock(mu);
        chunks.emplace_back(chunk);
        sent_when_received.push_back(sent.load());
      },
      [&](Status status) { done.set_value(status); });
  const Status status = done.get_future().get();
  EXPECT_TRUE(status.ok()) << status;
  std::lock_guard lock(mu);
  ASSERT_EQ(chunks.size(), static_cast<size_t>(kChunks));
  for (int i = 0; i < kChunks; ++i) {
    EXPECT_EQ(chunks[static_cast<size_t>(i)], "data: " + std::to_string(i) + "\n\n");
  }
  // The first event arrived while the server had sent only it: nothing was held back.
  EXPECT_EQ(sent_when_received.front(), 1);
  EXPECT_LT(sent_when_received.front(), kChunks);
  EXPECT_THAT(headers, ::testing::Contains(std::pair<std::string, std::string>(
                           "Content-Type", "text/event-stream")));
  // The connection is reused after a complete stream.
  EXPECT_EQ(client.pooled_connections(), 1);
}

TEST(ClientCallTest, StreamOfAPlainBodyArrivesAsChunks) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, "plain body", "text/plain"));
  });
  HttpClient client;
  std::string body;
  std::promise<Status> done;
  client.AsyncStream(
      http::verb::get, server->base_url(), "/", {}, "", [](int, const HeaderList&) {},
      [&](std::string_view chunk) { body += chunk; },
      [&](Status status) { done.set_value(status); });
  EXPECT_TRUE(done.get_future().get().ok());
  EXPECT_EQ(body, "plain body");
}

TEST(ClientCallTest, CancelClosesTheStreamAndTheServerSeesTheClientGo) {
  std::atomic<bool> server_saw_gone{false};
  HttpServer* raw = nullptr;
  auto server = StartServer({}, [&](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->OnClientGone([&] { server_saw_gone = true; });
    writer->StartStream(http::status::ok, {});
    auto timer = std::make_shared<boost::asio::steady_timer>(raw->executor());
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [timer, writer, weak = std::weak_ptr(tick)] {
      if (writer->client_gone()) return;
      writer->WriteChunk("data: tick\n\n");
      timer->expires_after(milliseconds(20));
      timer->async_wait([self = weak.lock()](auto) { (*self)(); });
    };
    (*tick)();
  });
  raw = server.get();
  HttpClient client;
  std::atomic<int> chunks{0};
  std::promise<Status> done;
  std::shared_ptr<HttpClient::StreamHandle> handle;
  std::mutex handle_mu;
  {
    std::lock_guard lock(handle_mu);
    handle = client.AsyncStream(
        http::verb::get, server->base_url(), "/", {}, "", [](int, const HeaderList&) {},
        [&](std::string_view) {
          if (chunks.fetch_add(1) == 0) {
            std::lock_guard inner(handle_mu);
            handle->Cancel();
          }
        },
        [&](Status status) { done.set_value(status); });
  }
  const Status status = done.get_future().get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("cancelled"));
  EXPECT_TRUE(WaitFor([&] { return server_saw_gone.load(); }));
  EXPECT_EQ(client.pooled_connections(), 0);
  handle->Cancel();  // Idempotent after the end.
}

// Streams `total` bytes in 64 KiB chunks as fast as the server takes them, then ends.
Handler BulkStream(size_t total) {
  return [total](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {});
    const std::string piece(64 * 1024, 'b');
    for (size_t sent = 0; sent < total; sent += piece.size()) writer->WriteChunk(piece);
    writer->EndStream();
  };
}

TEST(ClientCallTest, AReadGateThatSaysWaitStopsTheReadsUntilResumed) {
  constexpr size_t kTotal = 32u << 20;
  HttpServerOptions server_options;
  server_options.max_stream_buffer_bytes = 64u << 20;
  auto server = StartServer(server_options, BulkStream(kTotal));
  // What the callbacks touch outlives the client, so an early return cannot race them.
  std::atomic<size_t> received{0};
  std::mutex mu;
  std::function<void()> resume;
  std::promise<Status> done;
  auto ended = done.get_future();
  HttpClientOptions options;
  // Shorter than the pause, so a timer left running while paused would end the call; long
  // enough that a loaded machine (sanitizers, two cores) delivers the first chunk in time.
  options.body_timeout = milliseconds(1'000);
  HttpClient client(options);
  client.AsyncStream(
      http::verb::get, server->base_url(), "/", {}, "", [](int, const HeaderList&) {},
      [&](std::string_view chunk) { received.fetch_add(chunk.size()); },
      [&](Status status) { done.set_value(status); },
      [&](std::function<void()> r) {
        std::lock_guard lock(mu);
        if (received.load() == 0 || resume) return true;
        resume = std::move(r);
        return false;
      });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return resume != nullptr;
  })) << (ended.wait_for(milliseconds(0)) == std::future_status::ready
              ? "the call ended first: " + ended.get().ToString()
              : "the call neither paused nor ended");
  std::this_thread::sleep_for(milliseconds(200));
  const size_t paused_at = received.load();
  std::this_thread::sleep_for(milliseconds(1'300));
  EXPECT_EQ(received.load(), paused_at) << "the call read while paused";
  EXPECT_LT(paused_at, kTotal);
  std::function<void()> go;
  {
    std::lock_guard lock(mu);
    go = resume;
  }
  go();
  const Status status = ended.get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(received.load(), kTotal);
}

TEST(ClientCallTest, APausedStreamEndsOnCancelAndResumesWhenItsResumeIsDropped) {
  auto server = StartServer({}, BulkStream(4u << 20));
  HttpClient client;
  {
    // Paused for good (the resume is kept): a cancellation still ends the call at once.
    std::mutex mu;
    std::function<void()> kept;
    std::promise<Status> done;
    std::shared_ptr<HttpClient::StreamHandle> handle = client.AsyncStream(
        http::verb::get, server->base_url(), "/", {}, "", [](int, const HeaderList&) {},
        [](std::string_view) {}, [&](Status status) { done.set_value(status); },
        [&](std::function<void()> r) {
          std::lock_guard lock(mu);
          kept = std::move(r);
          return false;
        });
    ASSERT_TRUE(WaitFor([&] {
      std::lock_guard lock(mu);
      return kept != nullptr;
    }));
    handle->Cancel();
    const Status status = done.get_future().get();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable);
    std::function<void()> late;
    {
      std::lock_guard lock(mu);
      late = std::move(kept);
    }
    late();  // After the end: a no-op.
  }
  {
    // A gate that says wait but drops the resume must not stall the call.
    std::atomic<int> pauses{0};
    std::atomic<size_t> received{0};
    std::promise<Status> done;
    client.AsyncStream(
        http::verb::get, server->base_url(), "/", {}, "", [](int, const HeaderList&) {},
        [&](std::string_view chunk) { received.fetch_add(chunk.size()); },
        [&](Status status) { done.set_value(status); },
        [&](std::function<void()>) { return pauses.fetch_add(1) % 2 == 1; });
    const Status status = done.get_future().get();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(received.load(), 4u << 20);
    EXPECT_GT(pauses.load(), 1);
  }
}

TEST(ClientCallTest, RetriesOnceWhenAReusedConnectionWasClosedUnderIt) {
  RawListener listener(/*backlog=*/16);
  std::thread upstream([&] {
    // Connection 1 answers one request, then reads the next one and closes without an answer
    // (as an upstream closing an idle connection at that moment would). Connection 2 answers.
    const int first = listener.Accept(milliseconds(5'000));
    ASSERT_GE(first, 0);
    ReadRequestHead(first);
    SendAll(first, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none");
    ReadRequestHead(first);
    ::close(first);
    const int second = listener.Accept(milliseconds(5'000));
    ASSERT_GE(second, 0);
    ReadRequestHead(second);
    SendAll(second, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo");
    ::close(second);
  });
  HttpClient client;
  auto one = client.Request(http::verb::get, listener.base_url(), "/");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->body, "one");
  auto two = client.Request(http::verb::get, listener.base_url(), "/");
  upstream.join();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->body, "two");
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(ClientCallTest, AFreshConnectionClosedWithoutAnswerIsUnavailable) {
  RawListener listener(/*backlog=*/16);
  std::thread upstream([&] {
    const int fd = listener.Accept(milliseconds(5'000));
    ASSERT_GE(fd, 0);
    ReadRequestHead(fd);
    ::close(fd);
  });
  HttpClient client;
  auto response = client.Request(http::verb::get, listener.base_url(), "/");
  upstream.join();
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(response.status().message(), HasSubstr("response headers"));
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST(ClientCallTest, StaleIdleConnectionsAreNotReused) {
  HttpServerOptions server_options;
  server_options.idle_timeout = milliseconds(100);
  auto server =
      StartServer(server_options, [](Request request, std::shared_ptr<ResponseWriter> writer) {
        writer->Reply(MakeResponse(request, http::status::ok, "ok"));
      });
  HttpClient client;
  ASSERT_TRUE(client.Request(http::verb::get, server->base_url(), "/").ok());
  ASSERT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
  auto again = client.Request(http::verb::get, server->base_url(), "/");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(client.connections_opened(), 2);
}

TEST(ClientCallTest, IdleConnectionsExpireFromThePool) {
  auto server = StartServer({}, [](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, "ok"));
  });
  HttpClientOptions options;
  options.idle_timeout = milliseconds(100);
  HttpClient client(options);
  ASSERT_TRUE(client.Request(http::verb::get, server->base_url(), "/").ok());
  EXPECT_EQ(client.pooled_connections(), 1);
  EXPECT_TRUE(WaitFor([&] { return client.pooled_connections() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
}

}  // namespace
}  // namespace agentkv::net
