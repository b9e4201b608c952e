// HttpServer: an HTTP/1.1 server on Boost.Asio/Beast with a fixed number of I/O threads.
//
// By default one io_context is run by `threads` I/O threads; every connection lives on its own
// strand. A server can instead be started on IoLoops the caller owns (io_loops.h), e.g. one
// single-threaded loop per thread shared with an HttpClient; each connection then lives on one
// loop, assigned in turn. Either way
// so any number of connections (10,000 held requests in bench/http_load.cc) are served by
// those threads alone: a request that waits (admission, a slow upstream) holds a few KB, never
// a thread. Requests are read with per-phase deadlines and size limits (431 for headers, 413
// for bodies), handed to a Handler, and answered through a ResponseWriter, possibly later and
// from any thread, possibly as a chunked stream. Connections are kept alive per the request.
// Shutdown stops accepting, lets in-flight requests finish until a deadline, then closes the
// rest. See docs/NET.md for the threading model and the exact semantics.
//
// Thread-safe: every public method may be called from any thread, except that Shutdown and the
// destructor (which join the I/O threads) must not run on an I/O thread of this server. The
// server owns its threads, its sockets and the handler; writers handed to handlers may outlive
// it (their calls then do nothing).
#ifndef AGENTKV_NET_HTTP_SERVER_H_
#define AGENTKV_NET_HTTP_SERVER_H_

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/access_log.h"
#include "agentkv/net/io_loops.h"
#include "agentkv/net/response_writer.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::net {

namespace internal {
class ServerCore;
}  // namespace internal

struct HttpServerOptions {
  // The numeric IPv4 or IPv6 address to listen on. Default: "127.0.0.1".
  std::string address = "127.0.0.1";
  // Default: 0, an ephemeral port (read it back with HttpServer::port()).
  uint16_t port = 0;
  // I/O threads, fixed for the server's lifetime. Default: 2. Range: [1, 256].
  int threads = 2;
  // Largest request line plus headers; larger requests get 431 Request Header Fields Too Large
  // and the connection closes. Default: 16 KiB. Range: [256, 1 GiB].
  size_t max_header_bytes = 16 * 1024;
  // Largest request body; larger bodies get 413 Payload Too Large (as soon as Content-Length
  // shows it) and the connection closes. Default: 64 MiB. Range: [0, 2^62].
  size_t max_body_bytes = size_t{64} << 20;
  // From the first byte of a request (for a new connection: from accept) to the end of its
  // headers. On expiry the server answers 408 and closes. Default: 30 s. Must be > 0.
  std::chrono::milliseconds header_timeout{30'000};
  // From the end of the headers to the end of the body. On expiry: 408 and close.
  // Default: 60 s. Must be > 0.
  std::chrono::milliseconds body_timeout{60'000};
  // How long a kept-alive connection may wait for the first byte of its next request before
  // the server closes it. Default: 60 s. Must be > 0.
  std::chrono::milliseconds idle_timeout{60'000};
  // Limit on each write (a response, or the chunks queued at once); on expiry the connection
  // closes and the client counts as gone. Default: 60 s. Must be > 0.
  std::chrono::milliseconds write_timeout{60'000};
  // Stream bytes queued by WriteChunk but not yet written; beyond it the connection closes
  // (a client that does not read cannot make the server buffer without bound).
  // Default: 8 MiB. Must be > 0.
  size_t max_stream_buffer_bytes = size_t{8} << 20;
  // Bound on the bytes all connections hold together: request bodies being read or served
  // (counted from the header for a Content-Length body, as it arrives for a chunked one, until
  // the answer is written) plus answer bytes queued and not yet written. A request with a body
  // that would take the total past it is refused at its header, before its body is read, with
  // 503 Service Unavailable, `Retry-After: 1` and close; requests already accepted continue,
  // and requests without a body (GET /metrics, /health) are always read. 0: no bound.
  // Default: 0. Range: [0, 2^62].
  size_t max_inflight_bytes = 0;
  // listen(2) backlog; the kernel caps it at net.core.somaxconn. Default: 4096. Must be > 0.
  int backlog = 4096;
  // Receives one AccessLogEntry per answered request (access_log.h). Default: empty, and then
  // the server neither times nor records requests.
  AccessLogHook access_log;

  // OK, or InvalidArgument naming the first field out of range (including an address that is
  // not a numeric IP address).
  Status Validate() const;
};

class HttpServer {
 public:
  // Validates `options`, binds, listens and starts `options.threads` I/O threads serving
  // `handler`. InvalidArgument for bad options or an empty handler; Unavailable, with the
  // system's error text, when the socket cannot be opened, bound or listened on.
  //
  // With `loops`, the server runs on them instead (options.threads is then not used) and
  // starts no thread. Their owner joins them, after this server's Shutdown: until then,
  // handlers' timers and work posted to executor() still run after Shutdown returned.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                     Handler handler,
                                                     std::shared_ptr<IoLoops> loops = nullptr);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Shutdown(0) if still running.
  ~HttpServer();

  // The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const;
  // "http://ADDRESS:PORT", e.g. "http://127.0.0.1:41234" (IPv6 addresses in brackets).
  std::string base_url() const;

  // Stops accepting and closes idle keep-alive connections at once; requests being read or
  // answered continue (their responses carry "Connection: close") until they complete or
  // `deadline` passes; then every remaining connection is closed (their writers' OnClientGone
  // callbacks run), and, unless the server runs on loops it was given, the I/O threads are
  // joined and work still queued on executor() is destroyed without running. Idempotent;
  // concurrent calls wait for the first. Must not be called from a handler or an I/O thread of
  // this server.
  void Shutdown(std::chrono::milliseconds deadline);

  // Connections accepted and not yet closed.
  int64_t open_connections() const;
  // Requests whose answer (a response or a whole stream) was completely written.
  int64_t requests_served() const;
  // The bytes counted against max_inflight_bytes now (counted whether or not it is set).
  int64_t inflight_bytes() const;
  // The largest inflight_bytes() since the previous call (or since start), then restarts the
  // watch at the current value: lets a caller see a peak that came and went between two reads.
  int64_t TakeInflightPeak();
  // Requests refused with 503 because of max_inflight_bytes, since start.
  int64_t inflight_refused() const;

  // An executor of the I/O threads, for handlers' timers and posted work: on an I/O thread,
  // that thread's loop (so that a handler's timer stays beside its connection); elsewhere, the
  // loops in turn. With the server's own loops, work still pending when Shutdown finishes is
  // destroyed without running.
  boost::asio::any_io_executor executor();

 private:
  HttpServer(std::shared_ptr<internal::ServerCore> core, uint16_t port);

  const std::shared_ptr<internal::ServerCore> core_;
  const uint16_t port_;
  sync::Mutex shutdown_mu_;
  bool shut_down_ AGENTKV_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace agentkv::net

#endif  // AGENTKV_NET_HTTP_SERVER_H_
