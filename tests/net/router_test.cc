#include "agentkv/net/router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agentkv::net {
namespace {

// Records what a handler answered; no network.
class RecordingWriter : public ResponseWriter {
 public:
  void Reply(Response response) override { replies.push_back(std::move(response)); }
  void StartStream(http::status, HeaderList) override {}
  void WriteChunk(std::string) override {}
  void EndStream() override {}
  void AbortStream() override {}
  bool client_gone() const override { return false; }
  void OnClientGone(std::function<void()>) override {}

  std::vector<Response> replies;
};

// A handler that answers 200 with `name`, so tests see which route ran.
Handler Named(std::string name) {
  return [name](Request request, std::shared_ptr<ResponseWriter> writer) {
    writer->Reply(MakeResponse(request, http::status::ok, name, "text/plain"));
  };
}

class RouterTest : public ::testing::Test {
 protected:
  Response Call(http::verb method, std::string target) {
    auto writer = std::make_shared<RecordingWriter>();
    Request request{method, target, 11};
    router_.AsHandler()(std::move(request), writer);
    EXPECT_EQ(writer->replies.size(), 1u);
    return writer->replies.empty() ? Response{} : writer->replies.front();
  }

  Router router_;
};

TEST_F(RouterTest, DispatchesByMethodAndExactPathIgnoringTheQuery) {
  router_.Add(http::verb::post, "/generate", Named("generate"));
  router_.Add(http::verb::get, "/health", Named("health"));
  EXPECT_EQ(Call(http::verb::post, "/generate").body(), "generate");
  EXPECT_EQ(Call(http::verb::post, "/generate?stream=1").body(), "generate");
  EXPECT_EQ(Call(http::verb::get, "/health").body(), "health");
  EXPECT_EQ(Call(http::verb::get, "/health/").result(), http::status::not_found);
}

TEST_F(RouterTest, UnknownPathIsJson404) {
  router_.Add(http::verb::get, "/health", Named("health"));
  Response response = Call(http::verb::get, "/nope?x=1");
  EXPECT_EQ(response.result(), http::status::not_found);
  EXPECT_EQ(response[http::field::content_type], "application/json");
  EXPECT_EQ(response.body(), R"({"error":{"message":"no route for GET /nope","code":404}})");
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  router_.Add(http::verb::get, "/models", Named("list"));
  router_.Add(http::verb::put, "/models", Named("put"));
  Response response = Call(http::verb::delete_, "/models");
  EXPECT_EQ(response.result(), http::status::method_not_allowed);
  EXPECT_EQ(response[http::field::allow], "GET, HEAD, PUT");
  EXPECT_THAT(response.body(), ::testing::HasSubstr("DELETE"));
}

TEST_F(RouterTest, APrefixRouteTakesAnyTailAndTheLongestPrefixWins) {
  router_.AddPrefix(http::verb::get, "/v1/", Named("v1"));
  router_.AddPrefix(http::verb::get, "/v1/models/", Named("model"));
  router_.Add(http::verb::get, "/v1/models", Named("list"));
  EXPECT_EQ(Call(http::verb::get, "/v1/models").body(), "list");
  EXPECT_EQ(Call(http::verb::get, "/v1/models/llama").body(), "model");
  EXPECT_EQ(Call(http::verb::get, "/v1/models/meta-llama/Llama-3.1-8B?x=1").body(), "model");
  EXPECT_EQ(Call(http::verb::get, "/v1/other").body(), "v1");
  // The prefix alone has no tail: it is no route.
  EXPECT_EQ(Call(http::verb::get, "/v1/").result(), http::status::not_found);
  // An exact route wins over a prefix that covers it.
  router_.Add(http::verb::get, "/v1/models/special", Named("special"));
  EXPECT_EQ(Call(http::verb::get, "/v1/models/special").body(), "special");
  Response wrong = Call(http::verb::post, "/v1/models/llama");
  EXPECT_EQ(wrong.result(), http::status::method_not_allowed);
  EXPECT_EQ(wrong[http::field::allow], "GET, HEAD");
}

TEST(RouterDeathTest, APrefixMustEndWithASlash) {
  Router router;
  EXPECT_DEATH(router.AddPrefix(http::verb::get, "/v1/models", Named("x")), "must end with '/'");
}

TEST_F(RouterTest, SpecificMethodWinsOverAny) {
  router_.AddAny("/x", Named("any"));
  router_.Add(http::verb::get, "/x", Named("get"));
  EXPECT_EQ(Call(http::verb::get, "/x").body(), "get");
  EXPECT_EQ(Call(http::verb::patch, "/x").body(), "any");
}

TEST_F(RouterTest, HeadFallsBackToGet) {
  router_.Add(http::verb::get, "/x", Named("get"));
  EXPECT_EQ(Call(http::verb::head, "/x").body(), "get");
}

TEST_F(RouterTest, FallbackTakesUnknownPaths) {
  router_.Add(http::verb::get, "/x", Named("x"));
  router_.SetFallback(Named("fallback"));
  EXPECT_EQ(Call(http::verb::get, "/y").body(), "fallback");
  // A known path with a wrong method is still 405, not the fallback.
  EXPECT_EQ(Call(http::verb::post, "/x").result(), http::status::method_not_allowed);
}

TEST_F(RouterTest, MalformedTargetIs400) {
  router_.Add(http::verb::get, "/x", Named("x"));
  EXPECT_EQ(Call(http::verb::get, "*").result(), http::status::bad_request);
}

TEST_F(RouterTest, AsHandlerIsASnapshot) {
  router_.Add(http::verb::get, "/a", Named("a"));
  Handler handler = router_.AsHandler();
  router_.Add(http::verb::get, "/b", Named("b"));
  auto writer = std::make_shared<RecordingWriter>();
  handler(Request{http::verb::get, "/b", 11}, writer);
  ASSERT_EQ(writer->replies.size(), 1u);
  EXPECT_EQ(writer->replies[0].result(), http::status::not_found);
}

TEST(RouterDeathTest, DuplicateRouteAborts) {
  Router router;
  router.Add(http::verb::get, "/a", Named("a"));
  EXPECT_DEATH(router.Add(http::verb::get, "/a", Named("again")), "duplicate route");
  EXPECT_DEATH(router.Add(http::verb::get, "relative", Named("r")), "must start with");
}

}  // namespace
}  // namespace agentkv::net
