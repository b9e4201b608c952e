// Fuzzes the HTTP server's request reading: net::internal::RequestReader driven exactly as
// ServerConnection drives it (Begin, Parse over the buffered bytes, TakeRequest, Begin again
// for pipelined bytes; a rejection ends the connection), with no socket.
//
// Input: byte 0 picks the limits (max_header_bytes in {256, 1 KiB, 16 KiB (the server's
// default), 64 KiB}, max_body_bytes in {0, 64, 4 KiB, 64 MiB (the default)}), byte 1 how the
// bytes arrive (0: at once; else in pieces of 1 to 64 bytes), the rest is the byte stream.
//
// Invariants:
//  - Parse only consumes buffered bytes, reports kHeaderDone at most once per request, and
//    the connection makes progress (a bounded number of calls per byte).
//  - A request's headers (start line included) fit max_header_bytes; its body fits
//    max_body_bytes, and equals Content-Length when one was given (and not chunked).
//  - A rejection is 400, 413, 431 or 501 (a transfer coding other than chunked).
//  - Every request read has unambiguous framing (request_reader.h): a Transfer-Encoding only
//    on HTTP/1.1, exactly "chunked" and never with Content-Length; one Host, present on
//    HTTP/1.1 (a trailer adding fields is refused).
//  - The same requests are read whether the bytes arrive at once or in pieces, and the end
//    (nothing pending, a request pending, a refusal) is the same but for Beast's differences
//    in how it refuses a request under way (see Equivalent).
//  - TargetPath of a request's target is a path starting with '/' or InvalidArgument.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/net/http_types.h"
#include "agentkv/net/request_reader.h"
#include "fuzz_check.h"

