#include "agentkv/protocol/generate_response.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

GenerateResponse MustParse(std::string_view body) {
  StatusOr<GenerateResponse> response = ParseGenerateResponse(body);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? *std::move(response) : GenerateResponse{};
}

GenerateResponse WithReason(FinishReason reason) {
  GenerateResponse response;
  response.text = "ok";
  response.output_ids = {7, 8};
  response.meta_info.id = "r-1";
  response.meta_info.finish_reason = std::move(reason);
  response.meta_info.prompt_tokens = 5;
  response.meta_info.completion_tokens = 2;
  response.meta_info.e2e_latency = 0.5;
  return response;
}

TEST(GenerateResponseTest, FinishReasonsSerializeExactlyAsTheReference) {
  EXPECT_EQ(SerializeGenerateResponse(WithReason(FinishReason::Stop(151645))),
            R"({"text":"ok","output_ids":[7,8],"meta_info":{"id":"r-1","finish_reason":)"
            R"({"type":"stop","matched":151645},"prompt_tokens":5,"completion_tokens":2,)"
            R"("cached_tokens":0,"e2e_latency":0.5}})");
  const auto reason_json = [](const FinishReason& reason) {
    const std::string body = SerializeGenerateResponse(WithReason(reason));
    const size_t begin = body.find("\"finish_reason\":") + 16;
    return body.substr(begin, body.find(",\"prompt_tokens\"") - begin);
  };
  EXPECT_EQ(reason_json(FinishReason::Stop("</tool_call>")),
            R"({"type":"stop","matched":"</tool_call>"})");
  EXPECT_EQ(reason_json(FinishReason::Length(4096)), R"({"type":"length","length":4096})");
  EXPECT_EQ(reason_json(FinishReason::Abort("Abort request r-1")),
            R"({"type":"abort","message":"Abort request r-1","status_code":null,"err_type":null})");
  EXPECT_EQ(reason_json(FinishReason::Abort("too long", 400, "BadRequestError")),
            R"({"type":"abort","message":"too long","status_code":400,)"
            R"("err_type":"BadRequestError"})");
}

TEST(GenerateResponseTest, EveryFormRoundTrips) {
  for (const FinishReason& reason :
       {FinishReason::Stop(2), FinishReason::Stop("\n\"q\""), FinishReason::Length(3),
        FinishReason::Abort("m"), FinishReason::Abort("m", 503, "Unavailable")}) {
    GenerateResponse response = WithReason(reason);
    response.meta_info.cached_tokens = 3;
    response.meta_info.cached_tokens_details =
        CachedTokensDetails{.device = 2, .host = 1, .storage = 5};
    response.meta_info.queue_time = 0.001;
    response.meta_info.e2e_latency = 1.0 / 3.0;
    response.meta_info.output_token_logprobs =
        std::vector<OutputTokenLogprob>{{.logprob = -0.25, .token_id = 7, .text = std::nullopt},
                                        {.logprob = -1e-9, .token_id = 8, .text = "b"}};
    const GenerateResponse parsed = MustParse(SerializeGenerateResponse(response));
    EXPECT_EQ(parsed.text, response.text);
    EXPECT_EQ(parsed.output_ids, response.output_ids);
    EXPECT_EQ(parsed.meta_info.finish_reason, response.meta_info.finish_reason);
    EXPECT_EQ(parsed.meta_info.cached_tokens_details, response.meta_info.cached_tokens_details);
    // Boost.JSON 1.81 may read a double one ulp off; the text itself is exact.
    EXPECT_DOUBLE_EQ(parsed.meta_info.e2e_latency, response.meta_info.e2e_latency);
    ASSERT_TRUE(parsed.meta_info.output_token_logprobs.has_value());
    EXPECT_EQ(parsed.meta_info.output_token_logprobs->at(1).text, "b");
    EXPECT_EQ(SerializeGenerateResponse(parsed).size(), SerializeGenerateResponse(response).size());
  }
}

TEST(GenerateResponseTest, ParsesEngineFixturesIgnoringUnknownMetaKeys) {
  const GenerateResponse stop = MustParse(ReadTestdata("response_stop.json"));
  EXPECT_EQ(stop.text, " Paris.");
  EXPECT_EQ(stop.meta_info.id, "req-17:0");
  EXPECT_EQ(stop.meta_info.finish_reason, FinishReason::Stop(151645));
  ASSERT_TRUE(stop.meta_info.output_token_logprobs.has_value());
  // Relax reads tokens from element [1] of each logprob entry.
  EXPECT_EQ(stop.meta_info.output_token_logprobs->at(0).token_id, 12366);
  EXPECT_EQ(stop.meta_info.output_token_logprobs->at(1).logprob, -0.5);

  const GenerateResponse length = MustParse(ReadTestdata("response_length.json"));
  EXPECT_EQ(length.meta_info.finish_reason, FinishReason::Length(4));
  EXPECT_EQ(length.meta_info.cached_tokens, 3);
  EXPECT_EQ(length.meta_info.cached_tokens_details,
            (CachedTokensDetails{.device = 2, .host = 1, .storage = std::nullopt}));
  EXPECT_EQ(length.meta_info.queue_time, 0.002);

  // An aborted request still returns the tokens generated so far.
  const GenerateResponse abort = MustParse(ReadTestdata("response_abort.json"));
  EXPECT_EQ(abort.meta_info.finish_reason, FinishReason::Abort("Abort request req-19:0"));
  EXPECT_EQ(abort.output_ids, (std::vector<int64_t>{64, 65}));
  EXPECT_EQ(abort.meta_info.completion_tokens, 2);
}

