// Protocol-level tests of a server connection (server_connection.cc), spoken over raw loopback
// sockets so that partial, oversized, pipelined and malformed requests can be sent.
#include "agentkv/net/server_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/net/http_server.h"
#include "tests/net/net_test_util.h"

namespace agentkv::net {
namespace {

using std::chrono::milliseconds;
using testing::Clock;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::RawClient;
using testing::StartServer;
using ::testing::StartsWith;
using testing::WaitFor;

// Answers "echo:<target>:<body>".
Handler Echo() {
  return [](Request request, std::shared_ptr<ResponseWriter> writer) {
    std::string body = "echo:" + std::string(request.target()) + ":" + request.body();
    writer->Reply(MakeResponse(request, http::status::ok, std::move(body), "text/plain"));
  };
}

// Keeps writers so that a test decides when (or whether) to answer.
struct HeldWriters {
  Handler handler() {
    return [this](Request, std::shared_ptr<ResponseWriter> writer) {
      std::lock_guard lock(mu);
      writers.push_back(std::move(writer));
    };
  }
  std::shared_ptr<ResponseWriter> Wait(size_t index = 0) {
    WaitFor([&] {
      std::lock_guard lock(mu);
      return writers.size() > index;
    });
    std::lock_guard lock(mu);
    return writers.size() > index ? writers[index] : nullptr;
  }
  std::mutex mu;
  std::vector<std::shared_ptr<ResponseWriter>> writers;
};

HttpServerOptions SmallOptions() {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  options.max_body_bytes = 1024;
  return options;
}

TEST(ServerConnectionTest, KeepsTheConnectionAliveAcrossRequests) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(client.ReadResponse(milliseconds(2'000)), EndsWith("echo:/a:"));
  ASSERT_TRUE(client.Send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz"));
  const std::string second = client.ReadResponse(milliseconds(2'000));
  EXPECT_THAT(second, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(second, EndsWith("echo:/b:xyz"));
  EXPECT_TRUE(WaitFor([&] { return server->requests_served() == 2; }));
  EXPECT_EQ(server->open_connections(), 1);
}

TEST(ServerConnectionTest, ClosesAfterConnectionClose) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  const std::string response = client.ReadUntilClose(milliseconds(2'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(response, HasSubstr("Connection: close"));
  EXPECT_THAT(response, EndsWith("echo:/a:"));
}

TEST(ServerConnectionTest, Http10ClosesUnlessKeepAliveIsAsked) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /old HTTP/1.0\r\n\r\n"));
  bool closed = false;
  const std::string response = client.ReadUntilClose(milliseconds(2'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(response, StartsWith("HTTP/1.0 200 OK"));
}

TEST(ServerConnectionTest, AnswersPipelinedRequestsInOrder) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
                  "GET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  const std::string all = client.ReadUntilClose(milliseconds(3'000), &closed);
  EXPECT_TRUE(closed);
  const size_t one = all.find("echo:/1:");
  const size_t two = all.find("echo:/2:");
  const size_t three = all.find("echo:/3:");
  ASSERT_NE(one, std::string::npos) << all;
  ASSERT_NE(two, std::string::npos) << all;
  ASSERT_NE(three, std::string::npos) << all;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
}

TEST(ServerConnectionTest, HeadersOverTheLimitGet431AndClose) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2'000, 'a') + "\r\n\r\n"));
  bool closed = false;
  const std::string response = client.ReadUntilClose(milliseconds(3'000), &closed);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 431 Request Header Fields Too Large"));
  EXPECT_THAT(response,
              HasSubstr(R"({"error":{"message":"request headers exceed 1024 bytes","code":431}})"));
  EXPECT_TRUE(closed);
  EXPECT_EQ(server->requests_served(), 0);
}

TEST(ServerConnectionTest, BodyOverTheLimitGets413EvenWhileTheClientSendsIt) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  // The whole body goes out; the server answers as soon as Content-Length shows the excess
  // and keeps draining, so the client gets the answer rather than a reset.
  ASSERT_TRUE(client.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n" +
                          std::string(200'000, 'b')));
  bool closed = false;
  const std::string response = client.ReadUntilClose(milliseconds(3'000), &closed);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 413 Payload Too Large"));
  EXPECT_TRUE(closed);
}

TEST(ServerConnectionTest, ChunkedBodyOverTheLimitGets413) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  std::string request = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) request += "200\r\n" + std::string(512, 'c') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_TRUE(client.Send(request));
  EXPECT_THAT(client.ReadUntilClose(milliseconds(3'000)),
              StartsWith("HTTP/1.1 413 Payload Too Large"));
}

TEST(ServerConnectionTest, ChunkedBodyWithinTheLimitIsDecoded) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n"
      "0\r\n\r\n"));
  EXPECT_THAT(client.ReadResponse(milliseconds(2'000)), EndsWith("echo:/c:abcde"));
}

TEST(ServerConnectionTest, MalformedRequestGets400) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("THIS IS NOT HTTP\r\n\r\n"));
  bool closed = false;
  EXPECT_THAT(client.ReadUntilClose(milliseconds(2'000), &closed),
              StartsWith("HTTP/1.1 400 Bad Request"));
  EXPECT_TRUE(closed);
}

// Request smuggling (RFC 9112 sections 3.2, 6.1, 6.3, 7.1.2): a refused request is followed by the
// request a proxy in front would not see ("GET /agentic_kv?reset=1", hidden in the first
// one's body). Each case is answered at once with its status and "Connection: close", the
// connection closes, and no request at all reaches the handler.
TEST(ServerConnectionTest, AmbiguousFramingIsRefusedAndClosesBeforeAnyHandler) {
  struct Case {
    std::string name;
    std::string head;  // Request line and fields, without the blank line.
    std::string body;  // Sent right after the head.
    std::string status_line;
  };
  const std::string hidden = "GET /agentic_kv?reset=1 HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string post = "POST /close HTTP/1.1\r\nHost: x\r\n";
  const std::string te = "Transfer-Encoding: ";
  const std::string not_implemented = "HTTP/1.1 501 Not Implemented";
  const std::string bad = "HTTP/1.1 400 Bad Request";
  const std::vector<Case> cases = {
      {"gzip", post + te + "gzip\r\n", hidden, not_implemented},
      {"xchunked", post + te + "xchunked\r\n", hidden, not_implemented},
      {"gzip with 100-continue", post + te + "gzip\r\nExpect: 100-continue\r\n", hidden,
       not_implemented},
      {"gzip, chunked", post + te + "gzip, chunked\r\n", "0\r\n\r\n" + hidden, not_implemented},
      {"chunked, chunked", post + te + "chunked, chunked\r\n", hidden, bad},
      {"chunked in two fields", post + te + "chunked\r\n" + te + "chunked\r\n",
       "0\r\n\r\n" + hidden, bad},
      {"chunked, gzip", post + te + "chunked, gzip\r\n", hidden, bad},
      {"unknown coding and Content-Length",
       post + te + "gzip\r\nContent-Length: " + std::to_string(hidden.size()) + "\r\n", hidden,
       bad},
      {"Content-Length and chunked", post + "Content-Length: 5\r\n" + te + "chunked\r\n",
       "0\r\n\r\n" + hidden, bad},
      {"chunked on HTTP/1.0", "POST /close HTTP/1.0\r\n" + te + "chunked\r\n", "0\r\n\r\n" + hidden,
       bad},
      {"no Host", "GET /a HTTP/1.1\r\n", hidden, bad},
      {"two Hosts", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n", hidden, bad},
      {"chunk line ended by a bare LF", post + te + "chunked\r\n", "5\n", bad},
      {"chunk data followed by a bare LF", post + te + "chunked\r\n", "3\r\nabc\n", bad},
      {"a second Host in the trailer", post + te + "chunked\r\n",
       "3\r\nabc\r\n0\r\nHost: y\r\n\r\n" + hidden, bad},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    HttpServerOptions options = SmallOptions();
    options.body_timeout = milliseconds(30'000);  // A stall would show as a missing answer.
    std::atomic<int> handled{0};
    auto server =
        StartServer(options, [&](Request request, std::shared_ptr<ResponseWriter> writer) {
          ++handled;
          writer->Reply(MakeResponse(request, http::status::ok, "handled", "text/plain"));
        });
    RawClient client(server->port());
    ASSERT_TRUE(client.Send(c.head + "\r\n" + c.body));
    const std::string response = client.ReadResponse(milliseconds(3'000));
    EXPECT_THAT(response, StartsWith(c.status_line));
    EXPECT_THAT(response, HasSubstr("Connection: close"));
    bool closed = false;
    EXPECT_EQ(client.ReadUntilClose(milliseconds(3'000), &closed), "");  // No second answer.
    EXPECT_TRUE(closed);
    client.Close();  // Ends the server's lingering read at once.
    EXPECT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
    EXPECT_EQ(handled.load(), 0);
    EXPECT_EQ(server->requests_served(), 0);
  }
}

// A request that follows these rules still works on the same connection, pipelined.
TEST(ServerConnectionTest, ChunkedAmongEmptyListElementsAndHttp10WithoutHostAreServed) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(
      client.Send("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: , chunked\r\n\r\n"
                  "3\r\nabc\r\n0\r\n\r\nGET /old HTTP/1.0\r\n\r\n"));
  bool closed = false;
  const std::string all = client.ReadUntilClose(milliseconds(3'000), &closed);
  EXPECT_THAT(all, HasSubstr("echo:/c:abc"));
  EXPECT_THAT(all, EndsWith("echo:/old:"));
  EXPECT_TRUE(closed);
}

TEST(ServerConnectionTest, PartialHeadersTimeOutWith408AndClose) {
  HttpServerOptions options = SmallOptions();
  options.header_timeout = milliseconds(300);
  auto server = StartServer(options, Echo());
  RawClient client(server->port());
  const auto start = Clock::now();
  ASSERT_TRUE(client.Send("GET /slow HTTP/1.1\r\nHost: x\r\n"));  // ...and stalls.
  bool closed = false;
  const std::string response = client.ReadUntilClose(milliseconds(5'000), &closed);
  const auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 408 Request Timeout"));
  EXPECT_GE(elapsed, milliseconds(250));
  EXPECT_LT(elapsed, milliseconds(3'000));
}

TEST(ServerConnectionTest, SilentConnectionIsClosedAfterHeaderTimeoutWithoutAnswer) {
  HttpServerOptions options = SmallOptions();
  options.header_timeout = milliseconds(200);
  auto server = StartServer(options, Echo());
  RawClient client(server->port());
  bool closed = false;
  EXPECT_EQ(client.ReadUntilClose(milliseconds(5'000), &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
}

TEST(ServerConnectionTest, SlowBodyTimesOutWith408) {
  HttpServerOptions options = SmallOptions();
  options.body_timeout = milliseconds(300);
  auto server = StartServer(options, Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"));
  bool closed = false;
  EXPECT_THAT(client.ReadUntilClose(milliseconds(5'000), &closed),
              StartsWith("HTTP/1.1 408 Request Timeout"));
  EXPECT_TRUE(closed);
}

TEST(ServerConnectionTest, IdleKeptAliveConnectionClosesAfterIdleTimeout) {
  HttpServerOptions options = SmallOptions();
  options.idle_timeout = milliseconds(200);
  auto server = StartServer(options, Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(client.ReadResponse(milliseconds(2'000)), EndsWith("echo:/a:"));
  const auto start = Clock::now();
  bool closed = false;
  EXPECT_EQ(client.ReadUntilClose(milliseconds(5'000), &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_GE(Clock::now() - start, milliseconds(150));
}

TEST(ServerConnectionTest, Expect100ContinueGetsAnInterimResponse) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send(
      "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_EQ(client.ReadUntil("\r\n\r\n", milliseconds(2'000)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.Send("body"));
  EXPECT_THAT(client.ReadResponse(milliseconds(2'000)), EndsWith("echo:/e:body"));
}

TEST(ServerConnectionTest, HeadAnswersCarryTheLengthButNoBody) {
  auto server = StartServer(SmallOptions(), Echo());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string response = client.ReadUntilClose(milliseconds(2'000));
  EXPECT_THAT(response, HasSubstr("Content-Length: 8\r\n"));  // "echo:/h:"
  EXPECT_THAT(response, EndsWith("\r\n\r\n"));
}

TEST(ServerConnectionTest, AWriterDroppedWithoutAnswerYields500) {
  auto server = StartServer(SmallOptions(), [](Request, std::shared_ptr<ResponseWriter>) {});
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string response = client.ReadResponse(milliseconds(2'000));
  EXPECT_THAT(response, StartsWith("HTTP/1.1 500 Internal Server Error"));
  EXPECT_THAT(response, HasSubstr("dropped the request"));
}

TEST(ServerConnectionTest, AThrowingHandlerYields500AndTheServerGoesOn) {
  auto server =
      StartServer(SmallOptions(), [](Request request, std::shared_ptr<ResponseWriter> writer) {
        if (request.target() == "/throw") throw std::runtime_error("boom");
        writer->Reply(MakeResponse(request, http::status::ok, "fine"));
      });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string response = client.ReadResponse(milliseconds(2'000));
  EXPECT_THAT(response, StartsWith("HTTP/1.1 500"));
  EXPECT_THAT(response, HasSubstr("boom"));
  ASSERT_TRUE(client.Send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_THAT(client.ReadResponse(milliseconds(2'000)), EndsWith("fine"));
}

TEST(ServerConnectionTest, SecondReplyIsIgnored) {
  auto server =
      StartServer(SmallOptions(), [](Request request, std::shared_ptr<ResponseWriter> writer) {
        writer->Reply(MakeResponse(request, http::status::ok, "first"));
        writer->Reply(MakeResponse(request, http::status::ok, "second"));
        writer->StartStream(http::status::ok, {});
      });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string all = client.ReadUntilClose(milliseconds(2'000));
  EXPECT_THAT(all, EndsWith("first"));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("second")));
}

TEST(ServerConnectionTest, StreamIsFramedAsChunks) {
  auto server = StartServer(SmallOptions(), [](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {{"Content-Type", "text/event-stream"},
                                           {"Content-Length", "99"},
                                           {"X-Bad", "a\r\nInjected: 1"}});
    writer->WriteChunk("data: 1\n\n");
    writer->WriteChunk("");  // Ignored: it would end the stream.
    writer->WriteChunk("data: [DONE]\n\n");
    writer->EndStream();
    writer->WriteChunk("late");  // Ignored.
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET /s HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string all = client.ReadUntil("0\r\n\r\n", milliseconds(2'000));
  EXPECT_THAT(all, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(all, HasSubstr("Content-Type: text/event-stream\r\n"));
  EXPECT_THAT(all, HasSubstr("Transfer-Encoding: chunked\r\n"));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("Content-Length")));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("Injected")));
  EXPECT_THAT(all, EndsWith("\r\n\r\n9\r\ndata: 1\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"));
  // The connection stays usable after a complete stream.
  EXPECT_TRUE(WaitFor([&] { return server->requests_served() == 1; }));
  EXPECT_EQ(server->open_connections(), 1);
}

TEST(ServerConnectionTest, Http10StreamIsRawAndEndsWithClose) {
  auto server = StartServer(SmallOptions(), [](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {});
    writer->WriteChunk("abc");
    writer->WriteChunk("def");
    writer->EndStream();
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.0\r\n\r\n"));
  bool closed = false;
  const std::string all = client.ReadUntilClose(milliseconds(2'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(all, StartsWith("HTTP/1.0 200 OK\r\n"));
  EXPECT_THAT(all, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(all, EndsWith("\r\n\r\nabcdef"));
}

TEST(ServerConnectionTest, AbandonedStreamClosesTheConnectionWithoutTheLastChunk) {
  auto server = StartServer(SmallOptions(), [](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {});
    writer->WriteChunk("partial");
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  const std::string all = client.ReadUntilClose(milliseconds(2'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(all, EndsWith("7\r\npartial\r\n"));
  EXPECT_EQ(server->requests_served(), 0);
}

TEST(ServerConnectionTest, AbortStreamSendsWhatWasQueuedThenBreaksTheBody) {
  auto server = StartServer(SmallOptions(), [](Request, std::shared_ptr<ResponseWriter> writer) {
    writer->StartStream(http::status::ok, {});
    writer->WriteChunk("partial");
    writer->AbortStream();
    writer->WriteChunk("late");  // Ignored.
    writer->EndStream();         // Ignored: the stream is broken off already.
  });
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  const std::string all = client.ReadUntilClose(milliseconds(2'000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(all, EndsWith("7\r\npartial\r\n"));
  EXPECT_EQ(server->requests_served(), 0);
}

TEST(ServerConnectionTest, OnClientGoneFiresWhenTheClientDisconnectsMidRequest) {
  HeldWriters held;
  auto server = StartServer(SmallOptions(), held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("POST /work HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"));
  auto writer = held.Wait();
  ASSERT_NE(writer, nullptr);
  std::atomic<int> fired{0};
  writer->OnClientGone([&] { fired.fetch_add(1); });
  EXPECT_FALSE(writer->client_gone());
  client.Close();
  EXPECT_TRUE(WaitFor([&] { return fired.load() == 1; }));
  EXPECT_TRUE(writer->client_gone());
  // Registered after the fact: runs at once, on this thread.
  bool late = false;
  writer->OnClientGone([&] { late = true; });
  EXPECT_TRUE(late);
  writer->Reply(Response{http::status::ok, 11});  // Ignored; must not crash.
  EXPECT_EQ(fired.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
}

TEST(ServerConnectionTest, OnClientGoneFiresOnAReset) {
  HeldWriters held;
  auto server = StartServer(SmallOptions(), held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto writer = held.Wait();
  ASSERT_NE(writer, nullptr);
  std::atomic<bool> fired{false};
  writer->OnClientGone([&] { fired = true; });
  client.Abort();
  EXPECT_TRUE(WaitFor([&] { return fired.load(); }));
}

TEST(ServerConnectionTest, OnClientGoneNeverFiresAfterTheAnswer) {
  HeldWriters held;
  auto server = StartServer(SmallOptions(), held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto writer = held.Wait();
  ASSERT_NE(writer, nullptr);
  std::atomic<bool> fired{false};
  writer->OnClientGone([&] { fired = true; });
  writer->Reply(Response{http::status::no_content, 11});
  EXPECT_THAT(client.ReadUntil("\r\n\r\n", milliseconds(2'000)), StartsWith("HTTP/1.1 204"));
  client.Close();
  EXPECT_TRUE(WaitFor([&] { return server->open_connections() == 0; }));
  EXPECT_FALSE(fired.load());
  EXPECT_FALSE(writer->client_gone());
}

TEST(ServerConnectionTest, StreamBufferOverflowClosesTheConnection) {
  HttpServerOptions options = SmallOptions();
  options.max_stream_buffer_bytes = 64 * 1024;
  HeldWriters held;
  auto server = StartServer(options, held.handler());
  RawClient client(server->port());  // Never reads the stream.
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto writer = held.Wait();
  ASSERT_NE(writer, nullptr);
  std::atomic<bool> fired{false};
  writer->OnClientGone([&] { fired = true; });
  writer->StartStream(http::status::ok, {});
  // Far more than the socket buffers hold: the queue must overflow and the server give up.
  const std::string piece(16 * 1024, 'x');
  for (int i = 0; i < 8'192 && !writer->client_gone(); ++i) writer->WriteChunk(piece);
  EXPECT_TRUE(WaitFor([&] { return fired.load(); }));
  EXPECT_TRUE(writer->client_gone());
}

TEST(ServerConnectionTest, OnStreamDrainedWaitsUntilTheClientReadsTheQueue) {
  HttpServerOptions options = SmallOptions();
  options.max_stream_buffer_bytes = 64 << 20;
  HeldWriters held;
  auto server = StartServer(options, held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto writer = held.Wait();
  ASSERT_NE(writer, nullptr);
  writer->StartStream(http::status::ok, {});
  // Far more than the socket buffers hold, so that most of it stays queued.
  const std::string piece(64 * 1024, 'x');
  for (int i = 0; i < 256; ++i) writer->WriteChunk(piece);
  std::atomic<int> drained{0};
  writer->OnStreamDrained(0, [&] { drained.fetch_add(1); });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(drained.load(), 0);
  EXPECT_GT(writer->stream_buffered_bytes(), size_t{1} << 20);
  EXPECT_GT(server->inflight_bytes(), int64_t{1} << 20);
  // The client reads everything: the waiter runs once, and the queue is empty.
  size_t read = 0;
  while (read < 16u << 20 && drained.load() == 0) {
    read += client.ReadUntil("never", milliseconds(20)).size();
  }
  EXPECT_TRUE(WaitFor([&] { return drained.load() == 1; }));
  EXPECT_EQ(writer->stream_buffered_bytes(), 0u);
  // The queue already drained: a new waiter runs at once, on this thread.
  writer->OnStreamDrained(0, [&] { drained.fetch_add(1); });
  EXPECT_EQ(drained.load(), 2);
  writer->EndStream();
}

TEST(ServerConnectionTest, ABodyPastMaxInflightBytesGets503BeforeItIsRead) {
  HttpServerOptions options;
  options.max_inflight_bytes = 1 << 20;
  auto server = StartServer(options, Echo());
  // Holds 800 KiB of the budget: its body is announced and never finished.
  RawClient holder(server->port());
  ASSERT_TRUE(holder.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 819200\r\n\r\nabc"));
  ASSERT_TRUE(WaitFor([&] { return server->inflight_bytes() >= 819200; }));
  RawClient refused(server->port());
  ASSERT_TRUE(refused.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 409600\r\n\r\n"));
  const std::string answer = refused.ReadUntilClose(milliseconds(3'000));
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(answer, HasSubstr("Retry-After: 1"));
  EXPECT_THAT(answer, HasSubstr("max_inflight_bytes"));
  EXPECT_EQ(server->inflight_refused(), 1);
  // A small body still fits, and a request without one is always read.
  RawClient small(server->port());
  ASSERT_TRUE(small.Send("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"));
  EXPECT_THAT(small.ReadResponse(milliseconds(3'000)), EndsWith("echo:/a:hi"));
  // The holder leaves: its bytes go back.
  holder.Close();
  EXPECT_TRUE(WaitFor([&] { return server->inflight_bytes() == 0; }));
  EXPECT_GE(server->TakeInflightPeak(), 819200);
  EXPECT_EQ(server->TakeInflightPeak(), 0);
}

TEST(ServerConnectionTest, AnswerFromAnotherThreadLater) {
  HeldWriters held;
  auto server = StartServer(SmallOptions(), held.handler());
  RawClient client(server->port());
  ASSERT_TRUE(client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::thread answerer([&] {
    auto writer = held.Wait();
    std::this_thread::sleep_for(milliseconds(50));
    Request request{http::verb::get, "/", 11};
    writer->Reply(MakeResponse(request, http::status::accepted, "later"));
  });
  const std::string response = client.ReadResponse(milliseconds(3'000));
  answerer.join();
  EXPECT_THAT(response, StartsWith("HTTP/1.1 202 Accepted"));
  EXPECT_THAT(response, EndsWith("later"));
}

}  // namespace
}  // namespace agentkv::net
