// The gateway's memory under clients that hold it (ctest -L chaos): streams nobody reads and
// uploads that never finish. Each test asserts on the gateway's own accounting of the bytes it
// holds (GatewayStats::inflight_bytes, the agentkv_gateway_inflight_bytes gauge) and prints
// the process's resident set, which docs/GATEWAY.md ("Memory under slow clients") quotes.
// Loopback only; every wait is bounded.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../integration/gateway_test_support.h"
#include "agentkv/net/http_server.h"
#include "chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;

constexpr int64_t kMiB = int64_t{1} << 20;

// An engine that answers a streamed /generate with an endless stream as fast as its client
// reads (16 KiB events, never more than 256 KiB queued: it waits for the queue to drain, as
// SGLang's server does through its transport's flow control), and anything else at once.
class StreamingEngine {
 public:
  StreamingEngine() {
    net::HttpServerOptions options;
    options.threads = 2;
    StatusOr<std::unique_ptr<net::HttpServer>> server = net::HttpServer::Start(
        options, [this](net::Request request, std::shared_ptr<net::ResponseWriter> writer) {
          Handle(std::move(request), std::move(writer));
        });
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = *std::move(server);
  }
  ~StreamingEngine() {
    if (server_ != nullptr) server_->Shutdown(1s);
  }

  std::string base_url() const { return server_->base_url(); }
  int64_t streamed_bytes() const { return streamed_.load(); }

 private:
  void Handle(net::Request request, std::shared_ptr<net::ResponseWriter> writer) {
    boost::system::error_code error;
    const json::value body = json::parse(request.body(), error);
    const json::value* stream =
        !error && body.is_object() ? body.as_object().if_contains("stream") : nullptr;
    if (stream == nullptr || !stream->is_bool() || !stream->as_bool()) {
      writer->Reply(net::MakeResponse(request, http::status::ok,
                                      R"({"text": "ok", "meta_info": {"id": "x"}})"));
      return;
    }
    writer->StartStream(http::status::ok, {{"Content-Type", "text/event-stream"}});
    Pump(std::move(writer));
  }

  void Pump(std::shared_ptr<net::ResponseWriter> writer) {
    static const std::string event = "data: " + std::string(16 * 1024 - 8, 'x') + "\n\n";
    while (!writer->client_gone() && writer->stream_buffered_bytes() < 256 * 1024) {
      writer->WriteChunk(event);
      streamed_.fetch_add(static_cast<int64_t>(event.size()));
    }
    if (writer->client_gone()) return;
    net::ResponseWriter* raw = writer.get();
    raw->OnStreamDrained(64 * 1024, [this, writer = std::move(writer)]() mutable {
      // Posted, so that a queue that drained at once does not recurse.
      boost::asio::post(server_->executor(),
                        [this, writer = std::move(writer)]() mutable { Pump(std::move(writer)); });
    });
  }

  std::unique_ptr<net::HttpServer> server_;
  std::atomic<int64_t> streamed_{0};
};

// A client on a raw socket: sends what it is given and reads only when asked.
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    // A small receive buffer, so that a client that does not read is felt at once.
    const int receive_buffer = 64 * 1024;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  ~RawClient() { Close(); }

  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // What arrives within `timeout` (until the peer closes or the wait ends).
  std::string ReadFor(std::chrono::milliseconds timeout) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return out;
      out.append(buffer, static_cast<size_t>(n));
      if (out.find("\r\n\r\n") != std::string::npos) return out;  // A status line and headers.
    }
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::string GenerateHead(size_t content_length) {
  return "POST /generate HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(content_length) + "\r\n\r\n";
}

std::string StreamRequest(int i) {
  const std::string body =
      R"({"rid": "reader-)" + std::to_string(i) + R"(", "text": "hi", "stream": true})";
  return GenerateHead(body.size()) + body;
}

