#include "agentkv/service/common/engine_directory.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace agentkv::service {
namespace {

// A router answering each path with a fixed response (or an error when absent).
RouterGet FakeRouter(std::map<std::string, net::ClientResponse> answers,
                     std::vector<std::string>* asked) {
  return [answers = std::move(answers),
          asked](std::string_view path) -> StatusOr<net::ClientResponse> {
    asked->emplace_back(path);
    auto it = answers.find(std::string(path));
    if (it == answers.end()) return UnavailableError("connection refused");
    return it->second;
  };
}

net::ClientResponse Ok(std::string body) { return net::ClientResponse{200, {}, std::move(body)}; }

TEST(DiscoverEngineUrlsTest, HealthyWorkersWithoutRankSuffixesDeduplicated) {
  std::vector<std::string> asked;
  StatusOr<std::vector<std::string>> urls = DiscoverEngineUrls(
      FakeRouter({{"/workers", Ok(R"({"workers":[{"url":"http://a:1@0","is_healthy":true},)"
                                  R"({"url":"http://a:1@1","is_healthy":true},)"
                                  R"({"url":"http://b:2","is_healthy":false},)"
                                  R"({"url":"http://c:3"}],"total":3})")}},
                 &asked));
  ASSERT_TRUE(urls.ok()) << urls.status();
  EXPECT_EQ(*urls, (std::vector<std::string>{"http://a:1", "http://c:3"}));
  EXPECT_EQ(asked, (std::vector<std::string>{"/workers"}));
}

TEST(DiscoverEngineUrlsTest, FallsBackToListWorkersWhenWorkersFailsOrIsEmpty) {
  for (const auto& workers : std::vector<std::map<std::string, net::ClientResponse>>{
           {},
           {{"/workers", net::ClientResponse{500, {}, ""}}},
           {{"/workers", Ok("not json")}},
           {{"/workers", Ok(R"({"workers":[{"url":"http://b:2","is_healthy":false}]})")}}}) {
    std::map<std::string, net::ClientResponse> answers = workers;
    answers["/list_workers"] = Ok(R"({"urls":["http://x:9@0","http://x:9@1","http://y:8"]})");
    std::vector<std::string> asked;
    StatusOr<std::vector<std::string>> urls = DiscoverEngineUrls(FakeRouter(answers, &asked));
    ASSERT_TRUE(urls.ok()) << urls.status();
    EXPECT_EQ(*urls, (std::vector<std::string>{"http://x:9", "http://y:8"}));
    EXPECT_EQ(asked, (std::vector<std::string>{"/workers", "/list_workers"}));
  }
}

TEST(DiscoverEngineUrlsTest, UnavailableNamingBothFailures) {
  std::vector<std::string> asked;
  StatusOr<std::vector<std::string>> urls =
      DiscoverEngineUrls(FakeRouter({{"/list_workers", Ok(R"({"urls":[]})")}}, &asked));
  ASSERT_FALSE(urls.ok());
  EXPECT_EQ(urls.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(urls.status().message().find("/workers: connection refused"), std::string::npos);
  EXPECT_NE(urls.status().message().find("/list_workers: no worker"), std::string::npos);
}

TEST(EngineDirectoryTest, AFixedListIsNormalizedAndServedRoundRobin) {
  EngineDirectory directory("", {"http://a:1@0", "http://a:1@1", "http://b:2"}, nullptr);
  EXPECT_FALSE(directory.uses_router());
  EXPECT_EQ(directory.urls(), (std::vector<std::string>{"http://a:1", "http://b:2"}));
  EXPECT_EQ(*directory.Refresh(), directory.urls());
  EXPECT_EQ(directory.NextEngine(), "http://a:1");
  EXPECT_EQ(directory.NextEngine(), "http://b:2");
  EXPECT_EQ(directory.NextEngine(), "http://a:1");
  EngineDirectory empty("", {}, nullptr);
  EXPECT_FALSE(empty.NextEngine().has_value());
}

}  // namespace
}  // namespace agentkv::service