namespace {

namespace http = agentkv::net::http;
using agentkv::net::internal::RequestLimits;
using agentkv::net::internal::RequestReader;

constexpr size_t kHeaderLimits[] = {256, 1024, 16 * 1024, 64 * 1024};
constexpr size_t kBodyLimits[] = {0, 64, 4096, size_t{64} << 20};

// What a connection did with its bytes, comparable across ways of delivering them.
struct Outcome {
  std::vector<std::string> requests;  // "METHOD target version fields body-size body".
  int rejected = 0;                   // The HTTP status of the rejection, 0 if none.
  // Bytes of an incomplete request were parsed. (How many stay buffered is not compared:
  // Beast consumes the complete lines of an incomplete header when it sees them together,
  // so that depends on how the bytes arrived.)
  bool partial = false;
  // The incomplete request is still in its header.
  bool in_header = false;
};

// Whether two ways of delivering the same bytes came to the same outcome: the same requests
// read, then the same kind of end (nothing pending, a request pending, or a refusal). Beast
// decides some refusals by what it has buffered, so a request under way may be refused one
// way and still pending (or refused with another status) the other way, but no request is
// read either way. The cases seen:
//  - once a header arrived incomplete, Beast parses it again only after it has seen its end
//    (CRLFCRLF), so a header it refuses for its content (malformed: 400; an obsolete folded
//    value over its 4 KiB buffer: 431) is refused at once, but in pieces waits for its end
//    (then the header limit answers 431, or the connection's deadline 408);
//  - a chunk extension whose quoted string runs past its line makes Beast wait for more (the
//    connection's body deadline answers 408), and Beast takes the chunk's size off the body
//    limit again each time more bytes arrive, so in pieces it ends in 413.
bool Equivalent(const Outcome& a, const Outcome& b) {
  if (a.requests != b.requests) return false;
  enum class End { kClean, kPending, kRefused };
  const auto end = [](const Outcome& o) {
    if (o.rejected != 0) return End::kRefused;
    return o.partial ? End::kPending : End::kClean;
  };
  if (end(a) == end(b)) return true;
  return end(a) != End::kClean && end(b) != End::kClean;
}

std::string Describe(const agentkv::net::Request& request) {
  std::string text(request.method_string());
  text += ' ';
  text += request.target();
  text += ' ' + std::to_string(request.version());
  size_t fields = 0;
  for (const auto& field : request) {
    (void)field;
    ++fields;
  }
  text += ' ' + std::to_string(fields) + ' ' + std::to_string(request.body().size()) + ' ';
  text += request.body();
  return text;
}

void CheckRequest(const agentkv::net::Request& request, const RequestLimits& limits) {
  FUZZ_CHECK(request.body().size() <= limits.max_body_bytes);
  FUZZ_CHECK(request.count(http::field::host) == 1 ||
             (request.version() < 11 && request.count(http::field::host) == 0));
  if (request.count(http::field::transfer_encoding) > 0) {
    FUZZ_CHECK(request.version() >= 11 && request.chunked());
    FUZZ_CHECK(request.count(http::field::content_length) == 0);
  }
  if (!request.chunked() && request.has_content_length()) {
    // Beast accepted the value; leading zeros are allowed, so compare numbers.
    const std::string_view value = request[http::field::content_length];
    uint64_t length = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (error == std::errc() && end == value.data() + value.size()) {
      FUZZ_CHECK(length == request.body().size());
    }
  }
  const agentkv::StatusOr<std::string> path = agentkv::net::TargetPath(request.target());
  FUZZ_CHECK(path.ok() || path.status().code() == agentkv::StatusCode::kInvalidArgument);
  if (path.ok()) FUZZ_CHECK(!path->empty() && path->front() == '/');
}

// Feeds `stream` in pieces (0: at once) to a reader as a connection would.
Outcome Run(std::string_view stream, const RequestLimits& limits, uint8_t pieces) {
  Outcome outcome;
  boost::beast::flat_buffer buffer;
  RequestReader reader(limits);
  reader.Begin();
  size_t offset = 0;
  size_t piece = 0;
  size_t consumed = 0;  // Bytes of the current request parsed so far.
  bool header_reported = false;
  size_t calls = 0;
  for (;;) {
    if (offset < stream.size()) {
      size_t n = stream.size() - offset;
      if (pieces != 0) n = std::min(n, 1 + (pieces * 7 + piece * 13) % 64);
      ++piece;
      const size_t copied = boost::asio::buffer_copy(
          buffer.prepare(n), boost::asio::buffer(stream.data() + offset, n));
      buffer.commit(copied);
      offset += n;
    }
    for (;;) {
      FUZZ_CHECK(++calls <= 4 * stream.size() + 16);
      const size_t before = buffer.size();
      const RequestReader::Event event = reader.Parse(buffer);
      FUZZ_CHECK(buffer.size() <= before);
      consumed += before - buffer.size();
      using Kind = RequestReader::Event::Kind;
      if (event.kind == Kind::kNeedMore) break;
      if (event.kind == Kind::kHeaderDone) {
        FUZZ_CHECK(!header_reported);
        header_reported = true;
        FUZZ_CHECK(consumed <= limits.max_header_bytes);
        continue;
      }
      if (event.kind == Kind::kReject) {
        FUZZ_CHECK(event.status == http::status::bad_request ||
                   event.status == http::status::payload_too_large ||
                   event.status == http::status::request_header_fields_too_large ||
                   event.status == http::status::not_implemented);
        FUZZ_CHECK(!reader.active());
        // The connection answers and closes, discarding whatever else arrives: what was
        // buffered at this point depends on how the bytes arrived, so it is not compared.
        outcome.rejected = static_cast<int>(event.status);
        return outcome;
      }
      const agentkv::net::Request request = reader.TakeRequest();
      CheckRequest(request, limits);
      if (!header_reported) FUZZ_CHECK(consumed <= limits.max_header_bytes);
      outcome.requests.push_back(Describe(request));
      reader.Begin();  // Pipelined bytes start the next request.
      consumed = 0;
      header_reported = false;
    }
    if (offset == stream.size()) break;
  }
  outcome.partial = reader.got_some();
  outcome.in_header = reader.active() && !header_reported;
  return outcome;
}

// Shows an outcome on stderr, for a failed comparison.
void Print(const char* label, const Outcome& outcome) {
  std::fprintf(stderr, "%s: rejected %d, partial %d, in header %d, %zu requests\n", label,
               outcome.rejected, outcome.partial ? 1 : 0, outcome.in_header ? 1 : 0,
               outcome.requests.size());
  for (const std::string& request : outcome.requests) {
    std::fprintf(stderr, "  %s\n", request.substr(0, 200).c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  RequestLimits limits;
  limits.max_header_bytes = kHeaderLimits[data[0] % 4];
  limits.max_body_bytes = kBodyLimits[(data[0] / 4) % 4];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);
  const Outcome whole = Run(stream, limits, 0);
  if (data[1] != 0) {
    const Outcome split = Run(stream, limits, data[1]);
    if (!Equivalent(split, whole)) {
      Print("at once", whole);
      Print("in pieces", split);
    }
    FUZZ_CHECK(Equivalent(split, whole));
  }
  return 0;
}