// Item 5 (a): 20 clients start streams from an engine that streams as fast as it may and never
// read a byte. Each stream's queue in the gateway stops at about 1 MiB, because the gateway
// stops reading that stream's upstream (the engine then waits) instead of buffering: without
// the backpressure, every stream queued up to the server's 8 MiB stream buffer. Meanwhile a
// well-behaved client is served as usual; once the readers leave, the bytes held return to 0
// and the freed memory goes back to the system.
TEST(GatewayMemoryChaosTest, StreamsNobodyReadsHoldAboutOneMebibyteEach) {
  constexpr int kReaders = 20;
  StreamingEngine engine;
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string small = R"({"text": "hi", "sampling_params": {"max_new_tokens": 4}})";
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(Post(client, gateway->base_url(), "/generate", small).status, 200);
  }
  const int64_t baseline_kib = chaos::ResidentKiB();

  std::vector<std::unique_ptr<RawClient>> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.push_back(std::make_unique<RawClient>(gateway->port()));
    ASSERT_TRUE(readers.back()->connected());
    ASSERT_TRUE(readers.back()->Send(StreamRequest(i)));
  }
  // Under way: the well-behaved client keeps being served while the peaks are sampled.
  int64_t peak_bytes = 0;
  int64_t peak_kib = 0;
  int served = 0;
  double slowest_s = 0;
  // At least 3 s, and until the queues are nearly full (0.85 MiB each, past the 16 MiB peak
  // after which the gateway trims): the kernel's socket buffers take the first megabytes of each
  // stream, and a slow build (the sanitizers) fills them later. Bounded: 30 s.
  const auto started = std::chrono::steady_clock::now();
  const int64_t nearly_full = kReaders * kMiB * 85 / 100;
  while (std::chrono::steady_clock::now() < started + 3s ||
         (peak_bytes < nearly_full && std::chrono::steady_clock::now() < started + 30s)) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(Post(client, gateway->base_url(), "/generate", small).status, 200);
    slowest_s = std::max(
        slowest_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    ++served;
    peak_bytes = std::max(peak_bytes, gateway->stats().inflight_bytes);
    peak_kib = std::max(peak_kib, chaos::ResidentKiB());
    std::this_thread::sleep_for(10ms);
  }
  const GatewayStats during = gateway->stats();
  EXPECT_EQ(during.in_flight, kReaders) << "a stream ended: the gateway dropped a slow reader";
  EXPECT_GT(engine.streamed_bytes(), kReaders * kMiB) << "the streams never filled a queue";
  EXPECT_GT(peak_bytes, kReaders * kMiB / 2);
  EXPECT_LT(peak_bytes, kReaders * (kMiB + kMiB / 4))
      << "the gateway buffered more than its high water mark per stream";
  EXPECT_GE(served, 20);
  EXPECT_LT(slowest_s, 1.0);
  const std::map<std::string, double> gauges = Gauges(client, gateway->base_url());
  ASSERT_TRUE(gauges.contains("agentkv_gateway_inflight_bytes"));
  EXPECT_GT(gauges.at("agentkv_gateway_inflight_bytes"), 0);

  for (auto& reader : readers) reader->Close();
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().in_flight == 0; }, 5s));
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().inflight_bytes == 0; }, 5s))
      << gateway->stats().inflight_bytes << " bytes still held";
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().memory_trims > 0; }, 5s));
  const int64_t after_kib = chaos::ResidentKiB();
  std::printf(
      "memory: RSS %lld KiB before, %lld KiB peak with %d unread streams (%lld KiB "
      "held by the gateway at peak), %lld KiB after they left; %d requests served "
      "meanwhile, slowest %.3f s\n",
      static_cast<long long>(baseline_kib), static_cast<long long>(peak_kib), kReaders,
      static_cast<long long>(peak_bytes / 1024), static_cast<long long>(after_kib), served,
      slowest_s);
  RecordProperty("rss_baseline_kib", std::to_string(baseline_kib));
  RecordProperty("rss_peak_kib", std::to_string(peak_kib));
  RecordProperty("rss_after_kib", std::to_string(after_kib));
  if (chaos::kResidentSetIsTheProcesses) {
    EXPECT_LT(peak_kib - baseline_kib, 96 * 1024);
    EXPECT_LT(after_kib - baseline_kib, 16 * 1024)
        << "RSS stayed at " << after_kib << " KiB after the load (baseline " << baseline_kib
        << " KiB)";
  }
  gateway->Shutdown(1s);
}

// Item 5 (b): uploads that announce a large body and then hold it. Past --max-inflight-bytes a
// new upload is refused with 503 and Retry-After before its body is read, while small requests
// are still served; a body over --max-body-bytes gets 413 at its header. When the uploads go,
// the bytes held return to 0.
TEST(GatewayMemoryChaosTest, HeldUploadsPastTheBudgetAreRefusedAndOthersServed) {
  StreamingEngine engine;
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.http.max_inflight_bytes = 64 * kMiB;
  options.http.max_body_bytes = 32 * kMiB;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string small = R"({"text": "hi", "sampling_params": {"max_new_tokens": 4}})";
  const size_t upload = 20 * kMiB;
  const std::string first_part(kMiB, ' ');

  std::vector<std::unique_ptr<RawClient>> uploads;
  for (int i = 0; i < 3; ++i) {
    uploads.push_back(std::make_unique<RawClient>(gateway->port()));
    ASSERT_TRUE(uploads.back()->connected());
    ASSERT_TRUE(uploads.back()->Send(GenerateHead(upload) + first_part));
  }
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().inflight_bytes >= 60 * kMiB; }, 5s))
      << gateway->stats().inflight_bytes;

  RawClient refused(gateway->port());
  ASSERT_TRUE(refused.Send(GenerateHead(upload)));
  const std::string answer = refused.ReadFor(5s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;

  RawClient too_large(gateway->port());
  ASSERT_TRUE(too_large.Send(GenerateHead(33 * kMiB)));
  const std::string too_large_answer = too_large.ReadFor(5s);
  EXPECT_EQ(too_large_answer.rfind("HTTP/1.1 413", 0), 0u) << too_large_answer;

  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Post(client, gateway->base_url(), "/generate", small).status, 200);
  }
  const std::map<std::string, double> gauges = Gauges(client, gateway->base_url());
  EXPECT_GE(gauges.at("agentkv_gateway_inflight_bytes"), 60.0 * kMiB);
  EXPECT_EQ(gauges.at("agentkv_gateway_inflight_refused_total"), 1.0);
  EXPECT_EQ(gateway->stats().inflight_refused, 1);

  for (auto& u : uploads) u->Close();
  EXPECT_TRUE(WaitFor([&] { return gateway->stats().inflight_bytes == 0; }, 5s))
      << gateway->stats().inflight_bytes << " bytes still held";
  // The budget is free again: an upload of the same size is read whole and answered.
  net::HttpClient uploader(ClientOptions());
  const std::string big = R"({"text": ")" + std::string(upload - 64, 'a') + R"("})";
  EXPECT_EQ(Post(uploader, gateway->base_url(), "/generate", big).status, 200);
  gateway->Shutdown(1s);
}

}  // namespace
}  // namespace agentkv::service
