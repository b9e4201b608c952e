#include "agentkv/net/error_body.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace agentkv::net {
namespace {

namespace json = boost::json;

TEST(ErrorBodyTest, TheFamilyIsChosenByTheV1PathPrefix) {
  for (std::string_view openai :
       {"/v1", "/v1/", "/v1/chat/completions", "/v1/models?x=1", "/v1?limit=1", "/v1#frag"}) {
    EXPECT_EQ(ApiFamilyOf(openai), ApiFamily::kOpenAi) << openai;
  }
  for (std::string_view sglang : {"/", "/generate", "/v10/models", "/v1x", "/api/v1/models",
                                  "/flush_cache?v1/", "", "v1/models"}) {
    EXPECT_EQ(ApiFamilyOf(sglang), ApiFamily::kSglang) << sglang;
  }
}

TEST(ErrorBodyTest, OpenAiBodiesAreFlatWithTheSdkTypeOfTheStatus) {
  EXPECT_EQ(OpenAiErrorBody("n: only n = 1 is served", 400),
            R"({"object":"error","message":"n: only n = 1 is served","type":"BadRequestError",)"
            R"("param":null,"code":400})");
  const std::pair<int, std::string_view> types[] = {
      {400, "BadRequestError"},       {401, "AuthenticationError"},
      {403, "PermissionDeniedError"}, {404, "NotFoundError"},
      {405, "BadRequestError"},       {409, "ConflictError"},
      {413, "BadRequestError"},       {422, "UnprocessableEntityError"},
      {429, "RateLimitError"},        {500, "InternalServerError"},
      {502, "InternalServerError"},   {503, "InternalServerError"},
      {504, "InternalServerError"},
  };
  for (const auto& [status, type] : types) {
    const json::value body = json::parse(OpenAiErrorBody("m", status));
    EXPECT_EQ(body.at("type").as_string(), type) << status;
    EXPECT_EQ(body.at("code").as_int64(), status);
    EXPECT_TRUE(body.at("param").is_null());
  }
}

TEST(ErrorBodyTest, SglangBodiesNestTheMessageAndTheStatus) {
  EXPECT_EQ(SglangErrorBody("bad \"x\"\n", 400),
            R"({"error":{"message":"bad \"x\"\n","code":400}})");
}

TEST(ErrorBodyTest, AStreamErrorEventCarriesTheFlatErrorUnderError) {
  const json::value event = json::parse(OpenAiStreamErrorBody("context too long", 400));
  EXPECT_EQ(event.at("error"), json::parse(OpenAiErrorBody("context too long", 400)));
}

TEST(ErrorBodyTest, ErrorBodyForPicksTheTargetsFamily) {
  EXPECT_EQ(ErrorBodyFor("/v1/completions", "m", 503), OpenAiErrorBody("m", 503));
  EXPECT_EQ(ErrorBodyFor("/generate?stream=1", "m", 503), SglangErrorBody("m", 503));
}

}  // namespace
}  // namespace agentkv::net
