// RequestReader: Beast's request parser run under the server's limits.
//
// Invariants: between Begin and a kRequest/kReject event, parser_ holds the request being
// read with both limits set; Parse consumes exactly the bytes the parser used, so bytes after
// a complete request (pipelined) stay buffered; header_bytes_ counts the bytes of the start
// line and fields parsed so far and never exceeds max_header_bytes.
//
// Why the header limit is counted here too: Beast 1.81 applies header_limit to the start line
// and to the fields separately, and to the bytes each put() sees, and it consumes the complete
// fields of an incomplete header, so a header could reach twice the limit, at once or in
// pieces (found by fuzz/http_request_fuzz.cc). While a header is incomplete, every byte still
// buffered belongs to it (Beast searched them for its end), so consumed plus buffered is a
// lower bound of its size; a header too large is refused (431) before any other error.
//
// What Beast 1.81 does with framing, and so what is checked here (request_reader.h lists the
// rules): basic_parser::on_field_impl marks a request chunked only when "chunked" is the last
// element of a Transfer-Encoding field; any other value ("gzip", "xchunked", "chunked,
// chunked") leaves the request without a body, so the body's bytes would be parsed as the next
// request. It refuses a second chunked field and Transfer-Encoding next to Content-Length when
// chunked was seen, but not Content-Length next to another coding, and it does not look at the
// version or at Host. Its line search (find_eol) accepts only CRLF and skips a bare LF, so a
// chunk line ended by LF alone waits for a CRLF that never comes; the quoted strings of chunk
// extensions let a LF through. CheckFraming runs on the complete header, before the request is
// reported (kHeaderDone or kRequest), so neither 100 Continue nor a handler sees a request it
// refuses.
#include "agentkv/net/request_reader.h"

#include <algorithm>
#include <boost/url/authority_view.hpp>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"

