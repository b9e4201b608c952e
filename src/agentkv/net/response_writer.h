// ResponseWriter: how a handler answers one HTTP request, now or later, from any thread.
//
// The server calls `Handler(request, writer)` on one of its I/O threads once the whole request
// (headers and body) has arrived. The handler answers exactly once through the writer, either
// with Reply() or with a stream (StartStream, WriteChunk..., EndStream), at once or later from
// any thread; the writer keeps the connection alive until then. The connection reads its next
// request only after the answer has been written.
//
// Thread-safe: every method may be called from any thread, concurrently. Calls on one writer
// take effect in the order they were made (per writer, not across writers). Calls that do not
// fit the writer's state (a second Reply, WriteChunk before StartStream or after EndStream,
// anything after the client went away) are ignored.
//
// Dropping the last reference without answering makes the server answer 500 on the handler's
// behalf; dropping it in the middle of a stream (after StartStream, before EndStream), or
// calling AbortStream, closes the connection so that the client sees a truncated stream, not
// a complete one.
#ifndef AGENTKV_NET_RESPONSE_WRITER_H_
#define AGENTKV_NET_RESPONSE_WRITER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/net/http_types.h"

namespace agentkv::net {

class ResponseWriter : public std::enable_shared_from_this<ResponseWriter> {
 public:
  virtual ~ResponseWriter() = default;

  // Sends a complete response. The server sets the HTTP version to the request's, sets
  // Content-Length from the body, and keeps the connection alive only when the request asked
  // for it, `response.keep_alive()` is true and the server is not shutting down. For a HEAD
  // request the body is not sent (its length is). Calls after the first answer are ignored.
  virtual void Reply(Response response) = 0;

  // Starts a streamed answer: sends the status line and `headers` followed by
  // "Transfer-Encoding: chunked" (HTTP/1.1; an HTTP/1.0 client gets the raw bytes and the
  // connection closes at the end). Content-Length, Transfer-Encoding and Connection entries in
  // `headers` are dropped (the server owns framing), as are entries containing CR or LF.
  // Ignored when the request was already answered.
  virtual void StartStream(http::status status, HeaderList headers) = 0;

  // Sends `data` as one chunk as soon as possible (no coalescing beyond what the socket does).
  // Chunks queued while a write is in flight are sent in order. When the bytes queued but not
  // yet written would exceed HttpServerOptions::max_stream_buffer_bytes, the chunk is dropped and
  // the connection is closed (the client is then gone). An empty `data` is ignored (an empty
  // chunk would end the stream).
  virtual void WriteChunk(std::string data) = 0;

  // Sends the terminating chunk; the answer is complete once it is written.
  virtual void EndStream() = 0;

  // Ends a started stream as broken: the chunks already given are sent, then the connection
  // closes without the terminating chunk, so that the client sees a truncated body rather
  // than a complete one (what a proxy does when its upstream fails mid-stream). Ignored
  // unless a stream is under way.
  virtual void AbortStream() = 0;

  // Stream bytes given to WriteChunk and not yet written to the socket: what this answer holds
  // in memory because the client reads slower than the stream is produced. 0 outside a stream.
  virtual size_t stream_buffered_bytes() const { return 0; }

  // Flow control for a producer that can wait (a proxy reading an upstream): registers
  // `callback` to run once, when stream_buffered_bytes() has fallen to `low_water` or below,
  // or the answer ended or the client went away (so that a waiting producer wakes and sees
  // it). Runs on a server I/O thread, or at once on the calling thread when the condition
  // already holds. Callbacks must not block. The default (a writer without a queue) runs it
  // at once.
  virtual void OnStreamDrained(size_t low_water, std::function<void()> callback) {
    (void)low_water;
    // Taken by value because writers with a queue keep it; this one runs it now.
    const std::function<void()> run = std::move(callback);
    if (run) run();
  }

  // Whether the client went away before the answer completed: the connection closed or reset,
  // a write failed or timed out, the stream buffer overflowed, or the server force-closed the
  // connection at shutdown. False once the answer has been completely written.
  virtual bool client_gone() const = 0;

  // Registers `callback` to run once when the client goes away (see client_gone()) before the
  // answer completes, e.g. to cancel a queued admission. It runs on a server I/O thread, or
  // immediately on the calling thread when the client is already gone. It never runs once the
  // answer has been completely written. Callbacks must not block.
  virtual void OnClientGone(std::function<void()> callback) = 0;
};

// Serves one request; see ResponseWriter. Runs on a server I/O thread, so it must not block:
// long work answers later through `writer`, from any thread or a timer on
// HttpServer::executor(). An exception escaping a handler is answered with 500.
using Handler = std::function<void(Request request, std::shared_ptr<ResponseWriter> writer)>;

}  // namespace agentkv::net

#endif  // AGENTKV_NET_RESPONSE_WRITER_H_
