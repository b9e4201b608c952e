#include "agentkv/net/http_types.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agentkv::net {
namespace {

TEST(MakeResponseTest, TakesVersionAndKeepAliveFromTheRequest) {
  Request request{http::verb::get, "/x", 10};
  request.keep_alive(false);
  Response response = MakeResponse(request, http::status::created, "{\"a\":1}");
  EXPECT_EQ(response.result(), http::status::created);
  EXPECT_EQ(response.version(), 10u);
  EXPECT_FALSE(response.keep_alive());
  EXPECT_EQ(response[http::field::content_type], "application/json");
  EXPECT_EQ(response[http::field::content_length], "7");
  EXPECT_EQ(response.body(), "{\"a\":1}");

  Request keep{http::verb::post, "/y", 11};
  Response text = MakeResponse(keep, http::status::ok, "hi", "text/plain");
  EXPECT_TRUE(text.keep_alive());
  EXPECT_EQ(text[http::field::content_type], "text/plain");
}

TEST(CheckTimeoutsPositiveTest, NamesTheFirstTimeoutThatIsNotPositive) {
  using std::chrono::milliseconds;
  EXPECT_TRUE(CheckTimeoutsPositive("Opts", {{"a", milliseconds(1)}, {"b", milliseconds(2)}}).ok());
  EXPECT_EQ(CheckTimeoutsPositive(
                "Opts", {{"a", milliseconds(1)}, {"b", milliseconds(0)}, {"c", milliseconds(-1)}}),
            InvalidArgumentError("Opts.b must be positive, got 0 ms"));
}

TEST(MakeErrorResponseTest, AnswersInTheBodyShapeOfTheRequestsFamily) {
  Request sglang{http::verb::get, "/", 11};
  Response response = MakeErrorResponse(sglang, http::status::not_found, "gone");
  EXPECT_EQ(response.result(), http::status::not_found);
  EXPECT_EQ(response[http::field::content_type], "application/json");
  EXPECT_EQ(response.body(), R"({"error":{"message":"gone","code":404}})");

  Request openai{http::verb::post, "/v1/chat/completions", 11};
  EXPECT_EQ(MakeErrorResponse(openai, http::status::too_many_requests, "busy").body(),
            R"({"object":"error","message":"busy","type":"RateLimitError","param":null,)"
            R"("code":429})");
}

TEST(CheckJsonContentTypeTest, AcceptsOnlyApplicationJsonAsSglangDoes) {
  auto with = [](std::optional<std::string> type) {
    Request request{http::verb::post, "/v1/chat/completions", 11};
    if (type.has_value()) request.set(http::field::content_type, *type);
    return CheckJsonContentType(request);
  };
  for (const char* ok : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                         " application/json ;charset=utf-8"}) {
    EXPECT_TRUE(with(ok).ok()) << ok;
  }
  for (const char* bad : {"text/plain", "application/x-www-form-urlencoded", "application/json-seq",
                          "application/vnd.api+json", ""}) {
    EXPECT_EQ(with(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(with(std::nullopt).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with("text/plain").message(),
            "Content-Type: Unsupported Media Type: Only 'application/json' is allowed, got "
            "\"text/plain\"");
  // A hostile header is echoed only in part.
  EXPECT_LT(with(std::string(10'000, 'x')).message().size(), 200u);
}

TEST(ParseBaseUrlTest, ParsesHostPortAndPrefix) {
  auto endpoint = ParseBaseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->host, "127.0.0.1");
  EXPECT_EQ(endpoint->port, 8080);
  EXPECT_EQ(endpoint->host_header, "127.0.0.1:8080");
  EXPECT_EQ(endpoint->path_prefix, "");
  EXPECT_EQ(endpoint->PoolKey(), "127.0.0.1:8080");

  auto prefixed = ParseBaseUrl("http://engine-3/v1/");
  ASSERT_TRUE(prefixed.ok()) << prefixed.status();
  EXPECT_EQ(prefixed->host, "engine-3");
  EXPECT_EQ(prefixed->port, 80);
  EXPECT_EQ(prefixed->path_prefix, "/v1");
}

TEST(ParseBaseUrlTest, KeepsIpv6BracketsOnlyInTheHostHeader) {
  auto endpoint = ParseBaseUrl("http://[::1]:9000");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->host, "::1");
  EXPECT_EQ(endpoint->host_header, "[::1]:9000");
  EXPECT_EQ(endpoint->PoolKey(), "[::1]:9000");
}

TEST(ParseBaseUrlTest, RejectsWhatTheClientCannotUse) {
  for (const char* url : {"https://127.0.0.1:8443", "127.0.0.1:8080", "http://", "not a url",
                          "http://h:8080/?q=1", "http://u:p@h:1", "ftp://h/"}) {
    auto endpoint = ParseBaseUrl(url);
    EXPECT_FALSE(endpoint.ok()) << url;
    if (!endpoint.ok()) {
      EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument) << url;
    }
  }
}

// Boost.URL 1.81's port_number() keeps the low 16 bits: 89536 would be port 24000 and 65536
// port 0. Every URL flag goes through ParseBaseUrl, so this is where a port is checked.
TEST(ParseBaseUrlTest, RefusesPortsOutsideOneTo65535NamingTheValue) {
  for (const auto& [url, port] : std::vector<std::pair<std::string, std::string>>{
           {"http://127.0.0.1:89536", "89536"},
           {"http://127.0.0.1:65536", "65536"},
           {"http://127.0.0.1:0", "0"},
           {"http://127.0.0.1:00000", "00000"},
           {"http://127.0.0.1:", ""},
           {"http://h:99999999999999999999999/v1", "99999999999999999999999"},
           {"http://[::1]:70000", "70000"},
           {"http://127.0.0.1:3000x", "3000x"}}) {
    auto endpoint = ParseBaseUrl(url);
    ASSERT_FALSE(endpoint.ok()) << url;
    EXPECT_EQ(endpoint.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(endpoint.status().message(), "base URL \"" + url + "\" has an invalid port \"" +
                                               port + "\": a port is in [1, 65535]");
  }
  for (const auto& [url, port] :
       std::vector<std::pair<std::string, uint16_t>>{{"http://127.0.0.1:1", 1},
                                                     {"http://127.0.0.1:65535", 65535},
                                                     {"http://127.0.0.1:08080", 8080},
                                                     {"http://h", 80}}) {
    auto endpoint = ParseBaseUrl(url);
    ASSERT_TRUE(endpoint.ok()) << url << ": " << endpoint.status();
    EXPECT_EQ(endpoint->port, port) << url;
  }
}

TEST(ParseBaseUrlTest, AHostAndPortWithoutSchemeIsAnsweredWithWhatToWrite) {
  for (const char* url : {"127.0.0.1:31000", "localhost:31000"}) {
    auto endpoint = ParseBaseUrl(url);
    ASSERT_FALSE(endpoint.ok()) << url;
    EXPECT_EQ(endpoint.status().message(),
              std::string("base URL \"") + url +
                  "\" has no scheme: write it as http://HOST:PORT, e.g. \"http://" + url + "\"");
  }
}

TEST(TargetPathTest, DropsTheQuery) {
  EXPECT_EQ(TargetPath("/generate?x=1&y=2").value(), "/generate");
  EXPECT_EQ(TargetPath("/").value(), "/");
  EXPECT_EQ(TargetPath("/a%20b").value(), "/a%20b");
  EXPECT_EQ(TargetPath("http://host:1/v1/models?x").value(), "/v1/models");
  EXPECT_EQ(TargetPath("http://host:1").value(), "/");
}

TEST(TargetPathTest, RejectsOtherForms) {
  EXPECT_EQ(TargetPath("*").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TargetPath("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TargetPath("/a b").status().code(), StatusCode::kInvalidArgument);
  // Absolute URIs that name no server path (found by fuzz/http_request_fuzz.cc).
  EXPECT_EQ(TargetPath("mailto:abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TargetPath("http:abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TargetPath("http://h:1e/generate").status().code(), StatusCode::kInvalidArgument);
}

TEST(QueryFlagTest, IsSetOnlyByOneOrTrue) {
  EXPECT_TRUE(QueryFlag("/agentic_kv?reset=1", "reset"));
  EXPECT_TRUE(QueryFlag("/agentic_kv?x=2&reset=true", "reset"));
  EXPECT_FALSE(QueryFlag("/agentic_kv?reset=0", "reset"));
  EXPECT_FALSE(QueryFlag("/agentic_kv?reset=yes", "reset"));
  EXPECT_FALSE(QueryFlag("/agentic_kv?reset", "reset"));
  EXPECT_FALSE(QueryFlag("/agentic_kv", "reset"));
  EXPECT_FALSE(QueryFlag("/agentic_kv?resets=1", "reset"));
  EXPECT_FALSE(QueryFlag("not a target", "reset"));
}

}  // namespace
}  // namespace agentkv::net