namespace agentkv::net::internal {
namespace {

uint32_t HeaderLimit(size_t bytes) {
  return static_cast<uint32_t>(std::min<size_t>(bytes, uint32_t{1} << 30));
}

RequestReader::Event Reject(http::status status, std::string message) {
  return RequestReader::Event{RequestReader::Event::Kind::kReject, status, std::move(message)};
}

// A client's value in a refusal message: at most 64 bytes of it.
std::string Echo(std::string_view value) {
  constexpr size_t kMaxEchoedBytes = 64;
  return "\"" + std::string(value.substr(0, kMaxEchoedBytes)) +
         (value.size() > kMaxEchoedBytes ? "...\"" : "\"");
}

std::string_view TrimOws(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The transfer codings of every Transfer-Encoding field, in order, empty list elements skipped
// (RFC 9110 section 5.6.1).
std::vector<std::string_view> TransferCodings(const Request& request) {
  std::vector<std::string_view> codings;
  const auto [first, last] = request.equal_range(http::field::transfer_encoding);
  for (auto field = first; field != last; ++field) {
    std::string_view value(field->value().data(), field->value().size());
    for (;;) {
      const size_t comma = value.find(',');
      const std::string_view coding = TrimOws(value.substr(0, comma));
      if (!coding.empty()) codings.push_back(coding);
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  return codings;
}

// A Host value is uri-host [":" port] (RFC 9110 section 7.2): an authority without user info.
// Empty is allowed (a target without an authority).
bool ValidHost(std::string_view value) {
  if (value.empty()) return true;
  const auto authority = boost::urls::parse_authority(value);
  return authority && !authority->has_userinfo();
}

// The framing and Host rules of request_reader.h on a complete header; nullopt when they hold.
std::optional<RequestReader::Event> CheckFraming(const Request& request) {
  const size_t hosts = request.count(http::field::host);
  if (hosts > 1) return Reject(http::status::bad_request, "more than one Host header");
  if (hosts == 0 && request.version() >= 11) {
    return Reject(http::status::bad_request, "an HTTP/1.1 request needs a Host header");
  }
  if (hosts == 1) {
    const auto host = request[http::field::host];
    const std::string_view value(host.data(), host.size());
    if (!ValidHost(value)) {
      return Reject(http::status::bad_request, "invalid Host header " + Echo(value));
    }
  }
  if (request.count(http::field::transfer_encoding) == 0) return std::nullopt;
  if (request.version() < 11) {
    return Reject(http::status::bad_request, "Transfer-Encoding in an HTTP/1.0 request");
  }
  if (request.count(http::field::content_length) > 0) {
    return Reject(http::status::bad_request, "both Transfer-Encoding and Content-Length");
  }
  const std::vector<std::string_view> codings = TransferCodings(request);
  if (codings.empty()) return Reject(http::status::bad_request, "empty Transfer-Encoding");
  const auto is_chunked = [](std::string_view coding) {
    return boost::beast::iequals(coding, "chunked");
  };
  const auto chunked = std::count_if(codings.begin(), codings.end(), is_chunked);
  if (chunked > 1) {
    return Reject(http::status::bad_request, "Transfer-Encoding names chunked more than once");
  }
  if (chunked == 1 && !is_chunked(codings.back())) {
    return Reject(http::status::bad_request,
                  "Transfer-Encoding: chunked must be the last transfer coding");
  }
  for (const std::string_view coding : codings) {
    if (!is_chunked(coding)) {
      return Reject(http::status::not_implemented,
                    "transfer coding " + Echo(coding) + " is not supported (only chunked)");
    }
  }
  return std::nullopt;
}

size_t FieldCount(const Request& request) {
  return static_cast<size_t>(std::distance(request.begin(), request.end()));
}

// Whether the buffered bytes hold a LF that no CR precedes. Called while Beast waits for more
// in the header or in the chunked framing: then every buffered byte belongs to a line (Beast
// consumes chunk data as it arrives and whole lines otherwise, so the byte before the buffer
// is a LF).
bool HasBareLf(const boost::beast::flat_buffer& buffer) {
  const auto bytes = buffer.data();
  const std::string_view text(static_cast<const char*>(bytes.data()), bytes.size());
  for (size_t at = text.find('\n'); at != std::string_view::npos; at = text.find('\n', at + 1)) {
    if (at == 0 || text[at - 1] != '\r') return true;
  }
  return false;
}

}  // namespace

void RequestReader::ChunkExtensionCheck::operator()(uint64_t /*size*/,
                                                    boost::beast::string_view extensions,
                                                    boost::system::error_code& error) const {
  if (extensions.find_first_of("\r\n") != boost::beast::string_view::npos) {
    error = http::error::bad_chunk_extension;
  }
}

void RequestReader::Begin() {
  header_bytes_ = 0;
  header_fields_ = 0;
  parser_.emplace();
  parser_->header_limit(HeaderLimit(limits_.max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(limits_.max_body_bytes));
  parser_->on_chunk_header(chunk_check_);
}

RequestReader::Event RequestReader::Parse(boost::beast::flat_buffer& buffer) {
  AGENTKV_CHECK(parser_.has_value()) << "Parse without Begin";
  for (;;) {
    if (parser_->is_done()) return Event{Event::Kind::kRequest, http::status::ok, {}};
    if (buffer.size() == 0) return Event{};
    const bool had_header = parser_->is_header_done();
    boost::system::error_code error;
    const size_t used = parser_->put(buffer.data(), error);
    buffer.consume(used);
    if (!had_header) header_bytes_ += used;
    // While the header is incomplete, the bytes still buffered belong to it.
    const bool header_pending =
        !parser_->is_header_done() && (!error || error == http::error::need_more);
    const size_t header_lower_bound = header_bytes_ + (header_pending ? buffer.size() : 0);
    const bool header_too_large = error == http::error::header_limit ||
                                  (!had_header && header_lower_bound > limits_.max_header_bytes);
    if (header_too_large) {
      parser_.reset();
      return Reject(
          http::status::request_header_fields_too_large,
          "request headers exceed " + std::to_string(limits_.max_header_bytes) + " bytes");
    }
    if (error == http::error::need_more) {
      // Beast waits for a CRLF; a line already ended by a bare LF will never get one.
      if ((!parser_->is_header_done() || parser_->chunked()) && HasBareLf(buffer)) {
        parser_.reset();
        return Reject(http::status::bad_request,
                      "malformed request: a line ends in a bare LF (CRLF expected)");
      }
      return Event{};
    }
    if (error == http::error::body_limit) {
      parser_.reset();
      return Reject(http::status::payload_too_large,
                    "request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
    }
    if (error) {
      parser_.reset();
      return Reject(http::status::bad_request, "malformed request: " + error.message());
    }
    if (!had_header && parser_->is_header_done()) {
      if (std::optional<Event> refusal = CheckFraming(parser_->get())) {
        parser_.reset();
        return *std::move(refusal);
      }
      header_fields_ = FieldCount(parser_->get());
      if (!parser_->is_done()) return Event{Event::Kind::kHeaderDone, http::status::ok, {}};
    }
    if (had_header && parser_->is_done() && FieldCount(parser_->get()) != header_fields_) {
      // Beast merges a chunked body's trailer fields into the header, where a second Host, a
      // Connection or any field a proxy checked in the header could arrive unchecked.
      parser_.reset();
      return Reject(http::status::bad_request, "trailer fields are not accepted");
    }
    if (used == 0 && !parser_->is_done()) return Event{};
  }
}

Request RequestReader::TakeRequest() {
  AGENTKV_CHECK(parser_.has_value() && parser_->is_done()) << "no complete request";
  Request request = parser_->release();
  parser_.reset();
  return request;
}

std::optional<uint64_t> RequestReader::content_length_remaining() const {
  if (!parser_.has_value()) return std::nullopt;
    // GCC 12 at -O2 with sanitizers reports boost::optional's storage inside Beast's
    // content_length_remaining() as maybe-uninitialized (a false positive in the header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  const auto remaining = parser_->content_length_remaining();
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  if (!remaining) return std::nullopt;
  return *remaining;
}

}  // namespace agentkv::net::internal
