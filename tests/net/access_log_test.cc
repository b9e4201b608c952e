// The access log: its JSON line, and the entries a server reports through the hook for plain
// answers, streams, rejections and clients that leave (raw sockets on 127.0.0.1).
#include "agentkv/net/access_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/net/http_server.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using testing::RawClient;
using testing::StartServer;
using ::testing::StartsWith;
using testing::WaitFor;

TEST(AccessLogJsonTest, WritesEveryFieldInOrderAndStreamBytesOnlyForStreams) {
  AccessLogEntry entry;
  entry.method = "POST";
  entry.target = "/generate?x=1";
  entry.status = 200;
  entry.response_bytes = 1234;
  entry.stream_bytes = 1000;
  entry.duration_ms = 12.3456;
  entry.remote = "127.0.0.1:41234";
  entry.completed = true;
  EXPECT_EQ(AccessLogJson(entry),
            R"({"event":"access","method":"POST","target":"/generate?x=1","status":200,)"
            R"("response_bytes":1234,"stream_bytes":1000,"duration_ms":12.346,)"
            R"("remote":"127.0.0.1:41234","completed":true})");
  entry.stream_bytes.reset();
  entry.duration_ms = 0.0004;
  entry.completed = false;
  entry.status = 499;
  EXPECT_EQ(AccessLogJson(entry),
            R"({"event":"access","method":"POST","target":"/generate?x=1","status":499,)"
            R"("response_bytes":1234,"duration_ms":0.000,"remote":"127.0.0.1:41234",)"
            R"("completed":false})");
}