TEST(GenerateResponseTest, StreamingChunkHasNullFinishReason) {
  GenerateResponse chunk = WithReason(FinishReason::Length(1));
  chunk.meta_info.finish_reason.reset();
  const std::string body = SerializeGenerateResponse(chunk);
  EXPECT_NE(body.find(R"("finish_reason":null)"), std::string::npos);
  EXPECT_FALSE(MustParse(body).meta_info.finish_reason.has_value());
}

TEST(GenerateResponseTest, NanLogprobIsWrittenAsNull) {
  GenerateResponse response = WithReason(FinishReason::Length(1));
  response.meta_info.output_token_logprobs =
      std::vector<OutputTokenLogprob>{{.logprob = std::nan(""), .token_id = 1, .text = {}}};
  const std::string body = SerializeGenerateResponse(response);
  EXPECT_NE(body.find(R"("output_token_logprobs":[[null,1,null]])"), std::string::npos) << body;
  EXPECT_TRUE(std::isnan(MustParse(body).meta_info.output_token_logprobs->at(0).logprob));
}

TEST(GenerateResponseTest, WrongShapesAreErrors) {
  struct Case {
    std::string_view body;
    std::string_view message;
  };
  const Case cases[] = {
      {R"([])", "generate response: expected a JSON object"},
      {R"({"text": 1})", "text: expected a string"},
      {R"({"output_ids": [1, "2"]})", "output_ids[1]: expected an integer"},
      {R"({"meta_info": []})", "meta_info: expected an object"},
      {R"({"meta_info": {"finish_reason": {"type": "eos"}}})",
       "meta_info.finish_reason.type: unknown finish reason \"eos\""},
      {R"({"meta_info": {"finish_reason": "stop"}})",
       "meta_info.finish_reason: expected an object"},
      {R"({"meta_info": {"finish_reason": {"type": "stop", "matched": [1]}}})",
       "meta_info.finish_reason.matched: expected a token id or a string"},
      {R"({"meta_info": {"output_token_logprobs": [[0.1]]}})",
       "meta_info.output_token_logprobs[0]: expected [logprob, token_id, text_or_null]"},
      {R"({"meta_info": {"e2e_latency": "1s"}})", "meta_info.e2e_latency: expected a number"},
      {R"({"error": {"message": "Requested token count exceeds the model's maximum context length"}})",
       "generate response is an error: Requested token count exceeds the model's maximum "
       "context length"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseGenerateResponse(c.body).status(), InvalidArgumentError(std::string(c.message)))
        << c.body;
  }
}

TEST(GenerateResponseTest, ErrorMessagesAreReadFromEveryErrorShape) {
  EXPECT_EQ(ParseErrorMessage(R"({"error":{"message":"Check if a session is open"}})"),
            "Check if a session is open");
  EXPECT_EQ(ParseErrorMessage(R"({"error":{"message":"maximum context length","code":400}})"),
            "maximum context length");
  EXPECT_EQ(ParseErrorMessage(R"({"error": "Worker not found"})"), "Worker not found");
  EXPECT_EQ(ParseErrorMessage(R"({"object":"error","message":"m","type":"Bad Request",)"
                              R"("param":null,"code":400})"),
            "m");
  EXPECT_EQ(ParseErrorMessage("not json"), std::nullopt);
  EXPECT_EQ(ParseErrorMessage(R"({"error": {"code": 1}})"), std::nullopt);
}

TEST(GenerateResponseTest, MalformedResponsesNeverCrash) {
  for (const std::string_view name :
       {"response_stop.json", "response_length.json", "response_abort.json"}) {
    ForEachMalformedVariant(ReadTestdata(name), 13, [](const std::string& body) {
      const StatusOr<GenerateResponse> response = ParseGenerateResponse(body);
      ExpectInputError(response.status());
      if (response.ok()) {
        EXPECT_TRUE(ParseGenerateResponse(SerializeGenerateResponse(*response)).ok());
      }
    });
  }
}

}  // namespace
}  // namespace agentkv::protocol
