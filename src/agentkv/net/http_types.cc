#include "agentkv/net/http_types.h"

#include <boost/beast/core/string.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "agentkv/net/error_body.h"

namespace agentkv::net {

Response MakeResponse(const Request& request, http::status status, std::string body,
                      std::string_view content_type) {
  Response response{status, request.version()};
  response.set(http::field::content_type, content_type);
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

Status CheckTimeoutsPositive(std::string_view options,
                             std::initializer_list<NamedTimeout> timeouts) {
  for (const NamedTimeout& timeout : timeouts) {
    if (timeout.value.count() <= 0) {
      return InvalidArgumentError(std::string(options) + "." + timeout.name +
                                  " must be positive, got " +
                                  std::to_string(timeout.value.count()) + " ms");
    }
  }
  return Status::Ok();
}

Response MakeErrorResponse(const Request& request, http::status status, std::string_view message) {
  const std::string_view target(request.target().data(), request.target().size());
  return MakeResponse(request, status, ErrorBodyFor(target, message, static_cast<int>(status)));
}

Status CheckJsonContentType(const Request& request) {
  // A hostile header is not echoed whole.
  constexpr size_t kMaxEchoedBytes = 64;
  const auto header = request[http::field::content_type];
  const std::string_view value(header.data(), header.size());
  std::string_view media = value.substr(0, value.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  if (boost::beast::iequals(media, "application/json")) return Status::Ok();
  return InvalidArgumentError(
      "Content-Type: Unsupported Media Type: Only 'application/json' is allowed, got \"" +
      std::string(value.substr(0, kMaxEchoedBytes)) +
      (value.size() > kMaxEchoedBytes ? "...\"" : "\""));
}

std::string HttpEndpoint::PoolKey() const {
  // IPv6 literals contain ':', so they keep their brackets to stay unambiguous.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

StatusOr<HttpEndpoint> ParseBaseUrl(std::string_view base_url) {
  // "127.0.0.1:30000" or "localhost:30000" is the usual slip: say what to write instead.
  if (base_url.find("://") == std::string_view::npos) {
    return InvalidArgumentError("base URL \"" + std::string(base_url) +
                                "\" has no scheme: write it as http://HOST:PORT, e.g. \"http://" +
                                std::string(base_url) + "\"");
  }
  auto parsed = boost::urls::parse_uri(base_url);
  if (!parsed) {
    return InvalidArgumentError("base URL \"" + std::string(base_url) + "\" is not a valid URL (" +
                                parsed.error().message() + "): write it as http://HOST:PORT");
  }
  const boost::urls::url_view& url = *parsed;
  if (url.scheme_id() != boost::urls::scheme::http) {
    return InvalidArgumentError("base URL \"" + std::string(base_url) +
                                "\": only the http scheme is supported, not \"" +
                                std::string(url.scheme()) + "\"");
  }
  if (!url.has_authority() || url.encoded_host().empty()) {
    return InvalidArgumentError("base URL \"" + std::string(base_url) + "\" names no host");
  }
  if (url.has_userinfo() || url.has_query() || url.has_fragment()) {
    return InvalidArgumentError("base URL \"" + std::string(base_url) +
                                "\" may not carry user info, a query or a fragment");
  }
  HttpEndpoint endpoint;
  endpoint.host = url.host_address();
  if (url.has_port()) {
    // Boost.URL 1.81's port_number() keeps the low 16 bits of a larger number (89536 reads as
    // 24000), so the digits are read here, and only 1-65535 is a port.
    const std::string_view digits = url.port();
    uint32_t port = 0;
    for (const char digit : digits) {
      port = port * 10 + static_cast<uint32_t>(digit - '0');
      if (port > 65535) break;
    }
    if (digits.empty() || port == 0 || port > 65535) {
      return InvalidArgumentError("base URL \"" + std::string(base_url) +
                                  "\" has an invalid port \"" + std::string(digits) +
                                  "\": a port is in [1, 65535]");
    }
    endpoint.port = static_cast<uint16_t>(port);
  }
  endpoint.host_header = std::string(url.encoded_host_and_port());
  endpoint.path_prefix = std::string(url.encoded_path());
  if (!endpoint.path_prefix.empty() && endpoint.path_prefix.front() != '/') {
    // What Boost.URL 1.81 leaves of "http://h:80x": port 80, path "x".
    return InvalidArgumentError("base URL \"" + std::string(base_url) +
                                "\" has an invalid port \"" + std::string(url.port()) +
                                endpoint.path_prefix + "\": a port is in [1, 65535]");
  }
  while (!endpoint.path_prefix.empty() && endpoint.path_prefix.back() == '/') {
    endpoint.path_prefix.pop_back();
  }
  return endpoint;
}

StatusOr<std::string> TargetPath(std::string_view target) {
  if (!target.empty() && target.front() == '/') {
    auto parsed = boost::urls::parse_origin_form(target);
    if (!parsed) {
      return InvalidArgumentError("request target \"" + std::string(target) +
                                  "\" does not parse: " + parsed.error().message());
    }
    return std::string(parsed->encoded_path());
  }
  auto parsed = boost::urls::parse_absolute_uri(target);
  if (!parsed) {
    return InvalidArgumentError("request target \"" + std::string(target) +
                                "\" is neither origin-form nor absolute-form");
  }
  std::string path(parsed->encoded_path());
  if (path.empty()) path = "/";
  // An absolute-form target names a server ("http://host[:port]/path"); a rootless path
  // ("mailto:x", or what Boost.URL 1.81 leaves of "http://h:1e/x": port 1, path "e/x") is
  // not a path a route can match.
  if (!parsed->has_authority() || path.front() != '/') {
    return InvalidArgumentError("request target \"" + std::string(target) +
                                "\" has no authority or no absolute path");
  }
  return path;
}

bool QueryFlag(std::string_view target, std::string_view key) {
  boost::system::result<boost::urls::url_view> url = boost::urls::parse_origin_form(target);
  if (!url) return false;
  auto it = url->params().find(key);
  return it != url->params().end() && ((*it).value == "1" || (*it).value == "true");
}

}  // namespace agentkv::net
