// HttpClient: an asynchronous HTTP/1.1 client with keep-alive connection pools per upstream.
//
// The gateway's side towards the engines: requests are sent over pooled keep-alive connections
// (one pool per "host:port", at most max_connections_per_host open; further requests queue),
// every phase has a deadline, and a streamed response (server-sent events) is passed on chunk
// by chunk as it arrives. The client runs its own `threads` I/O threads, or the IoLoops it was
// given (io_loops.h); callbacks run on them, one request's callbacks never concurrently and
// always in order. See docs/NET.md.
//
// Errors are Status values: DeadlineExceeded when a phase times out (the message names the
// phase), Unavailable on connect, reset or protocol errors and on cancellation,
// ResourceExhausted when a response exceeds max_header_bytes or max_response_bytes,
// InvalidArgument for a bad URL, target or header. An HTTP error status (404, 500...) is not an
// error: it arrives as ClientResponse::status.
//
// Thread-safe: all methods may be called from any thread (Request not from the client's own I/O
// threads). The destructor cancels what is in flight (each `done` still runs once, with
// Unavailable, before it returns) and joins the threads; it must not run on one of them.
#ifndef AGENTKV_NET_HTTP_CLIENT_H_
#define AGENTKV_NET_HTTP_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_types.h"
#include "agentkv/net/io_loops.h"

