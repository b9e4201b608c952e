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
#include "agentkv/net/request_reader.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::net::internal {
namespace {

uint32_t HeaderLimit(size_t bytes) {
  return static_cast<uint32_t>(std::min<size_t>(bytes, uint32_t{1} << 30));
}

RequestReader::Event Reject(http::status status, std::string message) {
  return RequestReader::Event{RequestReader::Event::Kind::kReject, status, std::move(message)};
}

}  // namespace

void RequestReader::Begin() {
  header_bytes_ = 0;
  parser_.emplace();
  parser_->header_limit(HeaderLimit(limits_.max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(limits_.max_body_bytes));
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
    if (error == http::error::need_more) return Event{};
    if (error == http::error::body_limit) {
      parser_.reset();
      return Reject(http::status::payload_too_large,
                    "request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes");
    }
    if (error) {
      parser_.reset();
      return Reject(http::status::bad_request, "malformed request: " + error.message());
    }
    if (!had_header && parser_->is_header_done() && !parser_->is_done()) {
      return Event{Event::Kind::kHeaderDone, http::status::ok, {}};
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
