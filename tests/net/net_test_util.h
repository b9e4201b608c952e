// Helpers for the net module's tests: a blocking raw TCP client on 127.0.0.1 with deadlines
// (to speak malformed, partial or pipelined HTTP to the server), a server starter, and a
// polling wait. Header-only; every call is bounded by a timeout.
#ifndef AGENTKV_TESTS_NET_NET_TEST_UTIL_H_
#define AGENTKV_TESTS_NET_NET_TEST_UTIL_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "agentkv/net/http_server.h"

namespace agentkv::net::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Starts a server on 127.0.0.1:0 or fails the test.
inline std::unique_ptr<HttpServer> StartServer(HttpServerOptions options, Handler handler) {
  auto server = HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  return std::move(server).value();
}

// Polls `condition` every 5 ms until it holds or `timeout` passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& condition,
                    milliseconds timeout = milliseconds(5'000)) {
  const auto deadline = Clock::now() + timeout;
  while (!condition()) {
    if (Clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// A blocking TCP connection to 127.0.0.1:port.
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  ~RawClient() { Close(); }

  bool connected() const { return connected_; }

  // The client's own port, as the server sees it; 0 when unknown.
  uint16_t local_port() const {
    sockaddr_in address{};
    socklen_t size = sizeof(address);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) return 0;
    return ntohs(address.sin_port);
  }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
    }
    return true;
  }

  // Reads whatever arrives until the peer closes or `timeout` passes. `closed` tells which.
  std::string ReadUntilClose(milliseconds timeout, bool* closed = nullptr) {
    std::string out;
    out.swap(pending_);
    const auto deadline = Clock::now() + timeout;
    bool eof = false;
    while (!eof) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      if (!ReadSome(&out, left, &eof)) break;
    }
    if (closed != nullptr) *closed = eof;
    return out;
  }

  // Reads until `out` contains `needle` (or close/timeout); returns everything read so far.
  std::string ReadUntil(std::string_view needle, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    bool eof = false;
    while (pending_.find(needle) == std::string::npos && !eof) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      if (!ReadSome(&pending_, left, &eof)) break;
    }
    std::string out;
    out.swap(pending_);
    return out;
  }

  // Reads one response with a Content-Length body (enough for these tests).
  std::string ReadResponse(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    bool eof = false;
    for (;;) {
      const size_t head_end = pending_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = FindHeader(pending_.substr(0, head_end), "content-length:");
        if (at != std::string::npos) length = std::stoul(pending_.substr(at + 15));
        const size_t total = head_end + 4 + length;
        if (pending_.size() >= total) {
          std::string response = pending_.substr(0, total);
          pending_.erase(0, total);
          return response;
        }
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || eof) break;
      if (!ReadSome(&pending_, left, &eof)) break;
    }
    std::string partial;
    partial.swap(pending_);
    return partial;
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Resets the connection (RST instead of FIN).
  void Abort() {
    linger option{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &option, sizeof(option));
    Close();
  }

 private:
  static size_t FindHeader(const std::string& head, std::string_view lower_name) {
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return lower.find(lower_name);
  }

  bool ReadSome(std::string* out, milliseconds timeout, bool* eof) {
    pollfd entry{fd_, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buffer[16384];
    const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (got <= 0) {
      *eof = true;
      return true;
    }
    out->append(buffer, static_cast<size_t>(got));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string pending_;
};

}  // namespace agentkv::net::testing

#endif  // AGENTKV_TESTS_NET_NET_TEST_UTIL_H_
