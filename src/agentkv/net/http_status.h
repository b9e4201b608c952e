// The one map from a canonical StatusCode to the HTTP status an agentkv server answers with.
//
// Every server (engine emulator, coordinator, gateway) answers a failed Status through this
// map, so one code means one HTTP status everywhere. A server whose wire is fixed by another
// program (the engine emulator speaks SGLang) overrides single codes where that program
// differs, next to the endpoint, and says why. A pure function: thread-safe.
#ifndef AGENTKV_NET_HTTP_STATUS_H_
#define AGENTKV_NET_HTTP_STATUS_H_

#include <boost/beast/http/status.hpp>

#include "agentkv/base/status.h"

namespace agentkv::net {

namespace http = boost::beast::http;

// The HTTP status for `code`:
//   kOk                 200 OK
//   kInvalidArgument    400 Bad Request
//   kNotFound           404 Not Found
//   kAlreadyExists      409 Conflict (the target already exists)
//   kFailedPrecondition 409 Conflict (the target's state does not allow the request)
//   kResourceExhausted  413 Content Too Large (agentkv's limits bound input sizes)
//   kInternal           500 Internal Server Error
//   kUnavailable        503 Service Unavailable
//   kDeadlineExceeded   504 Gateway Timeout
http::status HttpStatusFor(StatusCode code);

}  // namespace agentkv::net

#endif  // AGENTKV_NET_HTTP_STATUS_H_
