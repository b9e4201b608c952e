// RequestReader: the server's reading of one HTTP/1.1 request at a time out of a connection's
// buffered bytes, under its limits, with no socket, clock or thread. ServerConnection feeds it
// what it reads and acts on what it reports (arm the body deadline, answer 100 Continue,
// dispatch, reject); the fuzzer (fuzz/http_request_fuzz.cc) feeds it arbitrary bytes through
// the same calls. Internal to the net module.
//
// Limits, as HttpServerOptions states them: a request line plus headers over
// `max_header_bytes` is rejected with 431; a body over `max_body_bytes` with 413 (as soon as
// Content-Length shows it, or as chunks add up); anything Beast cannot parse (a bad chunk size,
// conflicting or malformed Content-Length, a bad header) with 400. Pipelined bytes after a
// complete request stay in the buffer for the next one.
//
// Framing (RFC 9112), checked once the header is complete and before anything else sees the
// request, because Beast 1.81 reads a Transfer-Encoding it does not understand as "no body"
// (the body would then be read as the next request: request smuggling behind a proxy):
//  - Transfer-Encoding: only "chunked", once, last. A coding other than chunked ("gzip",
//    "xchunked") is 501; chunked twice ("chunked, chunked", or two fields) or not last
//    ("chunked, gzip"), an empty value, Transfer-Encoding together with Content-Length, or in
//    an HTTP/1.0 request is 400.
//  - Host: exactly one on HTTP/1.1 (missing or repeated: 400), at most one on HTTP/1.0, and
//    its value a valid authority without user info ("host[:port]").
//  - A line of the header or of the chunked framing (chunk size line, the CRLF after a chunk's
//    data, last chunk, trailer) that ends in a bare LF is 400 at once: Beast would wait for a
//    CRLF until the connection's deadline. A chunk extension holding a LF (Beast accepts one in
//    a quoted string) is 400 too.
//  - A chunked body's trailer fields are 400: Beast merges them into the header, after the
//    checks above and after any proxy's.
// Every refusal ends the connection (the server answers and closes), so no byte after the
// refused header is ever read as a request.
//
// Thread-compatible; owned by one connection (or one fuzz input).
#ifndef AGENTKV_NET_REQUEST_READER_H_
#define AGENTKV_NET_REQUEST_READER_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "agentkv/net/http_types.h"

namespace agentkv::net::internal {

struct RequestLimits {
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = size_t{64} << 20;
};

class RequestReader {
 public:
  // What Parse found.
  struct Event {
    enum class Kind {
      // Every buffered byte that can be parsed was; wait for more.
      kNeedMore,
      // The headers are complete and a body follows (the request is not complete yet).
      kHeaderDone,
      // A complete request is ready: TakeRequest.
      kRequest,
      // The request is refused: answer `status` with `message` and close.
      kReject,
    };
    Kind kind = Kind::kNeedMore;
    http::status status = http::status::ok;
    std::string message;
  };

  explicit RequestReader(const RequestLimits& limits) : limits_(limits) {}
  // The parser refers to chunk_check_, so the reader stays where it was made.
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Starts reading a new request (the previous one, if any, is discarded).
  void Begin();
  // Parses from the front of `buffer`, consuming what it parsed. Precondition: Begin was
  // called since the last kRequest or kReject. Never returns kHeaderDone twice for a request.
  Event Parse(boost::beast::flat_buffer& buffer);
  // The complete request. Precondition: Parse returned kRequest. The reader is then idle
  // until Begin.
  Request TakeRequest();
  // Drops the request under way (after kReject, or when the connection closes).
  void Reset() { parser_.reset(); }

  // A request is being read (between Begin and kRequest/kReject/Reset).
  bool active() const { return parser_.has_value(); }
  // Some bytes of the current request were parsed already.
  bool got_some() const { return parser_.has_value() && parser_->got_some(); }
  // The body bytes still expected by Content-Length, when the headers gave one.
  std::optional<uint64_t> content_length_remaining() const;
  // Body bytes of the request under way parsed so far.
  size_t body_bytes() const { return parser_.has_value() ? parser_->get().body().size() : 0; }
  // The request under way, headers complete. Precondition: Parse returned kHeaderDone.
  const Request& header() const { return parser_->get(); }

 private:
  // Refuses a chunk extension that holds a line break (Beast's on_chunk_header callback,
  // which the parser holds by reference).
  struct ChunkExtensionCheck {
    void operator()(uint64_t size, boost::beast::string_view extensions,
                    boost::system::error_code& error) const;
  };

  RequestLimits limits_;
  ChunkExtensionCheck chunk_check_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // Bytes of the current request's start line and fields parsed so far.
  size_t header_bytes_ = 0;
  // Fields of the current request's header, once it is complete (trailer fields come after).
  size_t header_fields_ = 0;
};

}  // namespace agentkv::net::internal

#endif  // AGENTKV_NET_REQUEST_READER_H_
