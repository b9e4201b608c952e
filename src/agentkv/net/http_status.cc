#include "agentkv/net/http_status.h"

namespace agentkv::net {

http::status HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return http::status::ok;
    case StatusCode::kInvalidArgument:
      return http::status::bad_request;
    case StatusCode::kNotFound:
      return http::status::not_found;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return http::status::conflict;
    case StatusCode::kResourceExhausted:
      return http::status::payload_too_large;
    case StatusCode::kInternal:
      return http::status::internal_server_error;
    case StatusCode::kUnavailable:
      return http::status::service_unavailable;
    case StatusCode::kDeadlineExceeded:
      return http::status::gateway_timeout;
  }
  return http::status::internal_server_error;
}

}  // namespace agentkv::net
