#include "agentkv/load/live_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

namespace agentkv::load {
namespace {

using testing::Contains;
using testing::Pair;

boost::json::object Body(const HttpCall& call) { return boost::json::parse(call.body).as_object(); }

WireRequest Agent() {
  WireRequest r;
  r.rid = "load-x-r3:0";
  r.session = "load-x-5001";
  r.routing_key = "load-x-5";
  r.prompt = {1001, 1002, 1003};
  r.max_new_tokens = 4;
  r.pause = PauseKind::kToolCall;
  r.parent_session = "load-x-5";
  r.parent_signature = "ab12";
  r.retain = true;
  return r;
}

TEST(LiveRequestTest, ApiNamesRoundTrip) {
  for (LoadApi api : {LoadApi::kGenerate, LoadApi::kCompletions, LoadApi::kChat}) {
    EXPECT_EQ(ParseLoadApi(LoadApiName(api)), api);
  }
  EXPECT_FALSE(ParseLoadApi("responses").has_value());
}

TEST(LiveRequestTest, GenerateSendsIdsSessionAndEveryAgentHeader) {
  const HttpCall call = BuildCall(Agent());
  EXPECT_EQ(call.target, "/generate");
  const boost::json::object body = Body(call);
  EXPECT_EQ(body.at("input_ids"), (boost::json::array{1001, 1002, 1003}));
  EXPECT_EQ(body.at("sampling_params").at("max_new_tokens"), 4);
  EXPECT_EQ(body.at("sampling_params").at("ignore_eos"), true);
  EXPECT_EQ(body.at("stream"), true);
  EXPECT_EQ(body.at("rid"), "load-x-r3:0");
  EXPECT_EQ(body.at("session_id"), "load-x-5001");
  EXPECT_THAT(call.headers, Contains(Pair("X-SMG-Routing-Key", "load-x-5")));
  EXPECT_THAT(call.headers, Contains(Pair("X-Agentkv-Pause", "tool_call")));
  EXPECT_THAT(call.headers, Contains(Pair("X-Agentkv-Parent-Session", "load-x-5")));
  EXPECT_THAT(call.headers, Contains(Pair("X-Agentkv-Parent-Signature", "ab12")));
  EXPECT_THAT(call.headers, Contains(Pair("X-Agentkv-Session-Retain", "1")));
}

TEST(LiveRequestTest, APlainClientSendsNoExtras) {
  WireRequest r;
  r.rid = "x:0";
  r.prompt = {1001};
  const HttpCall call = BuildCall(r);
  EXPECT_FALSE(Body(call).contains("session_id"));
  ASSERT_EQ(call.headers.size(), 1u);
  EXPECT_EQ(call.headers[0].first, "Content-Type");
}

TEST(LiveRequestTest, OpenAiRoutesCarryTheModelTheLengthAndUsage) {
  WireRequest r = Agent();
  r.api = LoadApi::kCompletions;
  r.model = "m";
  HttpCall call = BuildCall(r);
  EXPECT_EQ(call.target, "/v1/completions");
  boost::json::object body = Body(call);
  EXPECT_EQ(body.at("prompt"), (boost::json::array{1001, 1002, 1003}));
  EXPECT_EQ(body.at("max_tokens"), 4);
  EXPECT_EQ(body.at("model"), "m");
  EXPECT_EQ(body.at("stream_options").at("include_usage"), true);
  r.api = LoadApi::kChat;
  call = BuildCall(r);
  EXPECT_EQ(call.target, "/v1/chat/completions");
  body = Body(call);
  EXPECT_EQ(body.at("messages").at(0).at("content").as_string(), SpellTokens(r.prompt));
}

TEST(LiveRequestTest, SpelledTokensAreFourBytesEachAndDistinct) {
  const std::string text = SpellTokens({1001, 1002, 46656 + 1001});
  EXPECT_EQ(text.size(), 12u);
  EXPECT_NE(text.substr(0, 4), text.substr(4, 4));
  EXPECT_EQ(text.substr(0, 4), text.substr(8, 4));  // Ids equal modulo 36^3 spell alike.
}

TEST(LiveRequestTest, SessionCloseTargetEncodesTheId) {
  EXPECT_EQ(SessionCloseTarget("load-a-1"), "/v1/sessions/load-a-1/close");
  EXPECT_EQ(SessionCloseTarget("a/b c"), "/v1/sessions/a%2Fb%20c/close");
}

TEST(StreamReaderTest, GenerateStreamsCumulativeOrIncrementalIdsAndTheCachedCount) {
  StreamReader cumulative(LoadApi::kGenerate);
  EXPECT_FALSE(cumulative.Feed(": keep-alive\n\n"));
  EXPECT_TRUE(cumulative.Feed(
      "data: {\"text\":\"a\",\"output_ids\":[7],\"meta_info\":{\"id\":\"r\",\"finish_reason\":null,"
      "\"prompt_tokens\":3,\"completion_tokens\":1,\"cached_tokens\":2,\"e2e_latency\":0.1}}\n\n"
      "data: {\"text\":\"ab\",\"output_ids\":[7,8],"));
  EXPECT_TRUE(cumulative.Feed(
      "\"meta_info\":{\"id\":\"r\",\"finish_reason\":{\"type\":\"length\",\"length\":2},"
      "\"prompt_tokens\":3,\"completion_tokens\":2,\"cached_tokens\":2,"
      "\"cached_tokens_details\":{\"device\":1,\"host\":1},\"e2e_latency\":0.2}}\n\ndata: "
      "[DONE]\n\n"));
  EXPECT_TRUE(cumulative.done());
  ASSERT_TRUE(cumulative.status().ok());
  const StreamOutcome& a = cumulative.outcome();
  EXPECT_EQ(a.output_ids, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(a.output_events, 2);
  EXPECT_EQ(a.cached_tokens, 2);
  EXPECT_EQ(a.cached_device_tokens, 1);
  EXPECT_EQ(a.cached_host_tokens, 1);
  EXPECT_EQ(a.completion_tokens, 2);

  StreamReader incremental(LoadApi::kGenerate);
  incremental.Feed(
      "data: {\"text\":\"a\",\"output_ids\":[7],\"meta_info\":{\"id\":\"r\",\"prompt_tokens\":3,"
      "\"completion_tokens\":1,\"cached_tokens\":0,\"e2e_latency\":0.1}}\n\n"
      "data: {\"text\":\"b\",\"output_ids\":[8],\"meta_info\":{\"id\":\"r\",\"prompt_tokens\":3,"
      "\"completion_tokens\":2,\"cached_tokens\":0,\"e2e_latency\":0.1}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(incremental.outcome().output_ids, (std::vector<int64_t>{7, 8}));
}

TEST(StreamReaderTest, OpenAiStreamsCountTextDeltasAndReadUsage) {
  StreamReader reader(LoadApi::kChat);
  EXPECT_FALSE(reader.Feed(
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"));
  EXPECT_TRUE(reader.Feed("data: {\"choices\":[{\"delta\":{\"content\":\" t1\"}}]}\n\n"));
  EXPECT_FALSE(
      reader.Feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,"
                  "\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n"));
  EXPECT_EQ(reader.outcome().cached_tokens, 4);
  EXPECT_EQ(reader.outcome().prompt_tokens, 9);
  EXPECT_EQ(reader.outcome().output_events, 1);
  EXPECT_TRUE(reader.done());
}

TEST(StreamReaderTest, ErrorEventsAndMalformedEventsAreReported) {
  StreamReader error(LoadApi::kCompletions);
  error.Feed("data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(error.outcome().error, "boom");
  EXPECT_FALSE(error.outcome().error_code.has_value());
  StreamReader refused(LoadApi::kGenerate);
  refused.Feed("data: {\"error\":{\"message\":\"too long\",\"code\":400}}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(refused.outcome().error, "too long");
  EXPECT_EQ(refused.outcome().error_code, 400);
  StreamReader malformed(LoadApi::kCompletions);
  malformed.Feed("data: [1,\n\n");
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace agentkv::load
