// Access logging of an HttpServer: the record of one answered request, the optional hook that
// receives it (HttpServerOptions::access_log) and its JSON line.
//
// With no hook set the server records nothing: no clock read, no copy of the method or the
// target, no formatting. With a hook, each request the server answered (by its handler, or
// by the server itself: 400, 408, 413, 431) is reported once, when its answer has been
// completely written or the connection closed before that; for a stream, that is when the
// stream ended, with the payload bytes it carried. The hook runs on the connection's I/O
// thread (or, at shutdown, on the thread closing what is left), concurrently for different
// connections: it must be thread-safe and must not block. Value types; thread-compatible.
#ifndef AGENTKV_NET_ACCESS_LOG_H_
#define AGENTKV_NET_ACCESS_LOG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentkv::net {

// One answered request. The views are valid during the hook call only.
struct AccessLogEntry {
  // The request method as received ("GET"), and its target: path and query, still
  // percent-encoded. Both empty for a request the server rejected before its header was
  // complete (431, 408 on the header, 400 on a malformed request line).
  std::string_view method;
  std::string_view target;
  // The status written, or 499 when the client left before any answer began (the gateway's
  // code for a client that left first).
  int status = 0;
  // Bytes written to the connection for this answer: status line, headers and body, or for a
  // stream its head, chunk framing and every chunk.
  uint64_t response_bytes = 0;
  // For a streamed answer, the payload bytes of its chunks (WriteChunk data) that were
  // written; nullopt for a plain response.
  std::optional<uint64_t> stream_bytes;
  // From the first byte of the request (for a new connection: its accept) to the last byte of
  // the answer written, or to the close that cut it, in milliseconds.
  double duration_ms = 0;
  // The client's address, "127.0.0.1:41234" or "[::1]:41234"; empty when unknown.
  std::string_view remote;
  // True when the whole answer was written; false when the connection closed first (the
  // client left, a write failed or timed out, a stream was abandoned, shutdown cut it).
  bool completed = false;
};

// Receives each AccessLogEntry; see the top of this file for when and on which thread.
using AccessLogHook = std::function<void(const AccessLogEntry& entry)>;

// `entry` as one JSON object on one line (no newline), members in this order:
// {"event":"access","method":"GET","target":"/v1/models?x=1","status":200,
//  "response_bytes":123,"stream_bytes":45,"duration_ms":0.412,"remote":"127.0.0.1:41234",
//  "completed":true}; stream_bytes only for streams, duration_ms with three decimals (to the
// microsecond). Strings are escaped so that the line is ASCII and valid JSON whatever bytes
// the target holds: '"' and '\\' by a backslash, every other byte outside printable ASCII as
// \u00XX (a byte, not a code point: the target is bytes, usually percent-encoded ASCII).
std::string AccessLogJson(const AccessLogEntry& entry);

}  // namespace agentkv::net

#endif  // AGENTKV_NET_ACCESS_LOG_H_
