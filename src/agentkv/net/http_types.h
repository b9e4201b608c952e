// The HTTP message types shared by the net module's server, router and client, and small
// helpers to build answers and parse upstream URLs.
//
// Requests and responses are Beast messages with std::string bodies: the server hands a
// complete `Request` to a handler, which answers with a `Response` (or a stream, see
// response_writer.h). Everything here is a value type or a pure function: thread-compatible.
#ifndef AGENTKV_NET_HTTP_TYPES_H_
#define AGENTKV_NET_HTTP_TYPES_H_

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::net {

namespace http = boost::beast::http;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// Header fields in wire order, as (name, value) pairs. Names keep the case they were given.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A response with `status`, a Content-Type of `content_type` and `body`; the HTTP version and
// keep-alive are taken from `request` and Content-Length is set.
Response MakeResponse(const Request& request, http::status status, std::string body,
                      std::string_view content_type = "application/json");

// MakeResponse(request, status, ErrorBodyFor(request.target(), message, status)): the error
// body of the request's API family (error_body.h).
Response MakeErrorResponse(const Request& request, http::status status, std::string_view message);

// SGLang's `validate_json_request`, which guards its OpenAI routes and /tokenize: OK when
// the request's Content-Type media type (before any ';' parameters, case-insensitive) is
// application/json; else InvalidArgument "Content-Type: Unsupported Media Type: Only
// 'application/json' is allowed, got \"<value>\"" (an absent header counts as ""; a value
// over 64 bytes is cut there).
Status CheckJsonContentType(const Request& request);

// One timeout field of an options struct, by name, for CheckTimeoutsPositive.
struct NamedTimeout {
  const char* name;
  std::chrono::milliseconds value;
};

// The timeout rule the server's and the client's options share: OK when every timeout is
// positive, else InvalidArgument "<options>.<name> must be positive, got <n> ms" for the first
// that is not, e.g. "HttpServerOptions.idle_timeout must be positive, got 0 ms".
Status CheckTimeoutsPositive(std::string_view options,
                             std::initializer_list<NamedTimeout> timeouts);

// Where an HttpClient sends a request, parsed from a base URL such as "http://127.0.0.1:8080".
struct HttpEndpoint {
  // The host as the resolver takes it: a name, an IPv4 address, or an IPv6 address without
  // brackets.
  std::string host;
  // Default: 80 when the URL names none.
  uint16_t port = 80;
  // The value of the Host header: host[:port] as written in the URL (IPv6 in brackets).
  std::string host_header;
  // The base URL's path without a trailing '/', prepended to every target; usually empty.
  std::string path_prefix;

  // "host:port", the key of the client's per-upstream connection pool.
  std::string PoolKey() const;
};

// Parses an absolute "http://host[:port][/prefix]" URL with Boost.URL. InvalidArgument when the
// URL does not parse, has no host, carries a query, fragment or user info, its port is not in
// [1, 65535] (an empty port, 0, or a number that would wrap, e.g. 89536), or its scheme is not
// "http" (https is not supported). The one parser of every URL flag (--router-url,
// --engine-urls, --coordinator-url, --worker-urls) and of every client request.
StatusOr<HttpEndpoint> ParseBaseUrl(std::string_view base_url);

// The path of a request target without its query ("/generate" for "/generate?x=1"), still
// percent-encoded, always starting with '/'. Accepts origin-form ("/a?b") and absolute-form
// ("http://h/a?b") targets; InvalidArgument for anything else (e.g. "*", a malformed target,
// an absolute URI without an authority or with a rootless path such as "mailto:x").
StatusOr<std::string> TargetPath(std::string_view target);

// Whether an origin-form target's query sets `key` to "1" or "true" ("/agentic_kv?reset=1").
// False when the key is absent, has another value, or the target does not parse.
bool QueryFlag(std::string_view target, std::string_view key);

}  // namespace agentkv::net

#endif  // AGENTKV_NET_HTTP_TYPES_H_