namespace agentkv::net {

namespace internal {
class ClientCall;
class ClientCore;
}  // namespace internal

struct HttpClientOptions {
  // Resolving and connecting a new connection. Default: 5 s. Must be > 0.
  std::chrono::milliseconds connect_timeout{5'000};
  // From the start of sending the request until the response headers have arrived.
  // Default: 30 s. Must be > 0.
  std::chrono::milliseconds header_timeout{30'000};
  // Longest silence between two pieces of the response body (not the whole body, so that a
  // long stream lives as long as data keeps coming). Default: 60 s. Must be > 0.
  std::chrono::milliseconds body_timeout{60'000};
  // How long a pooled idle connection may be reused. Keep it below the upstream's own idle
  // timeout (HttpServerOptions::idle_timeout is 60 s). Default: 30 s. Must be > 0.
  std::chrono::milliseconds idle_timeout{30'000};
  // How long a request waits for a connection when max_connections_per_host are open.
  // Default: 30 s. Must be > 0.
  std::chrono::milliseconds queue_timeout{30'000};
  // Open connections (idle plus in use) per upstream. Default: 64. Must be > 0.
  size_t max_connections_per_host = 64;
  // Idle connections kept per upstream. Default: 16.
  size_t max_idle_per_host = 16;
  // Largest buffered response body (Request/AsyncRequest; streams are not limited).
  // Default: 64 MiB.
  size_t max_response_bytes = size_t{64} << 20;
  // Largest response status line plus headers. Default: 64 KiB. Range: [256, 1 GiB].
  size_t max_header_bytes = 64 * 1024;
  // The client's own I/O threads. Default: 1. Range: [1, 256].
  int threads = 1;

  // OK, or InvalidArgument naming the first field out of range.
  Status Validate() const;
};

struct ClientResponse {
  int status = 0;
  HeaderList headers;
  std::string body;
};

class HttpClient {
 public:
  // Lets the caller abandon a request or a stream, e.g. when the downstream client went away.
  class StreamHandle {
   public:
    // Closes the call's connection (it is not reused); `done` then runs once with
    // Unavailable("cancelled by the caller") unless the call already ended. Thread-safe and
    // idempotent; a no-op once the call ended or the client was destroyed.
    void Cancel();

   private:
    friend class HttpClient;
    explicit StreamHandle(std::weak_ptr<internal::ClientCall> call) : call_(std::move(call)) {}
    std::weak_ptr<internal::ClientCall> call_;
  };

  // Precondition: options.Validate() is OK (a violation aborts).
  explicit HttpClient(HttpClientOptions options = {});
  // A client on `loops` (not null), which the caller owns and joins only after destroying the
  // client; options.threads is not used. Each loop has its own connection pool, with
  // ceil(max_connections_per_host / loops) connections and ceil(max_idle_per_host / loops) idle
  // ones per upstream; a request started on one of the loops' threads runs on that thread's
  // loop (an HttpServer handler on the same kPerThread loops makes its upstream call without
  // waking another thread), one started elsewhere on the loops in turn.
  HttpClient(HttpClientOptions options, std::shared_ptr<IoLoops> loops);
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  // Cancels requests in flight (their callbacks run with Unavailable), closes pooled
  // connections and joins the I/O threads.
  ~HttpClient();

  // Sends `method` `base_url` + `target` with `headers` and `body`, and calls `done` once, on a
  // client I/O thread, with the complete response or an error. `base_url` is
  // "http://host[:port][/prefix]" (https is InvalidArgument); `target` starts with '/' and may
  // carry a query. Host, Content-Length and Connection are set by the client (a Host header in
  // `headers` wins). A request that failed on a reused keep-alive connection before any response
  // byte arrived (the upstream closed it meanwhile) is retried on another connection. The
  // returned handle cancels the request (callers that never cancel may drop it).
  std::shared_ptr<StreamHandle> AsyncRequest(http::verb method, const std::string& base_url,
                                             std::string target, HeaderList headers,
                                             std::string body,
                                             std::function<void(StatusOr<ClientResponse>)> done);

  // AsyncRequest, waiting for the result. Must not be called from this client's I/O threads,
  // the loops it was given included (a violation aborts).
  StatusOr<ClientResponse> Request(http::verb method, const std::string& base_url,
                                   const std::string& target, const HeaderList& headers = {},
                                   const std::string& body = "");

  // Sends a request whose response body is passed on as it arrives: `on_headers(status,
  // headers)` once the headers are in, `on_chunk(bytes)` for each piece of body (for a chunked
  // response, each chunk, or each part of a chunk, as soon as it is parsed; nothing is
  // buffered), then `done(status)` once: OK when the body ended, or the error (`on_headers`
  // may not have run). All on client I/O threads, in that order. Callbacks must not block;
  // `on_chunk`'s view is valid only during the call.
  //
  // Flow control: with a `read_gate`, the client asks it before each read of the body. When it
  // returns false the call stops reading from the upstream socket (so the upstream's TCP window
  // closes and its sender waits) until the `resume` it was handed is called, from any thread,
  // once; dropping `resume` uncalled resumes too. While paused the body timeout does not run
  // (the silence is the caller's, not the upstream's); a cancellation still ends the call at
  // once. Without a gate the body is read as fast as it arrives.
  using ReadGate = std::function<bool(std::function<void()> resume)>;
  std::shared_ptr<StreamHandle> AsyncStream(
      http::verb method, const std::string& base_url, std::string target, HeaderList headers,
      std::string body, std::function<void(int status, const HeaderList& headers)> on_headers,
      std::function<void(std::string_view chunk)> on_chunk, std::function<void(Status)> done,
      ReadGate read_gate = nullptr);

  // Idle keep-alive connections in the pools, over all upstreams.
  int64_t pooled_connections() const;
  // Connections opened (successful connects) since construction.
  int64_t connections_opened() const;

 private:
  HttpClient(HttpClientOptions options, std::shared_ptr<IoLoops> loops, bool owns_loops);
  // The core a call started now runs on: the calling thread's loop's, else the next in turn.
  const std::shared_ptr<internal::ClientCore>& CoreForCall();

  // Declared first: the cores' sockets and timers are bound to the loops.
  const std::shared_ptr<IoLoops> loops_;
  const bool owns_loops_;
  std::vector<std::shared_ptr<internal::ClientCore>> cores_;  // One per loop.
};

}  // namespace agentkv::net

#endif  // AGENTKV_NET_HTTP_CLIENT_H_