TEST(AccessLogJsonTest, EscapesEveryByteOutsidePrintableAscii) {
  AccessLogEntry entry;
  const std::string target = std::string("/a\"b\\c\x01\x7f") + "\xff";
  entry.target = target;
  const std::string line = AccessLogJson(entry);
  EXPECT_THAT(line, ::testing::HasSubstr(R"("target":"/a\"b\\c\u0001\u007f\u00ff")")) << line;
  EXPECT_THAT(line, ::testing::HasSubstr(R"("method":"","target")"));
  // Not a finite, non-negative duration: written as 0 so the line stays valid.
  entry.duration_ms = -1;
  EXPECT_THAT(AccessLogJson(entry), ::testing::HasSubstr(R"("duration_ms":0.000,)"));
}

// Collects the hook's entries with their strings copied.
struct Recorded {
  std::string method;
  std::string target;
  int status = 0;
  uint64_t response_bytes = 0;
  std::optional<uint64_t> stream_bytes;
  double duration_ms = 0;
  std::string remote;
  bool completed = false;
};

class AccessLogServerTest : public ::testing::Test {
 protected:
  void Start(Handler handler, HttpServerOptions options = {}) {
    options.access_log = [this](const AccessLogEntry& e) {
      std::lock_guard<std::mutex> lock(mu_);
      entries_.push_back(Recorded{std::string(e.method), std::string(e.target), e.status,
                                  e.response_bytes, e.stream_bytes, e.duration_ms,
                                  std::string(e.remote), e.completed});
    };
    server_ = StartServer(options, std::move(handler));
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(milliseconds(1000));
  }
  // Waits for the n-th entry (1-based) and returns it.
  Recorded Entry(size_t n) {
    EXPECT_TRUE(WaitFor([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return entries_.size() >= n;
    })) << "no access log entry "
        << n;
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size() >= n ? entries_[n - 1] : Recorded{};
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::vector<Recorded> entries_;
};

TEST_F(AccessLogServerTest, ReportsMethodTargetStatusBytesDurationAndRemote) {
  Start([](Request request, std::shared_ptr<ResponseWriter> writer) {
    std::this_thread::sleep_for(milliseconds(30));  // A measurable duration.
    writer->Reply(MakeResponse(request, http::status::created, "hello", "text/plain"));
  });
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /items?id=7&x=%20 HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::string response = client.ReadResponse(milliseconds(5000));
  ASSERT_THAT(response, StartsWith("HTTP/1.1 201"));
  const Recorded entry = Entry(1);
  EXPECT_EQ(entry.method, "GET");
  EXPECT_EQ(entry.target, "/items?id=7&x=%20");
  EXPECT_EQ(entry.status, 201);
  EXPECT_EQ(entry.response_bytes, response.size()) << response;
  EXPECT_EQ(entry.stream_bytes, std::nullopt);
  EXPECT_GE(entry.duration_ms, 30.0);
  EXPECT_LT(entry.duration_ms, 5000.0);
  EXPECT_EQ(entry.remote, "127.0.0.1:" + std::to_string(client.local_port()));
  EXPECT_TRUE(entry.completed);

  // The next request on the same connection is its own entry.
  ASSERT_TRUE(client.Send("DELETE /items HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_THAT(client.ReadResponse(milliseconds(5000)), StartsWith("HTTP/1.1 201"));
  EXPECT_EQ(Entry(2).method, "DELETE");
  EXPECT_EQ(Entry(2).target, "/items");
  EXPECT_EQ(Count(), 2u);
}

TEST_F(AccessLogServerTest, AStreamIsReportedWhenItEndsWithItsPayloadBytes) {
  Start([](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {{"Content-Type", "text/event-stream"}});
    writer->WriteChunk("data: 1\n\n");   // 9 bytes
    writer->WriteChunk("data: 22\n\n");  // 10 bytes
    writer->EndStream();
  });
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /generate HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"));
  const std::string stream = client.ReadUntil("0\r\n\r\n", milliseconds(5000));
  ASSERT_THAT(stream, ::testing::EndsWith("0\r\n\r\n"));
  const Recorded entry = Entry(1);
  EXPECT_EQ(entry.method, "POST");
  EXPECT_EQ(entry.status, 200);
  EXPECT_EQ(entry.stream_bytes, 19u);
  EXPECT_EQ(entry.response_bytes, stream.size());
  EXPECT_TRUE(entry.completed);
}

TEST_F(AccessLogServerTest, RejectionsByTheServerAreReportedToo) {
  HttpServerOptions options;
  options.max_header_bytes = 256;
  options.max_body_bytes = 4;
  int handled = 0;
  Start(
      [&handled](Request request, std::shared_ptr<ResponseWriter> writer) {
        ++handled;
        writer->Reply(MakeResponse(request, http::status::ok, ""));
      },
      options);
  {
    RawClient client(server_->port());
    ASSERT_TRUE(client.Send("GET /" + std::string(400, 'a') + " HTTP/1.1\r\n\r\n"));
    ASSERT_THAT(client.ReadUntilClose(milliseconds(5000)), StartsWith("HTTP/1.1 431"));
  }
  const Recorded too_large_header = Entry(1);
  EXPECT_EQ(too_large_header.status, 431);
  EXPECT_EQ(too_large_header.method, "");
  EXPECT_EQ(too_large_header.target, "");
  EXPECT_TRUE(too_large_header.completed);
  EXPECT_GT(too_large_header.response_bytes, 0u);
  {
    RawClient client(server_->port());
    ASSERT_TRUE(
        client.Send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n"
                    "123456789"));
    ASSERT_THAT(client.ReadUntilClose(milliseconds(5000)), StartsWith("HTTP/1.1 413"));
  }
  const Recorded too_large_body = Entry(2);
  EXPECT_EQ(too_large_body.status, 413);
  EXPECT_EQ(too_large_body.method, "POST") << "the header was complete";
  EXPECT_EQ(too_large_body.target, "/upload");
  EXPECT_EQ(handled, 0);
}

TEST_F(AccessLogServerTest, AClientThatLeavesBeforeTheAnswerIs499NotCompleted) {
  std::mutex mu;
  std::shared_ptr<ResponseWriter> held;
  Start([&](Request, std::shared_ptr<ResponseWriter> writer) {
    std::lock_guard<std::mutex> lock(mu);
    held = std::move(writer);
  });
  {
    RawClient client(server_->port());
    ASSERT_TRUE(client.Send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"));
    ASSERT_TRUE(WaitFor([&] {
      std::lock_guard<std::mutex> lock(mu);
      return held != nullptr;
    }));
  }  // The client closes.
  const Recorded entry = Entry(1);
  EXPECT_EQ(entry.target, "/slow");
  EXPECT_EQ(entry.status, 499);
  EXPECT_EQ(entry.response_bytes, 0u);
  EXPECT_FALSE(entry.completed);
  std::lock_guard<std::mutex> lock(mu);
  held.reset();
  EXPECT_EQ(Count(), 1u) << "reported once";
}

}  // namespace
}  // namespace agentkv::net
